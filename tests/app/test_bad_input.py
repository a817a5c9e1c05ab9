"""Bad input everywhere it enters, as one table: the page's controls, its link, the package and the command line.

Each case says what must happen: a correct result ("ok"), a clear message on the page ("error" /
"warning") after which the next run with a good value works again, a ValueError from the package
("raises"), or exit status 2 with one line on stderr from the command line ("exit2").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui
from attention import Config, compute
from attention.basics.config import HEAD_LAYOUTS, MASKS
from attention.io import export
from attention.io.cli.main import main
from harness import charts

pytestmark = pytest.mark.thorough  # every bad value of every control: --all, not the fast tier
ROOT = Path(__file__).resolve().parents[2]
LONG = " ".join(f"w{i}" for i in range(512))
MARKUP = ("<img src=x onerror=alert(1)>", "**x**", "$\\frac{1}{0}$", '=HYPERLINK("http://x")', "www.x.org", "a@x.org")
GOOD = "the cat sat on the mat"


@dataclass(frozen=True)
class Case:
    name: str
    where: str  # app (controls and link), package, cli
    expect: str  # ok, error, warning, raises, exit2
    message: str = ""  # part of the message shown / raised / printed
    url: dict[str, Any] = field(default_factory=dict)  # link parameters the page opens with
    do: tuple[tuple[str, str, Any], ...] = ()  # then widget changes: (kind, key, value)
    check: Callable[..., None] | None = None  # a further assertion on the outcome
    recover: tuple[tuple[str, str, Any], ...] = (("text_area", "w:sentence", GOOD), ("number_input", "w:seed", 42))
    call: Callable[[], Any] | None = None  # package: the call
    argv: tuple[str, ...] = ()  # cli: "{file}" stands for a file holding `content`
    content: str = ""


# --------------------------------------------------------------------------- checks


def app(url: dict[str, Any]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    for name, value in url.items():
        at.query_params[name] = value
    at.run()  # the course's map, the default page
    return at.switch_page("pages/self_attention.py").run()


def act(at: AppTest, actions: tuple[tuple[str, str, Any], ...]) -> None:
    for kind, key, value in actions:
        getattr(at, kind)(key=key).set_value(value)
    if actions:
        at.run()


def config_of(at: AppTest) -> Config:
    get = lambda name: at.session_state["p:" + name]  # noqa: E731
    custom, split = None, get("head_layout") == "split"
    if get("mask") == "custom":  # as the page reads the stored grid: causal when it does not fit
        rows = [r for r in get("custom_mask").split(".") if r]
        t = len(Config(sentence=get("sentence")).tokens)
        fits = len(rows) == t and all(len(r) == t for r in rows)
        custom = [[c == "1" for c in r] for r in rows] if fits else [[j <= i for j in range(t)] for i in range(t)]
    return Config(
        sentence=get("sentence"),
        d_model=get("d_model"),
        d_k=None if split else get("d_k"),  # the dashboard's split layout cuts d_model into heads
        d_v=None if split else get("d_v"),
        heads=get("heads"),
        head_layout=get("head_layout"),
        seed=get("seed"),
        mask=get("mask"),
        padding=get("padding"),
        window=get("window"),
        dropout=get("dropout"),
        scale=get("scale"),
        temperature=get("temperature"),
        init=get("init"),
        out_proj=get("out_proj"),
        bias=get("bias"),
        custom_mask=custom,
    )


def table_or_none(at: AppTest):
    frames = [d.value for d in at.dataframe if "weight" in d.value.columns]
    assert len(frames) <= 1
    return frames[0] if frames else None


def table(at: AppTest):
    t = table_or_none(at)
    assert t is not None
    return t


def weights_heatmap(at: AppTest) -> torch.Tensor:
    """The matrix the 'Softmax weights' heatmap draws (blocked cells 0)."""
    maps = charts.heatmaps(at)
    if "Softmax weights" not in maps:
        raise AssertionError("no weights heatmap")
    return maps["Softmax weights"][0]


def followed(at: AppTest) -> int:
    return int(at.selectbox(key="w:token").value)


def assert_shows_compute(at: AppTest) -> None:
    """The walkthrough table is compute() of the page's state, for the followed token."""
    r = compute(config_of(at))
    i = followed(at)
    torch.testing.assert_close(weights_heatmap(at), r.dropped_weights[0].masked_fill(~r.mask, 0), rtol=0, atol=1e-6)
    if r.empty_rows[i]:  # the walkthrough says so instead of a table of zeros
        assert any("Every key is masked" in m.value for m in at.info) and not table_or_none(at)
        return
    t = table(at)
    assert list(t["key"]) == export.labels(r.key_tokens)
    torch.testing.assert_close(torch.tensor(list(t["weight"])), r.dropped_weights[0, i], rtol=0, atol=1e-6)
    assert list(t["may attend"]) == r.mask[i].tolist()


