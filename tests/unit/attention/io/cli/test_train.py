"""`python -m attention --train ...`: the tiny model's snapshots as JSON or a table, bad settings in one line; and
`--model tiny`: its circuits (attribution, composition, OV, QK) in the contract of `--model smollm2`'s."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention.io.cli.main import main
from attention.models import tiny

ROOT = Path(__file__).resolve().parents[5]
ARGS = ["--train", "induction", "--layers", "2", "--heads", "2", "--steps", "40", "--every", "20", "--seed", "0"]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_settings_and_every_snapshots_scores_per_layer_then_head(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(ARGS + ["--format", "json"], capsys)
    assert code == 0 and err == ""
    data = json.loads(out)
    settings = tiny.Settings(layers=2, heads=2, steps=40, every=20, seed=0)
    assert data["settings"] == settings.to_dict()
    assert [s["step"] for s in data["snapshots"]] == [0, 20, 40]
    for snap in data["snapshots"]:
        assert set(snap["scores"]) == {"induction", "previous_token"}
        assert [len(row) for row in snap["scores"]["induction"]] == [2, 2]
        assert "weights" not in snap
    # the same numbers as the package's run of the same settings
    want = [s.to_dict(with_weights=False) for s in tiny.train(settings).snapshots]
    assert data["snapshots"] == json.loads(json.dumps(want))
    assert data["formed"] is None and data["stopped"] is None


def test_table_shows_every_snapshot_and_head(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run_cli(ARGS + ["--format", "table"], capsys)
    assert code == 0
    data = tiny.train(tiny.Settings(layers=2, heads=2, steps=40, every=20, seed=0))
    lines = out.splitlines()
    assert lines[0].startswith("induction: 2 layers x 2 heads, d_model 32")
    header = lines[2].split()
    assert header[:4] == ["step", "loss", "answers", "right"] and "L1H1" in header
    rows = [line.split() for line in lines[3:6]]
    assert [int(r[0]) for r in rows] == [0, 20, 40]
    last = data.snapshots[-1]
    assert float(rows[-1][1]) == pytest.approx(last.loss, abs=5e-4)
    assert float(rows[-1][-1]) == pytest.approx(last.scores["induction"][1][1], abs=5e-4)
    assert "No head formed" in out


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_module_runs_as_a_program() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attention", *ARGS[:-4], "--steps", "5", "--every", "5", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [s["step"] for s in json.loads(done.stdout)["snapshots"]] == [0, 5]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--train", "induction", "--layers", "5"], "layers must be between 1 and 3, got 5"),
        (["--train", "induction", "--heads", "0"], "heads must be between 1 and 4, got 0"),
        (["--train", "induction", "--d-model", "30", "--heads", "4"], "d_model=30 must divide into heads=4"),
        (["--train", "induction", "--lr", "nan"], "lr must be a number from 0.0001 to 1"),
        (["--train", "copy"], "invalid choice: 'copy'"),
        (["--train", "induction", "--layers", "two"], "invalid int value: 'two'"),
        (["--train", "induction", "--steps", "5000", "--every", "1"], "at most 500"),
    ],
)
def test_bad_settings_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_a_saved_run_reloads_to_the_same_numbers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "run.json"
    code, out, _ = run_cli(ARGS + ["--format", "json", "--save", str(path)], capsys)
    assert code == 0
    run = tiny.Run.from_dict(json.loads(path.read_text()))
    assert [s.to_dict(with_weights=False) for s in run.snapshots] == json.loads(out)["snapshots"]
    again = tiny.measure(run.snapshots[-1].weights, run.settings)
    assert again.scores == run.snapshots[-1].scores
    assert torch.equal(run.snapshots[-1].weights.token, tiny.train(run.settings).snapshots[-1].weights.token)


def test_a_nan_loss_prints_what_was_trained_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    real = tiny.losses
    monkeypatch.setattr(tiny.trainer, "losses", lambda f, s: (real(f, s)[0] * float("nan"), real(f, s)[1]))
    code, out, err = run_cli(ARGS + ["--format", "json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert "the loss became nan at step 1" in data["stopped"] and "nan at step 1" in err
    assert [s["step"] for s in data["snapshots"]] == [0]


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_run_is_saved_a_snapshot_at_a_time_as_the_same_json(tmp_path: Path) -> None:
    # Issue 38: `--save` built the whole run as Python lists first (899 MiB for the largest run, 48 MB of weights).
    import tracemalloc

    from attention.io.cli.tiny import dump_run

    run = tiny.train(tiny.Settings(layers=2, heads=2, d_model=32, steps=100, every=5, seed=1))  # 21 snapshots
    streamed, whole = tmp_path / "streamed.json", tmp_path / "whole.json"
    tracemalloc.start()  # what Python allocates while writing (the file's text goes to the OS): no clock involved
    try:
        with streamed.open("w", encoding="utf-8") as f:
            dump_run(run, f)
        _, peak_streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with whole.open("w", encoding="utf-8") as f:
            json.dump(run.to_dict(), f)
        _, peak_whole = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert streamed.read_text() == whole.read_text()  # the same file, byte for byte
    assert peak_streamed < peak_whole / 5, (peak_streamed, peak_whole)  # about one snapshot's lists of 21


# `--model tiny`: the circuits of the tiny model, the contract of `--model smollm2 --attribution | --composition` ------
TINY = ["--model", "tiny", "--layers", "2", "--heads", "2", "--d-model", "16", "--steps", "40", "--every", "20"]
TINY_SETTINGS = tiny.Settings(layers=2, heads=2, d_model=16, steps=40, every=20)
SENTENCE = "abcdeabcd"


def _within(value: float, expected: float) -> None:
    """The issue's bar: within 1e-4 x max(1, |logit|)."""
    assert abs(value - expected) <= 1e-4 * max(1.0, abs(expected)), (value, expected)


