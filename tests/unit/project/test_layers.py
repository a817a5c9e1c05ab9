"""The layers hold: `attention` (the math; no Streamlit) <- `server` (what the whole process shares) and `ui`
(drawing) <- `pages` and `dashboard.py`. Read from the source (ast), so a test run imports nothing it checks:
- no module imports from a layer above its own (`attention` never imports streamlit, `ui` or a page);
- `pages/`, `ui/` and `server/` compute no attention: no `@`, no softmax, masked_fill, matmul, einsum or
  scaled_dot_product_attention (words in strings are prose, not code, and do not count);
- no import circle inside a package;
- a page stops one way: `ui.stop` (which says why and writes the URL back) is the only caller of `st.stop`;
- `ui/state.py` imports no page helper and no model; the shared `ui/` helpers import no page helper; `ui/` makes
  no process-wide state (locks, threads, caches, Streamlit patches): that is `server/`'s."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Layer of each top-level name: a module may import its own layer and those below.
LAYER = {"attention": 0, "server": 1, "ui": 2, "assets": 2, "pages": 3, "dashboard": 3}
FORBIDDEN_IN_MATH = {"streamlit", "altair", "pandas"}  # what the math must never need
MATH = {"softmax", "log_softmax", "masked_fill", "masked_fill_", "matmul", "einsum", "bmm", "baddbmm",
        "scaled_dot_product_attention"}  # fmt: skip


def modules(top: str) -> list[Path]:
    path = ROOT / top
    return sorted(path.rglob("*.py")) if path.is_dir() else [ROOT / f"{top}.py"]


def name_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether a dotted name is a module or package of this tree (not a name defined in one)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name_of(path) if path.name == "__init__.py" else name_of(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found |= {f"{base}.{alias.name}" for alias in node.names}
            if not all(is_module(f"{base}.{alias.name}") for alias in node.names):
                found.add(base)  # a name defined in `base` itself (`from . import x` of a submodule x needs only x)
    return found


def math_in(path: Path) -> list[str]:
    """Where `path`'s code (not its strings) computes attention: file:line and what."""
    tree = ast.parse(path.read_text(), str(path))
    where = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            where.append(f"{path.relative_to(ROOT)}:{node.lineno} @")
        elif isinstance(node, ast.Attribute | ast.Name):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in MATH:
                where.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return where


TOPS = [top for top in LAYER if (ROOT / top).is_dir() or (ROOT / f"{top}.py").exists()]


@pytest.mark.parametrize("top", TOPS)
def test_no_module_imports_a_layer_above_its_own(top):
    above = []
    for path in modules(top):
        for name in imports(path):
            first = name.split(".")[0]
            if LAYER.get(first, -1) > LAYER[top] or (top == "attention" and first in FORBIDDEN_IN_MATH):
                above.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not above, above


@pytest.mark.parametrize("top", ["pages", "ui", "server", "dashboard"])
def test_only_the_package_computes_attention(top):
    if top not in TOPS:
        pytest.skip(f"no {top} here")
    found = [where for path in modules(top) for where in math_in(path)]
    assert not found, f"attention math outside `attention/` (ask the package for the number): {found}"


@pytest.mark.parametrize("top", [top for top in TOPS if (ROOT / top).is_dir()])
def test_no_import_circle_inside_a_package(top):
    names = {name_of(path): path for path in modules(top)}
    imported = {name: imports(path) for name, path in names.items()}  # each file read once
    graph = {name: {other for other in names if other != name and other in imported[name]} for name in names}
    circles, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    # A package's __init__ re-exporting its modules, which import siblings through it, is not a circle of code.
    circles = [c for c in circles if not c.startswith(f"{top} ->") and f"-> {top} ->" not in c]
    assert not circles, circles