def _walk(node):
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _walk(child)


OWN_STYLE = re.compile(r"<style>[^<]*</style>")  # a style sheet of the app's own (st.html), never the user's text
# a chart's table of its numbers (ui.charts.data_table): the app's own tags, the user's text escaped inside them
OWN_TABLE = re.compile(r'<details class="al-data-table">.*</details>', re.S)
OWN_TABLE_TAGS = re.compile(r'</?(details|summary|table|caption|thead|tbody|tr|th|td|p)( (class|scope)="[a-z-]+")?>')


def markdown_bodies(at: AppTest) -> list[str]:
    """Every Markdown text on the page (titles, captions, alerts, markdown), LaTeX and the app's own style sheets
    (an element that holds a <style> and nothing else: the components' `display: none`) left out, and a chart's
    table with its own tags taken out (what is left of it must be inert text)."""
    return [
        OWN_TABLE_TAGS.sub("", n.proto.body) if OWN_TABLE.fullmatch(n.proto.body) else n.proto.body
        for n in _walk(at._tree)
        if hasattr(n, "proto")
        and hasattr(n.proto, "body")
        and getattr(n, "type", "") != "latex"
        and not OWN_STYLE.fullmatch(n.proto.body)
    ]


def inert(fragment: str) -> bool:
    """No Markdown, HTML or LaTeX left: every special character is backslash-escaped or an entity."""
    if re.search(r"(?i)www\\?\.|(?<!\u2060)(://|\\?@)", fragment):  # GFM autolinks, unless a word joiner
        return False
    bare = re.sub(r"\\.|&(lt|gt|amp);|\u2060(://|@)", "", fragment)
    return not re.search(r"[<>*_`$\\\[\]()#|~!@]", bare)


def ok_labels(expected: list[str]) -> Callable[[AppTest], None]:
    def check(at: AppTest) -> None:
        assert list(table(at)["key"]) == expected
        assert at.selectbox(key="w:token").options == expected  # the token picker tells repeated words apart

    return check


def follows_each_token_as_text(at: AppTest) -> None:
    """Every token, followed in turn, is named in the walkthrough as inert text."""
    tokens = config_of(at).tokens
    for i, token in enumerate(tokens):
        at.selectbox(key="w:token").set_value(i).run()
        title = next(b for b in markdown_bodies(at) if b.startswith("**Following token"))
        assert title == f"**Following token {i + 1}: {ui.plain(token)}** (head 1)"
        assert inert(ui.plain(token))
    # the CSV export: labels that start a formula are defused, in the dashboard's labels and in bare tokens
    r = compute(config_of(at))
    csv = export.matrix_csv(r.weights[0], export.labels(tokens), export.labels(tokens))
    for line in csv.splitlines():
        assert line.lstrip('"')[:1] not in ("=", "+", "@")
    bare = export.matrix_csv(r.weights[0], list(tokens), list(tokens))
    assert any(line.startswith('"\'=HYPERLINK(""http://x"")"') for line in bare.splitlines())
    assert ',"\'=HYPERLINK(""http://x"")",' in bare.splitlines()[0]  # the header too


def blocked_row(at: AppTest) -> None:
    assert any("Every key is masked" in i.value for i in at.info)
    assert (weights_heatmap(at)[0] == 0).all() and (weights_heatmap(at)[1:].sum(-1) - 1).abs().max() < 1e-5


def sidebar_error(at: AppTest) -> None:
    assert any("does not divide" in e.value for e in at.sidebar.error)  # next to the heads control


def rows_sum_to_one(at: AppTest) -> None:
    assert abs(sum(table(at)["weight"]) - 1) < 1e-5


def mask_and_layout(mask: str, layout: str) -> Callable[[AppTest], None]:
    def check(at: AppTest) -> None:
        c = config_of(at)
        assert (c.mask, c.head_layout, c.heads) == (mask, layout, 2)
        if layout == "split":
            assert c.head_dims == (8, 8)

    return check


# --------------------------------------------------------------------------- the table


