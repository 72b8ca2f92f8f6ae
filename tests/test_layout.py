"""The engine's import graph: no circles between its modules or its packages, and no imports of
the UI (``app``) or the benches (``bench``); ``storage`` sits below the engine and never imports
it. The UI's: one package per tab over the packages the tabs share, a tab never importing
another tab's package, the shared ones never importing a tab. Read from the source with
``ast``, so a lazy import inside a function (or one under ``TYPE_CHECKING``) counts as much as
one at the top of a module."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]
ENGINE = REPO / "engine"
STORAGE = REPO / "storage"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every module ``path`` imports; ``from pkg import sub`` counts as importing ``pkg.sub``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in known else node.module)
    return found


def package_graph(root: Path) -> tuple[nx.DiGraph, dict[str, set[str]]]:
    """The import graph between the modules under ``root`` (a top-level package), and what
    each imports from outside it."""
    files = sorted(root.rglob("*.py"))
    known = {module_name(f) for f in files}
    graph = nx.DiGraph()
    outside: dict[str, set[str]] = {}
    for f in files:
        name = module_name(f)
        graph.add_node(name)
        for dep in imported_modules(f, known):
            if dep in known and dep != name:
                graph.add_edge(name, dep)
            elif dep.split(".")[0] != root.name:
                outside.setdefault(name, set()).add(dep)
    return graph, outside


def engine_graph() -> tuple[nx.DiGraph, dict[str, set[str]]]:
    return package_graph(ENGINE)


def package_of(module: str) -> str:
    """engine.routing.router -> engine.routing; a top-level module is its own unit."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_import_circle_between_engine_modules():
    graph, _ = engine_graph()
    assert len(graph) > 20  # the walk found the engine
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import circles inside engine/: {cycles}"


def test_no_import_circle_between_app_modules():
    """The UI's modules too: a tab's handlers import its components (app/ask/ask_components.py),
    never the layout module that wires them."""
    graph, _ = package_graph(REPO / "app")
    assert {"app.ask.ask_tab", "app.ask.ask_handlers", "app.ask.ask_components"} <= set(graph.nodes)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import circles inside app/: {cycles}"


# The UI's packages, bottom up: what the tabs share (app.shared: the state and its helpers;
# app.views: an answer as the page shows it, over app.shared), one package per tab, what the
# served app adds around the page (app.server); app.ui (the page) and app.serve (the command)
# sit on top of them all, at app/'s top level.
APP_SHARED = ("app.shared", "app.views")
APP_TABS = ("app.ask", "app.library", "app.compare", "app.evaluation")
APP_SERVER = "app.server"
APP_TOP = {"ui", "serve"}


def bad_app_imports(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """(module, imported module) pairs that break the UI's layering: a tab importing another
    tab's package, a shared package importing a tab, the server or the page, app.shared importing
    app.views, or any package importing app/'s top-level modules."""
    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    bad = []
    for a, b in graph.edges:
        ua, ub = unit(a), unit(b)
        if ua == ub or ub == "app":
            continue
        top = ub.split(".")[1] in APP_TOP
        if ua in APP_TABS and (ub in APP_TABS or ub == APP_SERVER or top):
            bad.append((a, b))
        elif ua in APP_SHARED and (ub not in APP_SHARED
                                   or APP_SHARED.index(ub) > APP_SHARED.index(ua)):
            bad.append((a, b))
        elif ua == APP_SERVER and (ub in APP_TABS or top):
            bad.append((a, b))
    return bad


def test_app_is_one_package_per_tab_over_the_shared_ones():
    """app/ holds the page and the command at its top level and the rest in its packages; every
    package has a docstring saying what it holds."""
    app = REPO / "app"
    top = {p.stem for p in app.glob("*.py")} - {"__init__"}
    packages = {f"app.{p.name}" for p in app.iterdir() if (p / "__init__.py").exists()}
    assert top == APP_TOP, top
    assert packages == {*APP_SHARED, *APP_TABS, APP_SERVER}, packages
    for pkg in packages:
        init = app / pkg.split(".")[1] / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} says nothing"


def test_a_tab_never_imports_another_tabs_package():
    """A tab's package imports its own modules and the shared packages (app.shared, app.views),
    never another tab's, the server's or the page; app.shared sits below app.views, and neither
    imports a tab."""
    graph, _ = package_graph(REPO / "app")
    assert {"app.compare.compare_tab", "app.views.answer_view"} <= set(graph.nodes)
    bad = bad_app_imports(graph)
    assert not bad, f"imports across the UI's layers: {bad}"


