"""Every file, folder and module the docs name exists: in docs/, the README and benchmarks/README.md, and in the
docstrings of attention/, ui/, server/, pages/, scripts/, benchmarks/, harness/ and dashboard.py. Read as text and
with ast, so nothing is imported.

What counts as a pointer: a path that starts at one of the checkout's own folders or top-level files
(`ui/views/chat.py`, `tests/unit/`, `deploy/run.sh`, `pyproject.toml`), a Markdown link's target (relative to its
page), and a dotted module name under one of the project's packages (`attention.models.smollm2`, `ui.state.RENAMED`:
the module must exist and, when the last part is not a module, define that name). Not pointers: URLs, absolute
paths, what a run writes (artifacts/, .venv/, benchmarks/results/<date>-...), and placeholders and patterns
(`<name>`, `NAME_settings.py`, `*.md`, `{name}`, `...`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("attention", "ui", "server", "pages", "harness", "benchmarks", "scripts", "tests")
FOLDERS = (*PACKAGES, "docs", "deploy", "assets", ".ci", ".streamlit")
FILES = ("dashboard.py", "pyproject.toml", "requirements.txt", "uv.lock", "Dockerfile", "compose.yaml", "README.md",
         ".dockerignore")  # fmt: skip
# What a run makes, not what the checkout holds.
MADE = ("artifacts/", ".venv/", ".venv-checks/", ".pytest_cache/", ".hypothesis/")
DOCSTRING_TOPS = ("attention", "ui", "server", "pages", "scripts", "benchmarks", "harness", "dashboard.py")

PATH = re.compile(
    r"(?<![\w./~$-])(?:\./)?((?:" + "|".join(re.escape(f) for f in FOLDERS) + r")/[\w./+-]*"
    r"|(?:" + "|".join(re.escape(f) for f in FILES) + r"))(?![\w/-])"
)
MODULE = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATTERN = re.compile(r"[<>{}*?$%]|\.\.\.|…")  # <name>, {name}, *.md, $VAR, ...
# A stand-in written in capitals: NAME_settings.py, FILE, docs/course/NN-lesson.md (not README.md, LICENSE.txt).
PLACEHOLDER = re.compile(PATTERN.pattern + r"|(?<![A-Za-z])[A-Z]{2,}(?=[_/-]|$)")
# Streamlit's own options share the server package's name: `server.disconnectedSessionTTL`, `server.port`.
STREAMLIT_OPTION = re.compile(r"^server\.(?:[a-z]+[A-Z]\w*|port|address|headless)$")
SUFFIXES = (".py", ".md", ".json", ".txt", ".toml", ".lock", ".yaml", ".yml", ".cfg", ".sh", ".js", ".css",
            ".png", ".pt", ".conf", ".in", ".html", ".svg", ".csv")  # fmt: skip


def documents() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *docs]


def docstrings() -> list[tuple[Path, int, str]]:
    """(file, line, text) of every module, class and function docstring under DOCSTRING_TOPS."""
    found = []
    for top in DOCSTRING_TOPS:
        path = ROOT / top
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            tree = ast.parse(file.read_text(), str(file))
            for node in [tree, *ast.walk(tree)]:
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    text = ast.get_docstring(node, clean=False)
                    if text:
                        line = node.body[0].lineno if node.body else 1
                        found.append((file, line, text))
    return found


def clean(token: str) -> str:
    token = re.sub(r"'s$", "", token)
    token = token.split("#")[0].split("::")[0]
    token = re.sub(r":\d+(?:-\d+)?$", "", token)
    return token.rstrip(".,;:)'\"")


def path_exists(token: str, base: Path) -> bool:
    return (ROOT / token).exists() or (base / token).exists()


def module_exists(name: str) -> bool:
    """`a.b.c` is a module or package of the checkout, or `a.b` is one and defines (or imports) `c`."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:cut])
        file = path / "__init__.py" if (path / "__init__.py").exists() else path.with_suffix(".py")
        if path.is_dir() and not file.exists() and cut == len(parts):
            return True  # a folder without __init__ (a namespace package, tests/unit)
        if not file.exists():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        return rest[0] in defined(file)
    return False


