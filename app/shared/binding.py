"""Turning a tab's handler ``handler(s, *inputs)`` into the Gradio handler of its inputs."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import gradio as gr


def gpu(fn):
    """``spaces.GPU`` on a Hugging Face ZeroGPU Space; a no-op anywhere else."""
    try:
        import spaces  # noqa: PLC0415
    except ImportError:
        return fn
    return spaces.GPU(fn)


def bind(s, fn: Callable, *bound, request: type | None = None,
         on_gpu: bool = False, what: str | None = None) -> Callable:
    """``fn(s, *bound, *inputs)`` as a Gradio handler of ``*inputs`` (``s``: the app's state,
    ``app.shared.state.AppState``; ``bound``: the tab's
    components, for handlers that return updates keyed by component; ``on_gpu``: wrapped by
    ``gpu``). ``request``: a class whose parameters are the inputs (its ``signature()``, or a
    dataclass's fields; app/shared/ask_request.py): the handler's parameters are those and
    ``fn`` receives one instance of it.

    Written by hand because ``functools.partial`` does not fit: Gradio reads a handler's type
    hints (``gr.SelectData``) and defaults (``gr.Progress``, a parameter a client may leave out)
    from the function itself, which a partial hides, and it streams only from a generator
    function. The handler keeps ``fn``'s name, signature (less ``s`` and ``bound``, or
    ``request``'s), annotations and generator-ness. ``s`` is closed over, never passed as an
    argument, so a ZeroGPU worker receives only the request's plain inputs.

    Every handler runs inside ``app.shared.user_errors.user_errors``: whatever fails is one line
    on the page naming the cause (``what`` failed, by default the action of ``fn``'s name in
    ``ACTIONS``), with a reference in the server's log.
    """
    from app.shared.user_errors import ACTIONS, user_errors  # noqa: PLC0415 (imports the engine)

    what = what or ACTIONS.get(fn.__name__, "This action")
    skip = 1 + len(bound)
    wants_user = "user" in inspect.signature(fn).parameters  # keyword-only: the signed-in name
    if request is None:
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=[p for p in list(sig.parameters.values())[skip:]
                                      if p.name != "user"])

        def inputs(*args, **kwargs):
            return args, kwargs
    else:
        sig = (request.signature() if hasattr(request, "signature")
               else inspect.signature(request)).replace(
            return_annotation=inspect.Signature.empty)

        def inputs(*args, **kwargs):
            return (request(*args, **kwargs),), {}
    if wants_user:  # Gradio fills a positional gr.Request parameter (after the inputs): its
        # username is the signed-in name
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind not in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), len(params))
        sig = sig.replace(parameters=[*params[:at], inspect.Parameter(
            "gr_request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
            annotation=gr.Request), *params[at:]])
        plain_inputs = inputs

        def inputs(*args, **kwargs):
            req = kwargs.pop("gr_request", None)
            # at its place, or (a client that left an input with a default out) right after
            # the inputs it sent: Gradio inserts it at its index of a shorter list
            i = next((i for i in range(len(args) - 1, -1, -1)
                      if isinstance(args[i], gr.Request)), None)
            if i is not None:
                args, req = args[:i] + args[i + 1:], args[i]
            args, kwargs = plain_inputs(*args, **kwargs)
            return args, {**kwargs, "user": getattr(req, "username", None)}
    if inspect.isgeneratorfunction(fn):
        def handler(*args, **kwargs):
            args, kwargs = inputs(*args, **kwargs)
            with user_errors(what):
                yield from fn(s, *bound, *args, **kwargs)
    else:
        def handler(*args, **kwargs):
            args, kwargs = inputs(*args, **kwargs)
            with user_errors(what):
                return fn(s, *bound, *args, **kwargs)
    functools.update_wrapper(handler, fn)
    handler.__signature__ = sig
    handler.__annotations__ = {k: v for k, v in fn.__annotations__.items()
                               if k in sig.parameters or k == "return"}
    if wants_user:
        handler.__annotations__["gr_request"] = gr.Request
    return gpu(handler) if on_gpu else handler