def test_the_tab_check_finds_a_tab_importing_another():
    graph = nx.DiGraph([("app.compare.compare_tab", "app.ask.ask_history"),
                        ("app.shared.state", "app.views.hover"),
                        ("app.views.feedback", "app.library.library_tab"),
                        ("app.ask.ask_tab", "app.ui"),
                        ("app.ask.ask_tab", "app.ask.ask_handlers"),
                        ("app.ask.ask_tab", "app.views.answer_view"),
                        ("app.views.answer_view", "app.shared.state"),
                        ("app.ui", "app.ask.ask_tab")])
    assert set(bad_app_imports(graph)) == {("app.compare.compare_tab", "app.ask.ask_history"),
                                           ("app.shared.state", "app.views.hover"),
                                           ("app.views.feedback", "app.library.library_tab"),
                                           ("app.ask.ask_tab", "app.ui")}


def test_no_import_circle_between_engine_packages():
    graph, _ = engine_graph()
    packages = nx.DiGraph()
    for a, b in graph.edges:
        pa, pb = package_of(a), package_of(b)
        if pa != pb and not (pa == "engine" or pb == "engine"):
            packages.add_edge(pa, pb)
    assert {"engine.document", "engine.memory", "engine.routing"} <= set(packages.nodes)
    cycles = list(nx.simple_cycles(packages))
    assert not cycles, f"import circles between engine packages: {cycles}"


def test_engine_never_imports_app_or_bench():
    _, outside = engine_graph()
    bad = {m: sorted(d for d in deps if d.split(".")[0] in {"app", "bench", "gradio", "plotly"})
           for m, deps in outside.items()}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"engine imports the UI or the benches: {bad}"


def storage_imports_of_engine(root: Path) -> dict[str, set[str]]:
    """module of ``root`` -> the ``engine`` modules it imports (none wanted)."""
    found = {}
    for f in sorted(root.rglob("*.py")):
        deps = {d for d in imported_modules(f, set()) if d.split(".")[0] == "engine"}
        if deps:
            found[str(f.relative_to(root.parent))] = deps
    return found


def test_storage_never_imports_the_engine():
    """One direction only: the engine imports storage (its records, the library, the tree as
    data), storage imports nothing of the engine."""
    assert (STORAGE / "library.py").exists()
    bad = storage_imports_of_engine(STORAGE)
    assert not bad, f"storage imports the engine: {bad}"


def test_the_storage_check_finds_an_engine_import(tmp_path):
    """The direction check itself can fail, on a lazy import too."""
    pkg = tmp_path / "storage"
    pkg.mkdir()
    (pkg / "ok.py").write_text("import networkx\nfrom storage.tree import Tree\n")
    (pkg / "bad.py").write_text("def f():\n    from engine.document.tree import Tree\n")
    assert storage_imports_of_engine(pkg) == {"storage/bad.py": {"engine.document.tree"}}


def test_engine_top_level_is_a_handful_of_modules():
    top = sorted(p.stem for p in ENGINE.glob("*.py") if p.stem not in {"__init__", "__main__"})
    packages = sorted(p.name for p in ENGINE.iterdir() if (p / "__init__.py").exists())
    assert len(top) <= 6, top
    assert len(packages) >= 4, packages


def test_the_check_finds_a_circle(tmp_path):
    """The circle check itself can fail: two modules that import each other are reported."""
    (tmp_path / "a.py").write_text("from b import x\n")
    (tmp_path / "b.py").write_text("import a\n")
    graph = nx.DiGraph()
    for f in tmp_path.glob("*.py"):
        for dep in imported_modules(f, {"a", "b"}):
            graph.add_edge(f.stem, dep)
    assert list(nx.simple_cycles(graph))


# A module of the engine, the app or storage holds one concept, and this many lines at most; one
# that outgrows it is split by concept (a package of modules), never squeezed.
MAX_LINES = 400


def long_modules(roots: list[Path], limit: int = MAX_LINES) -> dict[str, int]:
    """path -> line count of every module under ``roots`` longer than ``limit`` lines."""
    found = {}
    for root in roots:
        for f in sorted(root.rglob("*.py")):
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > limit:
                found[str(f.relative_to(root.parent))] = n
    return found


def test_no_module_over_400_lines():
    roots = [ENGINE, REPO / "app", STORAGE]
    assert sum(1 for r in roots for _ in r.rglob("*.py")) > 50  # the walk found the packages
    long = long_modules(roots)
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"


def test_the_length_check_finds_a_long_module(tmp_path):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * MAX_LINES)
    (pkg / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules([pkg]) == {"app/long.py": MAX_LINES + 1}