def defined(file: Path) -> set[str]:
    """The names a module defines at its top level (assigned, def, class, imported)."""
    names: set[str] = set()
    body = list(ast.parse(file.read_text(), str(file)).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If | ast.Try | ast.With):  # names defined at the top level, conditionally
            body += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            body += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
    return names


def pointers(text: str, base: Path) -> list[str]:
    """What `text` names that does not exist (relative to the checkout's root, or to `base` for a link)."""
    stale = []
    for match in LINK.finditer(text):
        target = match.group(1).split("#")[0]
        if not target or re.match(r"^[a-z]+:", target) or target.startswith("/") or PLACEHOLDER.search(target):
            continue
        if not (base / target).exists():
            stale.append(target)
    for match in PATH.finditer(text):
        token = clean(match.group(1))
        if token.startswith(MADE) or PLACEHOLDER.search(token) or token.endswith("-"):
            continue
        if token.startswith("benchmarks/results/") and re.search(r"\d{4}-\d\d-\d\d-", token) is None:
            continue
        if not path_exists(token, base):
            stale.append(token)
    for match in MODULE.finditer(text):
        name = match.group(1).rstrip(".")
        if name.endswith(SUFFIXES) or PATTERN.search(name) or STREAMLIT_OPTION.match(name):
            continue  # a file (ui.py), a pattern, or a Streamlit option
        if not module_exists(name):
            stale.append(name)
    return list(dict.fromkeys(stale))


def test_every_path_and_module_the_docs_name_exists():
    stale = []
    for doc in documents():
        for line_number, line in enumerate(doc.read_text().splitlines(), 1):
            stale += [f"{doc.relative_to(ROOT)}:{line_number}: {p}" for p in pointers(line, doc.parent)]
    assert not stale, "\n".join(stale)


def test_every_path_and_module_the_docstrings_name_exists():
    stale = []
    for file, line, text in docstrings():
        stale += [f"{file.relative_to(ROOT)}:{line}: {p}" for p in pointers(text, file.parent)]
    assert not stale, "\n".join(stale)


def layout_entries(text: str) -> list[tuple[str, str]]:
    """docs/architecture.md's Layout block: (the path an entry starts with, its description)."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: list[list[str]] = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            head = line.split()[0]
            entries.append([head, line[len(head) :]])
        elif entries:
            entries[-1][1] += " " + line
    return [(head, description) for head, description in entries]


def test_each_file_the_layout_names_beside_a_folder_is_in_it():
    """The layout names files bare beside their folder (`server/poll/  ... rooms.py ..., store.py`): each is under
    that folder, or at the root."""
    stale = []
    for head, description in layout_entries((ROOT / "docs" / "architecture.md").read_text()):
        folder = ROOT / head if (ROOT / head).is_dir() else (ROOT / head).parent
        assert folder.is_dir(), f"docs/architecture.md's layout names {head}, which does not exist"
        for name in re.findall(r"(?<![\w/.-])([\w-]+(?:" + "|".join(map(re.escape, SUFFIXES)) + r"))(?![\w/])",
                               description):  # fmt: skip
            if not PLACEHOLDER.search(name) and not (ROOT / name).exists() and not any(folder.rglob(name)):
                stale.append(f"{head}: {name}")
    assert not stale, stale


def test_the_reader_finds_stale_pointers_and_skips_what_is_not_one(tmp_path):
    text = (
        "See `ui/views/chat.py`, ui/views/no_such_page.py's helper, ./scripts/gone.py, [the guide](install.md#pip) and "
        "[gone](missing.md); `attention.models.smollm2`, attention.models.nothing_here and ui.state.no_such_name. "
        "Not pointers: https://example.com/ui/x.py, /usr/bin/chromium, artifacts/screenshots/x.png, "
        "benchmarks/results/<today>-capacity.md, docs/course/*.md, ui/views/NAME_settings.py, attention/models/..., "
        "pages/{name}.py, test_pages.py, streamlit-server.log, `server.disconnectedSessionTTL`."
    )
    stale = ["ui/views/no_such_page.py", "scripts/gone.py", "missing.md", "attention.models.nothing_here"]
    assert sorted(pointers(text, ROOT / "docs")) == sorted([*stale, "ui.state.no_such_name"])
