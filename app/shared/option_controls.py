"""A form's control for one Ask option, built from its row (``engine.answer.option_table``):
a checkbox for a switch, a choice for a name, a slider or a number otherwise, labelled with the
modes that read it (``read_by``). The Ask and Compare tabs build theirs here, so a new row
offered on a tab is a control there with no more code."""
from __future__ import annotations

import gradio as gr

from app.shared.ask_request import form_default
from engine.answer.modes import MODES
from engine.answer.option_table import Option, option, reads


def read_by(name: str) -> str:
    """" (memory and flat modes)": the modes that read an Ask option (``option_table.reads``),
    for a control's label; "" when every mode reads it."""
    modes = [m for m, mode in MODES.items() if name in reads(mode)]
    if len(modes) == len(MODES):
        return ""
    names = modes[0] if len(modes) == 1 else f"{', '.join(modes[:-1])} and {modes[-1]}"
    return f" ({names} mode{'s' if len(modes) > 1 else ''})"


def control(o: Option | str, prefix: str, **changes):
    """The control of option ``o`` (a row or its name) on a tab (``prefix``: its element ids,
    ``ask-max-depth``); ``changes``: the tab's own keywords (its place, an element id, the
    choices' words)."""
    o = option(o) if isinstance(o, str) else o
    label = o.label
    if o.none is not None and o.type is int:
        label += f" (0 = {o.none})"
    info = o.help[:1].upper() + o.help[1:]
    kw = dict(value=form_default(o), label=label, info=info,
              elem_id=f"{prefix}-{o.name.replace('_', '-')}")
    if o.type is bool:
        kw["label"] += read_by(o.name)
        return gr.Checkbox(**{**kw, **changes})
    kw["info"] += read_by(o.name)
    if o.choices is not None:
        return gr.Radio(**{"choices": list(o.allowed()), **kw, **changes})
    if o.slider is not None:
        return gr.Slider(*o.slider, **{"step": 1 if o.type is int else 0.05, **kw, **changes})
    return gr.Number(**{"precision": 0 if o.type is int else None, **kw, **changes})
