"""tests/QUARANTINE.md is honest: every skip and xfail in tests/ and harness/ is listed there, by the function that
holds it, with a reason; and every test or function it names exists. Read from the source (ast): nothing is run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "tests" / "QUARANTINE.md"
CALLS = {"skip", "importorskip", "xfail"}  # pytest.skip(...), pytest.importorskip(...), pytest.xfail(...)
MARKS = {"skip", "skipif", "xfail"}  # pytest.mark.skip, .skipif, .xfail (decorators, pytestmark, pytest.param)


def sources() -> list[Path]:
    return sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "harness").rglob("*.py")])


def skips_in(path: Path) -> set[str]:
    """`file::function` (`file` alone at module level, `file::Class::method` in a class) for each skip or xfail."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT).as_posix()
    found: set[str] = set()

    def is_skip(node: ast.AST) -> bool:
        if not isinstance(node, ast.Attribute):
            return False
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id == "pytest":
            return node.attr in CALLS  # pytest.skip, named or called
        return (
            node.attr in MARKS
            and isinstance(owner, ast.Attribute)
            and owner.attr == "mark"
            and isinstance(owner.value, ast.Name)
            and owner.value.id == "pytest"
        )

    def visit(node: ast.AST, trail: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, (*trail, child.name))
            else:
                if is_skip(child):
                    found.add("::".join([where, *trail]))
                visit(child, trail)

    visit(tree, ())
    return found


def listed() -> dict[str, str]:
    """Each `where` in the page's tables, and the rest of its row (when and why)."""
    rows = {}
    for line in PAGE.read_text().splitlines():
        match = re.match(r"^\| `([^`]+)` \|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def exists(where: str) -> bool:
    file, *names = where.split("::")
    path = ROOT / file
    if not path.is_file():
        return False
    scope: list[ast.stmt] = ast.parse(path.read_text(), str(path)).body
    for name in names:
        found = [n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
        found = [n for n in found if n.name == name]
        if not found:
            return False
        scope = found[0].body
    return True


def test_every_skip_and_xfail_is_listed_with_a_reason():
    rows = listed()
    found = set().union(*(skips_in(path) for path in sources()))
    assert found, "no skip found at all: the reader is broken"
    missing = sorted(found - set(rows))
    assert not missing, f"add these to tests/QUARANTINE.md, with when they skip and why: {missing}"
    for where in found:
        cells = [cell.strip() for cell in rows[where].split("|")]
        assert len(cells) == 2 and all(len(cell.split()) >= 2 for cell in cells), (where, rows[where])


def test_every_test_or_function_listed_exists():
    rows = listed()
    assert len(rows) >= 10, "the page's tables were not read"
    gone = sorted(where for where in rows if not exists(where))
    assert not gone, f"tests/QUARANTINE.md names what no longer exists (moved or renamed?): {gone}"


def test_the_reader_sees_each_kind_of_skip(tmp_path):
    global ROOT
    module = tmp_path / "tests" / "test_x.py"
    module.parent.mkdir()
    module.write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.skipif(True, reason='r')\n"
        "@pytest.mark.xfail\ndef test_a():\n    pass\n"
        "def helper():\n    pytest.skip('no tool')\n"
        "class TestB:\n    def test_c(self):\n        pytest.importorskip('scipy')\n"
        "def test_d():\n    assert pytest.mark.parametrize and 'pytest.skip' != ''\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.skip)])\ndef test_e(x):\n    pass\n"
    )
    saved, ROOT = ROOT, tmp_path
    try:
        assert skips_in(module) == {
            "tests/test_x.py",
            "tests/test_x.py::test_a",
            "tests/test_x.py::helper",
            "tests/test_x.py::TestB::test_c",
            "tests/test_x.py::test_e",
        }
        assert exists("tests/test_x.py::TestB::test_c") and not exists("tests/test_x.py::test_c")
    finally:
        ROOT = saved
