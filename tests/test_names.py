"""Every dotted name of the project's packages that the code or the docs cite
(``engine.answer.passages.quote``, ``storage.unit_vectors.UnitVectorStore``, also written as a
path with its attribute, ``app/shared/binding.bind``) resolves: a module, or an attribute of one. A
module renamed or moved leaves no pointer to nowhere. The changelog is history (the names of
its day) and is left out."""
from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "storage", "app", "bench")
NAME = re.compile(r"(?<![\w./-])((?:%s)(?:\.[A-Za-z_]\w*)+)" % "|".join(PACKAGES))
# ``app/shared/binding.bind``: a module's path with the name of one of its attributes after the dot
PATH_NAME = re.compile(r"(?<![\w./-])((?:%s)(?:/[A-Za-z_]\w*)+)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
                       % "|".join(PACKAGES))
HISTORY = {ROOT / "docs" / "CHANGELOG.md"}
# this file's own examples of stale names are left out too
FILES = [p for d in (*PACKAGES, "tests", "docs", "scripts") for p in (ROOT / d).rglob("*")
         if p.suffix in (".py", ".md") and p not in HISTORY and p != Path(__file__).resolve()]
FILES.append(ROOT / "README.md")
EXTENSIONS = {"py", "md", "json", "jsonl", "toml", "txt", "pdf", "safetensors", "png", "csv",
              "log", "gguf", "html", "pt", "sqlite3", "yaml", "yml", "sh", "js", "css"}
# What prose writes with a package's name that is no name of the package: a Gradio client's
# methods (README's API examples), a placeholder (bench/README.md's ``python -m bench.NAME``).
NOT_OURS = {"app.predict", "app.submit", "bench.NAME"}


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


def dotted_names(text: str) -> list[str]:
    """The ``pkg.x.y`` names written in ``text`` (file names written with dots left out)."""
    names = [m.group(1).rstrip(".") for m in NAME.finditer(text)]
    return [n for n in names if not n.endswith((".py", ".md", ".json", ".toml", ".txt"))]


def path_names(text: str) -> list[str]:
    """``pkg/mod.attr`` written in ``text``, as the dotted name ``pkg.mod.attr`` (a file name,
    ``app/shared/example_manual/etoolbox.pdf``, left out)."""
    out = []
    for m in PATH_NAME.finditer(text):
        path, attrs = m.group(1), m.group(2).rstrip(".")
        first = attrs.split(".")[0]
        if first in EXTENSIONS or (ROOT / f"{path}.{first}").exists():
            continue
        out.append(f"{path.replace('/', '.')}.{attrs}")
    return out


def prose(path: Path) -> str:
    """What people read in ``path``: a Markdown file whole, a module's docstrings and comments."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".md":
        return text
    pieces = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            pieces.append(ast.get_docstring(node, clean=False) or "")
    pieces += [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
               if t.type == tokenize.COMMENT]
    return "\n".join(pieces)


def cited_names() -> dict[str, set[str]]:
    """Every project name cited anywhere (code included) whose first part after the package
    is one of its modules, and every ``pkg/mod.attr``."""
    out: dict[str, set[str]] = {}
    for path in FILES:
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in [*(n for n in dotted_names(text) if is_project_name(n)), *path_names(text)]:
            out.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return out


def prose_names() -> dict[str, set[str]]:
    """Every ``pkg.x...`` written in docstrings, comments and the docs, whatever ``x`` is: a
    module since moved or renamed is no longer one, so it counts too."""
    out: dict[str, set[str]] = {}
    for path in FILES:
        for name in dotted_names(prose(path)):
            if name not in NOT_OURS:
                out.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return out


def stale_report(names: dict[str, set[str]]) -> str:
    stale = {n: sorted(where) for n, where in names.items() if not resolves(n)}
    return "\n".join(f"  {n}  ({', '.join(w[:3])})" for n, w in sorted(stale.items()))


def test_every_cited_name_resolves():
    stale = stale_report(cited_names())
    assert not stale, "names that resolve to nothing:\n" + stale


def test_every_name_in_docstrings_comments_and_docs_resolves():
    names = prose_names()
    assert "engine.settings.split_userinfo" in names  # the walk reads docs/architecture.md
    stale = stale_report(names)
    assert not stale, "names in prose that resolve to nothing:\n" + stale


def test_the_checks_find_a_stale_name(tmp_path):
    """The checks themselves can fail: a module that no longer exists, an attribute a module
    lacks, and either written as a path, are reported; file names are not names."""
    doc = tmp_path / "x.py"
    doc.write_text('"""See ``engine.gone.thing`` and ``app.shared.state.no_such_helper``."""\n'
                   "# app/shared/binding.no_such  and app/shared/example_manual/etoolbox.pdf\n"
                   "# and app/gone.f\n"
                   "x = engine.begin()  # code: a variable that shares a package's name\n")
    names = dotted_names(prose(doc)) + path_names(prose(doc))
    assert names == ["engine.gone.thing", "app.shared.state.no_such_helper",
                     "app.shared.binding.no_such", "app.gone.f"]
    assert not any(resolves(n) for n in names)
    assert resolves("app.shared.binding.bind") and resolves("engine.settings.Settings.from_env")
