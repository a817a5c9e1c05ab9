"""`python -m attention --train ...`: the tiny model's snapshots as JSON or a table, bad settings in one line."""

from __future__ import annotations

import json
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
