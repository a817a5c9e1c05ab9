"""`python -m attention --model M --atlas`: the page's scores as JSON or a table; bad input one line, status 2."""

from __future__ import annotations

import json
import re

import pytest

from attention.io.cli.main import main
from attention.lessons import atlas
from harness.fixtures import one_thread  # noqa: F401  (fixtures, one_thread autouse)


@pytest.mark.parametrize(
    ("model", "layers", "heads", "extra"),
    [("minilm", 6, 12, {"special", "sep", "punctuation"}), ("smollm2", 30, 9, {"kv_group"})],
)
@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_json_has_every_head_with_its_scores(model, layers, heads, extra, capsys: pytest.CaptureFixture) -> None:
    text = "The cat sat on the mat, and the cat slept."
    assert main(["--model", model, "--atlas", "--sentence", text, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == model and out["input"] == "text" and out["texts"] == 1
    assert [(h["layer"], h["head"]) for h in out["heads"]] == [(la, h) for la in range(layers) for h in range(heads)]
    assert set(out["heads"][0]) == {"layer", "head", *atlas.SCORES, *extra}
    want = atlas.model_atlas(model, "text", text)
    for row in out["heads"]:
        for k in atlas.SCORES:
            assert row[k] == pytest.approx(float(want.scores[k][row["layer"], row["head"]]), abs=1e-6)


def test_a_text_without_repeats_gives_null_not_zero_and_the_table_says_why(capsys: pytest.CaptureFixture) -> None:
    assert main(["--model=minilm", "--atlas", "--sentence", "a quick brown fox", "--format=json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["missing"]) == {"duplicate_token", "induction", "punctuation"}
    assert all(h["induction"] is None for h in out["heads"])
    assert main(["--model", "minilm", "--atlas", "--sentence", "a quick brown fox", "--drop-first"]) == 0
    table = capsys.readouterr().out
    assert "first token left out" in table and "need a token that appears twice" in table
    rows = [line for line in table.splitlines() if re.match(r"\s*L\d+H\d+\s+(\d|—)", line)]
    assert len(rows) == 72


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "minilm", "--atlas", "--sentence", "  "], "empty"),
        (["--model", "gpt2", "--atlas"], "invalid choice"),
        (["--model", "minilm", "--atlas", "--sentence", "x", "--input", "repeated"], "give one of them"),
    ],
)
def test_bad_input_is_one_line_with_status_2(argv, says, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) <= 2