def url_cases() -> list[Case]:
    """Every link parameter missing, empty, negative, non-numeric, huge, repeated or unknown."""
    bad: dict[str, tuple[Any, ...]] = {
        "int": ("", "-1", "abc", "1.5", "9" * 400, ["3", "abc"]),
        "float": ("", "-1", "abc", "nan", "1e999", ["0.5", "x"]),
        "choice": ("", "bogus", "-1", ["none", "bogus"]),
        "bool": ("", "maybe", "-1", "2"),
        "bits": ("012", "0" * 600, "1." * 600, "-1"),
        "text": ("", "   \t", "x" * (ui.MAX_CHARS + 1)),
    }
    cases = [Case("link: no parameters at all", "app", "ok", check=rows_sum_to_one)]
    for name, p in ui.PARAMS.items():
        for value in bad[p.kind]:
            shown = value if isinstance(value, list) else repr(value)[:20]
            cases.append(Case(f"link: {name}={shown}", "app", "warning", ui.plain(name), url={name: value}))
    cases += [
        Case("link: repeated, last value good", "app", "ok", url={"seed": ["abc", "7"]}),
        Case("link: unknown key", "app", "warning", "bogus", url={"bogus": "1"}),
        Case("link: unknown preset", "app", "warning", "preset", url={"preset": "no-such-preset"}),
        Case("link: unknown mask", "app", "warning", "mask", url={"mask": "diagonal"}),
        Case("link: key that is Markdown", "app", "warning", "\\!\\[x\\]", url={"![x](http://e/x.png)": "1"}),
        Case("link: key that is HTML", "app", "warning", "&lt;img", url={"<img src=x onerror=alert(1)>": "1"}),
        Case("link: huge key", "app", "warning", "…", url={"k" * 5000: "1"}),
        Case("link: negative seed", "app", "warning", "seed", url={"seed": "-5"}),
        Case("link: seed above 2**63", "app", "warning", "seed", url={"seed": str(2**63 + 1)}),
        Case("link: token past the end", "app", "ok", url={"token": "511"}),
        Case("link: head past the heads", "app", "ok", url={"head": "15"}),
    ]
    return cases


APP_CASES = [
    Case("empty sentence", "app", "error", "empty", do=(("text_area", "w:sentence", ""),)),
    Case("whitespace-only sentence", "app", "error", "empty", do=(("text_area", "w:sentence", " \n\t  "),)),
    Case("one token", "app", "ok", do=(("text_area", "w:sentence", "hello"),), check=ok_labels(["1 hello"])),
    Case("exactly 512 tokens", "app", "ok", do=(("text_area", "w:sentence", LONG),), check=rows_sum_to_one),
    Case("513 tokens", "app", "error", "513 tokens", do=(("text_area", "w:sentence", LONG + " w512"),)),
    Case(
        "100,000-character paste",
        "app",
        "error",
        # refused whole and said under the box, which keeps its sentence (issue 32: the browser dropped it silently)
        "100,000 characters long and was not taken: a box takes at most 20,000",
        do=(("text_area", "w:sentence", "w " * 50_000),),
        check=lambda at: at.session_state["p:sentence"] == at.text_area(key="w:sentence").value == Config().sentence,
    ),
    Case(
        "emoji",
        "app",
        "ok",
        do=(("text_area", "w:sentence", "😀 👍🏽 🇫🇷 🧑‍🍳"),),
        check=ok_labels(["1 😀", "2 👍🏽", "3 🇫🇷", "4 🧑‍🍳"]),
    ),
    Case(
        "combining characters",
        "app",
        "ok",
        do=(("text_area", "w:sentence", "cafe\u0301 e\u0301"),),
        check=ok_labels(["1 cafe\u0301", "2 e\u0301"]),
    ),
    Case(
        "right-to-left text",
        "app",
        "ok",
        do=(("text_area", "w:sentence", "שלום עולם مرحبا"),),
        check=ok_labels(["1 שלום", "2 עולם", "3 مرحبا"]),
    ),
    Case(
        "zero-width spaces",
        "app",
        "ok",
        do=(("text_area", "w:sentence", "a\u200bb \u200b c"),),
        check=ok_labels(["1 a\u200bb", "2 \u200b", "3 c"]),
    ),
    Case(
        "HTML, Markdown, LaTeX and formula tokens",
        "app",
        "ok",
        do=(("text_area", "w:sentence", " ".join(MARKUP)),),
        check=follows_each_token_as_text,
    ),
    Case(
        "repeated words",
        "app",
        "ok",
        do=(("text_area", "w:sentence", "the the the"),),
        check=ok_labels(["1 the", "2 the", "3 the"]),
    ),
    *(
        Case(f"{name} at {value}", "app", "ok", do=((kind, f"w:{name}", value),), check=rows_sum_to_one)
        for name, kind, values in (
            ("d_k", "slider", (1, 256)),
            ("d_v", "slider", (1, 256)),
            ("heads", "slider", (1, 16)),
            ("seed", "number_input", (0, 9999)),
        )  # fmt: skip
        for value in values
    ),
    Case(
        "d_k, d_v and heads all at their maximum",
        "app",
        "ok",
        url={"d_k": "256", "d_v": "256", "heads": "16"},
        check=rows_sum_to_one,
    ),
    Case(
        "heads that do not divide d_model (split layout)",
        "app",
        "error",
        "does not divide",
        url={"head_layout": "split", "heads": "3"},
        check=sidebar_error,
        recover=(("slider", "w:heads", 4),),
    ),
    *(
        Case(
            f"mask {mask} with the {layout} layout",
            "app",
            "ok",
            url={"mask": mask, "head_layout": layout, "heads": "2"},
            check=mask_and_layout(mask, layout),
        )
        for mask in MASKS
        for layout in HEAD_LAYOUTS
    ),
    Case(
        "custom mask that blocks a whole row",
        "app",
        "warning",
        "attend to no key",
        url={"mask": "custom", "custom_mask": "000000.111111.111111.111111.111111.111111", "token": "0"},
        check=blocked_row,
        recover=(("selectbox", "w:mask", "none"),),
    ),
    Case("dropout 0", "app", "ok", url={"dropout": "0"}, check=rows_sum_to_one),
    Case("dropout 0.99", "app", "ok", url={"dropout": "0.99"}),
    *url_cases(),
]


