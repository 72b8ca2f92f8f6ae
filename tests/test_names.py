"""Every dotted name of the project's packages that the code or the docs cite
(``engine.answer.passages.quote``, ``storage.unit_vectors.UnitVectorStore``) resolves: a module,
or an attribute of one. A module renamed or moved leaves no pointer to nowhere."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "storage", "app", "bench")
NAME = re.compile(r"(?<![\w./-])((?:%s)(?:\.[A-Za-z_]\w*)+)" % "|".join(PACKAGES))
FILES = [p for d in (*PACKAGES, "tests", "docs", "scripts") for p in (ROOT / d).rglob("*")
         if p.suffix in (".py", ".md")] + [ROOT / "README.md"]


def is_project_name(name: str) -> bool:
    """``pkg.sub...`` with ``sub`` a module or package of ``pkg`` (``engine.begin`` is a database
    engine's method, ``app.submit`` a client's: variables that share a package's name)."""
    pkg, sub = name.split(".")[:2]
    return (ROOT / pkg / f"{sub}.py").is_file() or (ROOT / pkg / sub / "__init__.py").is_file()


def _has(obj, attr: str) -> bool:
    """An attribute, a dataclass field or annotated attribute without a default, or an instance
    attribute a class sets (``self.attr = ...``)."""
    if hasattr(obj, attr) or attr in getattr(obj, "__dataclass_fields__", {}) \
            or attr in getattr(obj, "__annotations__", {}):
        return True
    if inspect.isclass(obj):
        return re.search(rf"\bself\.{re.escape(attr)}\s*=", inspect.getsource(obj)) is not None
    return False


def resolves(name: str) -> bool:
    """A module, or attributes of the longest module prefix of ``name``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not _has(obj, attr):
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def cited_names() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in FILES:
        for m in NAME.finditer(path.read_text(encoding="utf-8", errors="replace")):
            name = m.group(1).rstrip(".")
            if name.endswith((".py", ".md", ".json", ".toml", ".txt")):
                continue  # a file path written with dots (engine/x.py is a path, not a name)
            if is_project_name(name):
                out.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_cited_name_resolves():
    stale = {n: sorted(where) for n, where in cited_names().items() if not resolves(n)}
    assert not stale, "names that resolve to nothing:\n" + "\n".join(
        f"  {n}  ({', '.join(w[:3])})" for n, w in sorted(stale.items()))