def stops_in(path: Path) -> list[int]:
    """The lines where `path` calls `st.stop()` (or `streamlit.stop()`) itself."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "stop"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("st", "streamlit")
    ]


def test_a_page_stops_one_way():
    """Only `ui.results.stop` ends a run early: every other stop goes through it, so each says why in the page's
    own words and keeps the link (a bare `st.stop()` skipped writing the URL back)."""
    one_way = ROOT / "ui" / "results.py"
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("pages", "ui", "dashboard")
        for path in modules(top)
        for line in stops_in(path)
        if path != one_way
    ]
    assert not found, f"call ui.stop(why) instead of st.stop(): {found}"
    assert len(stops_in(one_way)) == 1


def test_the_checks_see_math_and_imports(tmp_path):
    """The readers themselves: a page computing a softmax, or the package importing streamlit, is seen."""
    page = tmp_path / "page.py"
    page.write_text('import torch\nw = torch.softmax(q @ k.T, dim=-1)  # "softmax" in a comment\nx = "softmax"\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert sorted(where.split(" ", 1)[1] for where in math_in(page)) == ["@", "softmax"]
        module = tmp_path / "mod.py"
        module.write_text("from streamlit import session_state\nimport ui.charts\n")
        assert {"streamlit", "streamlit.session_state", "ui.charts"} <= imports(module)
        module.write_text("import streamlit as st\nif x:\n    st.stop()\nst.stop  # named, not called\n")
        assert stops_in(module) == [3]
    finally:
        ROOT = saved


# Beside the product, never under it: what tests and benchmarks share (harness/), the benchmarks, the tests and the
# checkout's commands. Dependencies go one way, tests -> benchmarks -> harness -> the product: the product imports none
# of them, the harness neither tests nor benchmarks, a benchmark no test; each finds the others by their package names,
# never by an edit to sys.path.
BESIDE = ("harness", "benchmarks", "tests", "scripts")
ONE_WAY = {"harness": {"tests", "benchmarks", "scripts"}, "benchmarks": {"tests", "scripts"}}


def sys_path_edits(path: Path) -> list[int]:
    """The lines where `path` changes sys.path (a call such as sys.path.insert, or an assignment to it)."""
    tree = ast.parse(path.read_text(), str(path))

    def is_sys_path(node: ast.AST) -> bool:
        while isinstance(node, ast.Subscript):
            node = node.value
        return isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign) and any(
            is_sys_path(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_product_imports_no_harness_benchmark_test_or_script():
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for top in TOPS
        for path in modules(top)
        for name in imports(path)
        if name.split(".")[0] in BESIDE
    ]
    assert not found, found


@pytest.mark.parametrize("top", sorted(ONE_WAY))
def test_the_harness_and_the_benchmarks_import_one_way(top):
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules(top)
        for name in imports(path)
        if name.split(".")[0] in ONE_WAY[top]
    ]
    assert modules(top) and not found, found


def test_no_test_benchmark_or_script_edits_sys_path():
    """Tests find harness/ through pytest's pythonpath, benchmarks and scripts run as `python -m benchmarks.<name>`
    from the root: none needs sys.path changed by hand."""
    found = [
        f"{path.relative_to(ROOT)}:{line}" for top in BESIDE for path in modules(top) for line in sys_path_edits(path)
    ]
    assert not found, found


def test_a_sys_path_edit_is_seen(tmp_path):
    module = tmp_path / "bench.py"
    module.write_text(
        "import sys\nprint(sys.path)\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\nsys.path.append('z')\n"
        "sys.path += ['w']\nif 'x' in sys.path:\n    pass\n"
    )
    assert sys_path_edits(module) == [3, 4, 5, 6]


# What the shared `ui/` may know, and what lives in `server/` (issue 47). ui/state.py is the parameters' machinery:
# it reads the registry the pages fill (ui/settings.py, ui/views/) and imports no page's helper and no model, lesson
# or LLM module of the package, only the declaration type. The shared helpers (ui/*.py) import no page helper
# (ui/__init__.py re-exports the course's `lesson_link`). And ui/ keeps no process-wide state: no lock, thread,
# weak or ordered cache, no server cache object (server.shared's `Shared`, `Turns`) made at import, no empty container
# at module level for functions to fill, no Streamlit class or module patched; those are server/'s. Streamlit's own
# bounded caches (`st.cache_resource`, `functools.lru_cache` of a pure function) may stay beside what they draw.
STATE_MAY_IMPORT = {"attention.basics.params", "attention.basics.params.Param"}
PROCESS_WIDE = {"Lock", "RLock", "Condition", "Event", "Semaphore", "BoundedSemaphore", "Barrier", "Thread", "Timer",
                "Queue", "WeakValueDictionary", "WeakKeyDictionary", "WeakSet", "OrderedDict", "defaultdict",
                "Shared", "Turns"}  # fmt: skip
# The registry of parameters: declarations filled once at import (`ui.state.register`), never by a session.
MODULE_TABLES = {"ui/state.py": {"PARAMS", "OWNERS", "RENAMED"}}
STREAMLIT_FLAGS = {"uses_pages_directory"}  # what `st.navigation` itself sets (ui/_frame.py, `ui.state.ensure_frame`)


def test_ui_state_knows_no_page_and_no_model():
    found = sorted(
        name
        for name in imports(ROOT / "ui" / "state.py")
        if name.startswith("ui.") or name.split(".")[0] == "attention" and name not in STATE_MAY_IMPORT
    )
    assert not found, f"ui/state.py imports {found}: a page's settings are registered by the page"


def test_the_shared_ui_helpers_import_no_page_helper():
    shared = [path for path in modules("ui") if "views" not in path.relative_to(ROOT).parts[1:-1]]
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in shared
        if path.name != "__init__.py"
        for name in imports(path)
        if name.startswith("ui.views")
    ]
    assert not found, found


def process_wide_state(path: Path) -> list[str]:
    """Where `path` makes process-wide state at import, or patches Streamlit: file:line and what."""
    tree = ast.parse(path.read_text(), str(path))
    rel = str(path.relative_to(ROOT))
    from_streamlit = {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and ((node.module or "") if isinstance(node, ast.ImportFrom) else node.names[0].name).startswith("streamlit")
        for alias in node.names
    }
    found = []

    def at_import(nodes: list[ast.stmt]) -> None:
        """Statements run at import: the module's body and its classes' bodies, not functions'."""
        for stmt in nodes:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(stmt, ast.ClassDef):
                at_import(stmt.body)
                continue
            for node in ast.walk(stmt):
                func = node.func if isinstance(node, ast.Call) else None
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in PROCESS_WIDE:
                    found.append(f"{rel}:{node.lineno} {name}()")
            if isinstance(stmt, ast.Assign | ast.AnnAssign):
                value = stmt.value
                empty = isinstance(value, ast.Dict | ast.List | ast.Set) and not (
                    getattr(value, "keys", None) or getattr(value, "elts", None)
                ) or (isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("dict", "list", "set")
                      and not value.args and not value.keywords)  # fmt: skip
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                if empty and names - MODULE_TABLES.get(rel, set()):
                    found.append(f"{rel}:{stmt.lineno} {', '.join(sorted(names))} = an empty container")

    at_import(tree.body)
    for node in ast.walk(tree):  # patches, wherever they are made
        for target in node.targets if isinstance(node, ast.Assign) else []:
            if not isinstance(target, ast.Attribute):
                continue
            if target.attr == "__class__":
                found.append(f"{rel}:{node.lineno} __class__ replaced")
            elif getattr(target.value, "id", None) in from_streamlit and target.attr not in STREAMLIT_FLAGS:
                found.append(f"{rel}:{node.lineno} Streamlit's {target.value.id}.{target.attr} patched")
    return found