def _same(config: Config) -> None:
    a, b = compute(config), compute(config)
    assert torch.equal(a.dropped_weights, b.dropped_weights) and torch.equal(a.output, b.output)
    assert torch.isfinite(a.output).all()


PACKAGE_CASES = [
    Case("seed 0", "package", "ok", call=lambda: _same(Config(seed=0, dropout=0.5))),
    Case("negative seed", "package", "ok", call=lambda: _same(Config(seed=-(2**63), dropout=0.5))),
    Case("seed above 2**63", "package", "ok", call=lambda: _same(Config(seed=2**63 + 12345, dropout=0.5))),
    Case("seed 2**64", "package", "raises", "seed", call=lambda: Config(seed=2**64)),
    Case("package: dropout 0.99", "package", "ok", call=lambda: _same(Config(dropout=0.99))),
    Case("dropout 1", "package", "raises", "dropout", call=lambda: Config(dropout=1.0)),
    Case("dropout NaN", "package", "raises", "dropout", call=lambda: Config(dropout=float("nan"))),
    Case("package: empty sentence", "package", "raises", "empty", call=lambda: Config(sentence="  ")),
    Case("package: 513 tokens", "package", "raises", "513", call=lambda: Config(sentence=LONG + " x")),
    Case("d_k 0", "package", "raises", "d_k", call=lambda: Config(d_k=0)),
    Case(
        "heads not dividing d_model",
        "package",
        "raises",
        "does not divide",
        call=lambda: Config(head_layout="split", heads=3),
    ),
    Case(
        "embeddings with NaN",
        "package",
        "raises",
        "NaN",
        call=lambda: Config(sentence=None, d_model=None, embeddings=[[1.0, float("nan")]]),
    ),
    Case(
        "non-rectangular embeddings",
        "package",
        "raises",
        "rectangular",
        call=lambda: Config(sentence=None, d_model=None, embeddings=[[1.0, 2.0], [3.0]]),
    ),
    Case("custom mask blocking a whole row", "package", "ok", call=lambda: _blocked_row_is_zero()),
    Case(
        "custom mask of the wrong shape",
        "package",
        "raises",
        "custom_mask",
        call=lambda: Config(mask="custom", custom_mask=[[True]]),
    ),
]


def _blocked_row_is_zero() -> None:
    grid = [[i != 2] * 6 for i in range(6)]
    r = compute(Config(mask="custom", custom_mask=grid, dropout=0.5))
    assert (r.weights[:, 2] == 0).all() and (r.context[:, 2] == 0).all()
    assert torch.isfinite(r.output).all()


