"""The Experiments pages in AppTest: each renders at its defaults, reacts to its controls, and reopens from its link."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from attention import Config, compute, masks
from attention.io import export
from attention.io.cli.main import main
from attention.lessons import compare, pitfalls, scaling
from harness import charts
from harness.charts import ok, open_ok

ROOT = Path(__file__).resolve().parents[2]
W = {"init": "normal", "draws": "stable"}  # the dashboard's weights (issue 23): every page computes with them
PAGES = {
    "compare": "Compare A/B",
    "scaling": "Why divide by √d_k",
    "pitfalls": "Pitfalls",
    "mask_editor": "Mask editor",
    "soft_lookup": "Attention as a soft lookup",
}


def frame(at: AppTest, column: str):
    """The one dataframe shown with this column."""
    shown = [*at.dataframe, *at.table]
    frames = [d.value for d in shown if column in d.value.columns]
    assert len(frames) == 1, [list(d.value.columns) for d in shown]
    return frames[0]


@pytest.mark.parametrize("page", PAGES)
def test_each_experiment_renders_at_its_defaults(page: str) -> None:
    at = open_ok(page)
    assert [t.value for t in at.title] == [PAGES[page]]
    assert not at.warning
    assert len(at.caption) >= 3  # a sentence of explanation per panel


# --------------------------------------------------------------------------- Compare A/B


def summary(at: AppTest) -> str:
    assert len(at.info) == 1
    return at.info[0].value.replace("\\", "")  # the line is shown escaped, as plain text


def test_compare_opens_on_a_seed_difference_and_states_it() -> None:
    at = open_ok("compare")
    a, b = compute(Config(**W)), compute(Config(seed=124, **W))
    d = compare.diff(a, b)
    assert summary(at) == d.summary(export.labels(a.tokens), export.labels(a.key_tokens))
    assert summary(at).startswith("B changes seed 123 → 124. Largest weight change: ")
    assert at.radio(key="w:cview").value == "weights"


@pytest.mark.parametrize(
    ("kind", "key", "value", "changed"),
    [
        ("number_input", "w:b_seed", 200, "seed 123 → 200"),
        ("slider", "w:b_d_k", 4, "d_k 24 → 4"),
        ("slider", "w:b_heads", 2, "heads 1 → 2"),
        ("selectbox", "w:b_mask", "causal", "mask “none” → “causal”"),
        ("selectbox", "w:b_scale", "none", "scale “sqrt” → “none”"),
        ("number_input", "w:seed", 124, None),  # A catches up with B: the same setting
    ],
)
def test_compare_reacts_to_each_side(kind: str, key: str, value, changed: str | None) -> None:
    at = open_ok("compare")
    before = summary(at)
    getattr(at, kind)(key=key).set_value(value).run()
    ok(at)
    assert summary(at) != before
    if changed is None:
        assert summary(at).startswith("A and B are the same setting")
    else:
        assert changed in summary(at)
    assert at.query_params[key[2:]] == str(value)


def test_compare_presets_and_copy() -> None:
    at = open_ok("compare")
    at.button(key="cmp:preset:scaled vs unscaled").click().run()
    ok(at)
    assert summary(at).startswith("B changes scale “sqrt” → “none”. ")
    at.button(key="cmp:preset:1 head vs 4").click().run()
    # adding heads adds heads: head 1 is the same on both sides (issue 23: it moved by 0.37 with the tutorial's order)
    assert summary(at) == "B changes heads 1 → 4; every weight is the same."
    assert at.selectbox(key="w:head").value == 0  # a head picker appears for B's four heads
    at.button(key="cmp:preset:seed 1 vs 2").click().run()
    assert summary(at).startswith("B changes seed 1 → 2. ")
    assert at.number_input(key="w:seed").value == 1 and at.number_input(key="w:b_seed").value == 2
    at.button(key="cmp:copy").click().run()
    assert summary(at) == "A and B are the same setting; every weight is the same."


def test_compare_switches_the_matrix_and_explains_widths_that_differ() -> None:
    at = open_ok("compare", b_d_v="5", cview="context")
    assert at.radio(key="w:cview").value == "context"
    assert any("different widths" in i.value for i in at.info)


def test_a_compare_link_reopens_both_sides() -> None:
    at = open_ok("compare", seed="3", b_seed="9", b_mask="window", b_window="2", b_heads="2", cview="omega")
    assert not at.warning
    assert at.number_input(key="w:seed").value == 3
    assert at.number_input(key="w:b_seed").value == 9
    assert at.selectbox(key="w:b_mask").value == "window"
    assert at.slider(key="w:b_window").value == 2
    assert at.slider(key="w:b_heads").value == 2
    assert at.radio(key="w:cview").value == "omega"
    a = compute(Config(seed=3, **W))
    b = compute(Config(seed=9, mask="window", window=2, heads=2, **W))
    assert summary(at) == compare.diff(a, b).summary(export.labels(a.tokens), export.labels(a.key_tokens))


def test_a_bad_compare_link_warns_and_opens_the_defaults() -> None:
    at = open_ok("compare", b_seed="abc", b_mask="nope")
    shown = at.warning[0].value.replace("\\", "")
    assert len(at.warning) == 1 and "b_mask (one of none, causal" in shown
    assert "b_seed (a whole number from 0 to 9999)." in shown  # the warning says what the link may hold
    assert at.number_input(key="w:b_seed").value == 124


# --------------------------------------------------------------------------- why divide by sqrt(d_k)


def at_d_k(at: AppTest):
    return frame(at, "unscaled").set_index("")


def test_scaling_shows_the_sweep_it_plots() -> None:
    at = open_ok("scaling")
    sweep = scaling.scaling_sweep(seeds=range(123, 123 + 32), tokens=6)
    table = frame(at, "entropy, unscaled")
    assert table["d_k"].tolist() == list(scaling.DK_GRID)
    plotted = (("entropy, unscaled", "entropy", "unscaled"), ("score std, scaled", "spread", "scaled"))
    for column, metric, variant in plotted:
        torch.testing.assert_close(torch.tensor(table[column].to_numpy()), sweep.band(metric, variant)[0])
    here = at_d_k(at)
    one = scaling.scaling_sweep([24], seeds=range(123, 155), tokens=6)
    assert here.loc["Row entropy", "unscaled"] == pytest.approx(float(one.band("entropy", "unscaled")[0][0]))
    assert here.loc["Score spread", "unscaled"] > 4 and here.loc["Score spread", "scaled (÷ √d_k)"] < 1.2


@pytest.mark.parametrize(("kind", "key", "value"), [("slider", "w:d_k", 128), ("number_input", "w:seed", 5),
                                                    ("slider", "w:nseeds", 8)])  # fmt: skip
def test_scaling_reacts_to_d_k_and_the_seeds(kind: str, key: str, value: int) -> None:
    at = open_ok("scaling")
    before = at_d_k(at)
    getattr(at, kind)(key=key).set_value(value).run()
    ok(at)
    assert not at_d_k(at).equals(before)
    assert at.query_params[key[2:]] == str(value)


def test_the_temperature_sharpens_and_flattens_the_weights() -> None:
    at = open_ok("scaling")

    def shown() -> tuple[float, float]:
        values = {m.label: float(m.value) for m in at.metric[2:]}  # the right-hand pair: at τ
        return values["Mean row entropy (nats)"], values["Mean largest weight"]

    cold = shown()
    at.slider(key="w:temp").set_value(20.0).run()
    ok(at)
    hot = shown()
    assert hot[0] > cold[0] and hot[1] < cold[1]  # a high τ flattens: more entropy, smaller peaks
    r = compute(Config(scale="temperature", temperature=20.0, **W))
    assert hot == pytest.approx(scaling.mean_row_stats(r.weights[0], r.mask), abs=5e-4)
    assert at.query_params["temp"] == "20.0"


def test_a_scaling_link_reopens_its_view() -> None:
    at = open_ok("scaling", d_k="64", temp="2.5", nseeds="8")
    assert not at.warning
    assert at.slider(key="w:d_k").value == 64
    assert at.slider(key="w:temp").value == 2.5
    assert at.slider(key="w:nseeds").value == 8
    assert "At your d_k = 64" in " ".join(m.value for m in at.markdown)


# --------------------------------------------------------------------------- pitfalls


def marks(at: AppTest) -> dict[str, tuple[str, ...]]:
    table = frame(at, "version").set_index("version")
    return {name: tuple(c for c in table.columns if table.loc[name, c] != "✔ kept") for name in table.index}


def test_pitfalls_mark_the_invariants_each_version_breaks() -> None:
    at = open_ok("pitfalls")
    assert marks(at) == {p.name: p.broken for p in pitfalls.pitfalls(Config())}
    assert marks(at)["Correct"] == ()
    assert any("causal mask is used" in c.value for c in at.caption)
    assert [s.value for s in at.subheader][1:] == [p.name for p in pitfalls.pitfalls(Config())[1:]]


@pytest.mark.parametrize(("kind", "key", "value"), [("slider", "w:heads", 2), ("number_input", "w:seed", 5),
                                                    ("selectbox", "w:mask", "padding")])  # fmt: skip
def test_pitfalls_react_to_the_controls(kind: str, key: str, value) -> None:
    at = open_ok("pitfalls")
    before = [c.value for c in at.caption]
    getattr(at, kind)(key=key).set_value(value).run()
    ok(at)
    assert [c.value for c in at.caption] != before
    assert at.query_params[key[2:]] == str(value)


def test_a_pitfalls_link_reopens_its_view() -> None:
    at = open_ok("pitfalls", heads="3", mask="window", window="2")
    assert at.slider(key="w:heads").value == 3 and at.selectbox(key="w:mask").value == "window"
    assert not any("causal mask is used" in c.value for c in at.caption)
    config = Config(heads=3, mask="window", window=2)
    assert marks(at) == {p.name: p.broken for p in pitfalls.pitfalls(config)}
    titles = list(charts.headers(at))
    assert "Mistake: head 1 queries · head 2 keys" in titles


def test_pitfalls_refuse_a_sentence_too_long_for_them() -> None:
    at = open_ok("pitfalls", sentence=" ".join(["word"] * 65))
    assert "up to 64 tokens" in at.info[0].value


# --------------------------------------------------------------------------- mask editor


def cmask(rows: list[list[bool]]) -> str:
    return ".".join("".join("1" if c else "0" for c in row) for row in rows)


def test_the_editor_starts_from_templates() -> None:
    at = open_ok("mask_editor")
    at.slider(key="w:window").set_value(2).run()
    at.button(key="me:window").click().run()
    ok(at)
    window = masks.window(6, 6, 2).tolist()
    assert at.session_state["p:custom_mask"] == cmask(window)
    assert at.query_params["custom_mask"] == cmask(window)
    at.slider(key="w:padding").set_value(2).run()
    at.button(key="me:padding").click().run()
    assert at.session_state["p:custom_mask"] == cmask(masks.padding(6, 6, 2).tolist())
    at.button(key="me:cmask:all").click().run()
    assert at.session_state["p:custom_mask"] == "111111." * 5 + "111111"


def test_the_editor_command_follows_the_setting() -> None:
    at = open_ok("mask_editor")
    weights = "--init=normal --draws=stable"  # the page's weights, which the command line does not start from
    assert [c.value for c in at.code] == [f"python -m attention {weights} --custom-mask mask.json"]
    at.number_input(key="w:seed").set_value(5).run()
    ok(at)
    assert [c.value for c in at.code] == [f"python -m attention {weights} --seed=5 --custom-mask mask.json"]


def test_the_editor_export_is_what_the_command_line_reads(monkeypatch, tmp_path, capsys) -> None:
    files: dict[str, bytes] = {}
    load = MemoryMediaFileStorage.load_and_get_id

    def keep(self, data, mimetype, kind, filename=None):
        file_id = load(self, data, mimetype, kind, filename)
        files[file_id] = data if isinstance(data, bytes) else data.encode()
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    rows = [[True, False, True], [False, True, False], [True, True, True]]
    at = open_ok("mask_editor", sentence="the cat -sat", d_k="8", seed="3", custom_mask=cmask(rows))
    assert at.session_state["p:custom_mask"] == cmask(rows)
    url = at.get("download_button")[0].proto.url
    path = tmp_path / "mask.json"
    path.write_bytes(files[Path(url).stem])
    assert json.loads(path.read_text())["mask"] == rows

    command = shlex.split(at.code[0].value)
    assert command[:3] == ["python", "-m", "attention"] and command[3:5] == ["--sentence-file", "mask.json"]
    assert main([str(path) if a == "mask.json" else a for a in command[3:]] + ["--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = compute(Config(sentence="the cat -sat", d_k=8, seed=3, mask="custom", custom_mask=rows, **W))
    torch.testing.assert_close(torch.tensor(out["heads"][0]["weights"]), want.weights[0])


def test_the_editor_refuses_a_sentence_too_long_to_edit() -> None:
    at = open_ok("mask_editor", sentence=" ".join(["w"] * 41))
    assert "up to 40 tokens" in at.info[0].value


# --------------------------------------------------------------------------- soft lookup


def lookup(at: AppTest):
    return frame(at, "weight α")


def test_the_soft_lookup_shows_the_focus_tokens_weights() -> None:
    at = open_ok("soft_lookup")
    r = compute(Config(**W))
    table = lookup(at)
    assert table["key"].tolist() == [f"{j + 1} {w}" for j, w in enumerate(r.tokens)]
    torch.testing.assert_close(torch.tensor(table["weight α"].tolist()), r.weights[0, 1])
    assert at.selectbox(key="w:token").value == 1
    assert "Query 2 is" in at.subheader[0].value


@pytest.mark.parametrize(("kind", "key", "value"), [("selectbox", "w:token", 4), ("number_input", "w:seed", 9),
                                                    ("selectbox", "w:mask", "causal")])  # fmt: skip
def test_the_soft_lookup_reacts_to_its_controls(kind: str, key: str, value) -> None:
    at = open_ok("soft_lookup")
    before = lookup(at)["weight α"].tolist()
    getattr(at, kind)(key=key).set_value(value).run()
    ok(at)
    assert lookup(at)["weight α"].tolist() != before
    assert at.query_params[key[2:]] == str(value)


def test_a_soft_lookup_link_reopens_its_view() -> None:
    at = open_ok("soft_lookup", token="3", heads="2", head="1", mask="causal")
    assert at.selectbox(key="w:token").value == 3 and at.selectbox(key="w:head").value == 1
    r = compute(Config(heads=2, mask="causal", **W))
    table = lookup(at)
    torch.testing.assert_close(torch.tensor(table["weight α"].tolist()), r.weights[1, 3])
    assert table["may attend"].tolist() == [True] * 4 + [False] * 2


def test_the_soft_lookup_draws_values_and_their_weighted_rows_on_one_scale() -> None:
    at = open_ok("soft_lookup")
    shown = charts.headers(at)
    ends = {shown[t]["maxAbs"] for t in ("values v", "α · v", "context z = Σ α · v")}
    assert len(ends) == 1  # the same colour means the same number in all three
    values, weighted = (charts.heatmaps(at)[t][0] for t in ("values v", "α · v"))
    assert ends.pop() == pytest.approx(float(values.abs().max()), rel=1e-6)
    assert float(weighted.abs().max()) < float(values.abs().max())  # so the weighted rows draw fainter