def test_ui_keeps_no_process_wide_state():
    found = [where for path in modules("ui") for where in process_wide_state(path)]
    assert not found, f"process-wide state belongs in server/: {found}"


def test_the_ui_rules_see_a_planted_violation(tmp_path):
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        (tmp_path / "ui" / "views").mkdir(parents=True)
        (tmp_path / "ui" / "__init__.py").write_text("")
        (tmp_path / "ui" / "views" / "__init__.py").write_text("")
        (tmp_path / "ui" / "views" / "chat.py").write_text("")
        state = tmp_path / "ui" / "state.py"
        state.write_text("from attention.basics.params import Param\nfrom attention.models import tiny\n"
                         "from ui.views import chat\n")  # fmt: skip
        with pytest.raises(AssertionError, match="attention.models"):
            test_ui_state_knows_no_page_and_no_model()
        with pytest.raises(AssertionError, match="ui/state.py imports ui.views.chat"):
            test_the_shared_ui_helpers_import_no_page_helper()
        state.write_text(
            "import threading\nfrom collections import OrderedDict\nimport streamlit as st\n"
            "from streamlit.runtime.pages_manager import PagesManager\n"
            "PARAMS = {}\n_CACHE = {}\n_LOCK = threading.Lock()\nKEPT = OrderedDict()\nSIZES = dict(a=1)\n"
            "class Store:\n    lock = threading.RLock()\n"
            "def patch(store):\n    store.__class__ = Store\n    st.cache_data = None\n"
            "    PagesManager.uses_pages_directory = False\n    return threading.Lock()\n"
        )
        found = [where.split(" ", 1)[1] for where in process_wide_state(state)]
        assert found == ["_CACHE = an empty container", "Lock()", "OrderedDict()", "RLock()", "__class__ replaced",
                         "Streamlit's st.cache_data patched"], found  # fmt: skip
    finally:
        ROOT = saved