def _head_values(w: tiny.Weights, ids: torch.Tensor, direction: torch.Tensor) -> dict[tuple[int, int], float]:
    """Each head's output at the last token read along `direction`, by hand from the forward pass's own weights."""
    fwd = tiny.forward(w, ids[None], 2)
    out = {}
    for layer, lw in enumerate(w.layers):
        x = fwd.residual[layer][0]  # (T, d_model)
        for h in range(2):
            cols = slice(h * 8, (h + 1) * 8)
            context = fwd.weights[layer][0, h, -1] @ (x @ lw.w_value[:, cols])  # (d_head,)
            out[(layer, h)] = float(context @ lw.w_out[cols] @ direction)
    return out


def test_the_tiny_models_attribution_keeps_the_contract_and_sums_to_its_logit(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(TINY + ["--attribution", "--sentence", SENTENCE, "--format", "json"], capsys)
    assert code == 0 and err == ""
    got = json.loads(out)
    w = tiny.train(TINY_SETTINGS).snapshots[-1].weights
    ids = torch.tensor([tiny.NAMES.index(c) for c in SENTENCE])
    logits = tiny.forward(w, ids[None], 2).logits[0, -1]
    top = int(logits.argmax())
    assert set(got) == {"target", "logit", "components"} and got["target"] == {"id": top, "token": tiny.NAMES[top]}
    kinds = [c["kind"] for c in got["components"]]
    assert kinds == ["embed", "position", "head", "head", "head", "head"]
    assert [(c["layer"], c["head"]) for c in got["components"][2:]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    _within(sum(c["value"] for c in got["components"]), got["logit"])
    _within(got["logit"], float(logits[top]))
    by_hand = _head_values(w, ids, w.unembed[:, top])
    for c in got["components"][2:]:
        assert c["value"] == pytest.approx(by_hand[(c["layer"], c["head"])], abs=1e-4)
    assert got["components"][0]["value"] == pytest.approx(float(w.token[ids[-1]] @ w.unembed[:, top]), abs=1e-5)
    code, out, _ = run_cli(TINY + ["--attribution", "--sentence", SENTENCE, "--target", "e", "--versus", "a",
                                   "--format", "json"], capsys)  # fmt: skip
    versus = json.loads(out)
    assert code == 0 and versus["versus"] == {"id": 1, "token": "a"} and versus["target"]["token"] == "e"
    _within(versus["logit"], float(logits[5] - logits[1]))
    _within(sum(c["value"] for c in versus["components"]), versus["logit"])
    code, out, _ = run_cli(TINY + ["--attribution", "--sentence", SENTENCE, "--target", "e"], capsys)
    assert code == 0 and out.startswith("the tiny model: direct logit attribution of logit['e']") and "L1H0" in out


def test_the_tiny_models_composition_has_every_head_once_and_nulls_where_no_later_layer(
    capsys: pytest.CaptureFixture,
) -> None:
    from attention.models import circuits
    from attention.models.circuits import trained

    code, out, _ = run_cli(TINY + ["--layers", "3", "--composition", "--format", "json"], capsys)
    assert code == 0
    got = json.loads(out)
    assert got["heads"] == [[layer, h] for layer in range(3) for h in range(2)] and set(got) == {"q", "k", "v", "heads"}
    w = tiny.train(TINY_SETTINGS.replace(layers=3)).snapshots[-1].weights
    layers = [trained._matrices(w, layer, 2) for layer in range(3)]
    for kind in "qkv":
        m = got[kind]
        assert len(m) == 6 and all(len(r) == 6 for r in m)
        for i, (li, hi) in enumerate(got["heads"]):
            for j, (lj, hj) in enumerate(got["heads"]):
                if lj <= li:
                    assert m[i][j] is None
                else:
                    assert m[i][j] == pytest.approx(circuits.reference(layers[li], hi, layers[lj], hj)[kind], rel=1e-4)
    code, out, _ = run_cli(TINY + ["--composition"], capsys)
    assert code == 0 and "strongest pairs" in out and "K: L0H" in out


def test_a_heads_ov_and_qk_circuits_come_from_its_weights(capsys: pytest.CaptureFixture) -> None:
    from attention.models.circuits import trained

    code, out, _ = run_cli(TINY + ["--ov", "--layer", "0", "--head", "1", "--sentence", "abca", "--format", "json"],
                           capsys)  # fmt: skip
    assert code == 0
    ov = json.loads(out)
    w = tiny.train(TINY_SETTINGS).snapshots[-1].weights
    assert (ov["layer"], ov["head"]) == (0, 1) and [r["token"] for r in ov["sources"]] == ["a", "b", "c"]
    assert ov["copying"] == pytest.approx(float(trained.copying_scores(w, 2)[0, 1]), abs=1e-6)
    cols = slice(8, 16)
    row = w.token[1] @ w.layers[0].w_value[:, cols] @ w.layers[0].w_out[cols] @ w.unembed  # what it writes reading a
    assert [t["token"] for t in ov["sources"][0]["top"]] == [tiny.NAMES[int(i)] for i in row.topk(5).indices]
    code, out, _ = run_cli(TINY + ["--qk", "--layer", "1", "--head", "0", "--sentence", SENTENCE, "--format", "json"],
                           capsys)  # fmt: skip
    assert code == 0
    qk = json.loads(out)
    ids = torch.tensor([tiny.NAMES.index(c) for c in SENTENCE])
    omega = tiny.layer_result(tiny.train(TINY_SETTINGS).snapshots[-1], TINY_SETTINGS, 1, ids).omega[0, -1]
    assert qk["query"] == len(SENTENCE) - 1 and len(qk["keys"]) == len(SENTENCE)
    for k in qk["keys"]:
        assert list(k["parts"])[:2] == ["key's token", "key's position"] and len(k["parts"]) == 4
        assert sum(k["parts"].values()) == pytest.approx(k["score"], abs=1e-5)
        assert k["score"] == pytest.approx(float(omega[k["key"]]) / math.sqrt(8), abs=1e-4)


def test_a_saved_run_loads_to_the_same_circuits(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "run.json"
    settings = ["--layers", "2", "--heads", "2", "--d-model", "16", "--steps", "40", "--every", "20"]
    assert run_cli(["--train", "induction", *settings, "--save", str(path)], capsys)[0] == 0
    code, loaded, _ = run_cli(["--model", "tiny", "--load", str(path), "--attribution", "--format", "json"], capsys)
    assert code == 0
    code, trained_now, _ = run_cli(TINY + ["--attribution", "--format", "json"], capsys)
    assert code == 0 and json.loads(loaded) == json.loads(trained_now)  # the probe sequence by default, both times


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--attribution", "--target", "ab"], "--target 'ab' is not one token of the tiny model"),
        (["--attribution", "--target", ""], "is not one token of the tiny model"),
        (["--attribution", "--target", "G"], "is not one token of the tiny model"),
        (["--attribution", "--versus", " a"], "--versus ' a' is not one token"),
        (["--attribution", "--sentence", "ab?c"], "no token of the tiny model ('?')"),
        (["--attribution", "--sentence", "   "], "the sentence has no tokens"),
        (["--attribution", "--sentence", "a" * 66], "66 tokens and the tiny model has 65 positions"),
        (["--attribution", "--composition"], "choose one of --attribution, --composition, --ov and --qk"),
        ([], "choose one of"),
        (["--composition", "--target", "a"], "--target and --versus go with --attribution"),
        (["--ov", "--layer", "2"], "--layer must be between 0 and 1"),
        (["--qk", "--head", "5"], "--head must be between 0 and 1"),
        (["--composition", "--heads", "3"], "d_model=16 must divide into heads=3"),
        (["--composition", "--task", "copy"], "invalid choice: 'copy'"),
        (["--composition", "--load", "/nonexistent/run.json"], "cannot read /nonexistent/run.json"),
    ],
)
def test_bad_circuit_requests_exit_2_with_one_line(argv: list[str], message: str, capsys) -> None:
    code, out, err = run_cli(TINY + argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