CLI_CASES = [
    Case(
        "--embeddings malformed JSON",
        "cli",
        "exit2",
        "not valid JSON",
        argv=("--embeddings", "{file}"),
        content="[[1, 2], [3,",
    ),
    Case("--embeddings not a matrix", "cli", "exit2", "matrix", argv=("--embeddings", "{file}"), content='{"a": 1}'),
    Case(
        "--embeddings non-rectangular",
        "cli",
        "exit2",
        "not rectangular",
        argv=("--embeddings", "{file}"),
        content="[[1, 2], [3]]",
    ),
    Case("--embeddings NaN", "cli", "exit2", "NaN", argv=("--embeddings", "{file}"), content="[[1, NaN]]"),
    Case(
        "--embeddings Infinity", "cli", "exit2", "Infinity", argv=("--embeddings", "{file}"), content="[[1, Infinity]]"
    ),
    Case(
        "--embeddings 1e999 (inf)", "cli", "exit2", "float32", argv=("--embeddings", "{file}"), content="[[1, 1e999]]"
    ),
    Case(
        "--embeddings strings",
        "cli",
        "exit2",
        "not a number",
        argv=("--embeddings", "{file}"),
        content='[["=HYPERLINK(1)", 1]]',
    ),
    Case("--embeddings missing file", "cli", "exit2", "cannot read", argv=("--embeddings", "/nonexistent/x.json")),
    Case("--seed 0", "cli", "ok", argv=("--seed", "0")),
    Case("--seed negative", "cli", "ok", argv=("--seed", "-5", "--dropout", "0.5")),
    Case("--seed above 2**63", "cli", "ok", argv=("--seed", str(2**63 + 1))),
    Case("--seed 2**64", "cli", "exit2", "seed", argv=("--seed", str(2**64))),
    Case("--seed not a number", "cli", "exit2", "seed", argv=("--seed", "abc")),
    Case("--dropout 0.99", "cli", "ok", argv=("--dropout", "0.99")),
    Case("--dropout 1", "cli", "exit2", "dropout", argv=("--dropout", "1")),
    Case("--sentence empty", "cli", "exit2", "empty", argv=("--sentence", "")),
    Case("--sentence markup", "cli", "ok", argv=("--sentence", " ".join(MARKUP))),
    Case(
        "--heads 3 --head-layout split",
        "cli",
        "exit2",
        "does not divide",
        argv=("--heads", "3", "--head-layout", "split"),
    ),
    Case("--mask unknown", "cli", "exit2", "mask", argv=("--mask", "bogus")),
    Case("--preset unknown", "cli", "exit2", "preset", argv=("--preset", "bogus")),
]

CASES = [*APP_CASES, *PACKAGE_CASES, *CLI_CASES]


# --------------------------------------------------------------------------- the test


def run_app(case: Case) -> None:
    at = app(case.url)
    act(at, case.do)
    assert not at.exception, [e.value for e in at.exception]
    errors, warnings = " ".join(e.value for e in at.error), " ".join(w.value for w in at.warning)
    if case.expect == "error":
        assert case.message in errors
    elif case.expect == "warning":
        assert case.message in warnings and not errors
    else:
        assert not errors and not warnings, (errors, warnings)
    if case.expect != "error":
        assert_shows_compute(at)
    for body in markdown_bodies(at):  # user text never becomes HTML
        assert not re.search(r"<[A-Za-z!/]", body), body
    if case.check:
        case.check(at)
    act(at, case.recover)  # and the next run with good values works
    assert not at.exception and not at.error and not at.warning, [e.value for e in (*at.error, *at.warning)]
    assert_shows_compute(at)
    assert all(ui.state._linkable(k, v) for k, v in at.query_params.items())  # the URL reopens this view


def run_cli(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "input.json"
    path.write_text(case.content, encoding="utf-8")
    argv = [str(path) if a == "{file}" else a for a in case.argv]
    status = main(argv)
    out, err = capsys.readouterr()
    if case.expect == "ok":
        assert status == 0 and not err and "weights" in out
        return
    assert status == 2 and not out
    assert err.count("\n") == 1 and err.startswith("attention: error:"), err
    assert case.message.lower() in err.lower()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if case.where == "app":
        run_app(case)
    elif case.where == "cli":
        run_cli(case, tmp_path, capsys)
    elif case.expect == "raises":
        with pytest.raises(ValueError, match=re.escape(case.message)):
            case.call()
    else:
        case.call()


def test_the_table_covers_every_link_parameter_and_place() -> None:
    names = {c.name.split("=")[0].removeprefix("link: ") for c in CASES if c.name.startswith("link: ")}
    assert set(ui.PARAMS) <= names
    assert {c.where for c in CASES} == {"app", "package", "cli"}
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.expect in {"ok", "error", "warning", "raises", "exit2"} for c in CASES)
