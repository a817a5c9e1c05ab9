"""The command line's --model: one head of all-MiniLM-L6-v2 with the model's own numbers, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention.io.cli.main import main
from attention.models import minilm

ROOT = Path(__file__).resolve().parents[5]
SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def model() -> minilm.Model:
    return minilm.load()


def call(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(("layer", "head"), [(3, 1), (0, 0), (5, 11)])
def test_json_weights_are_the_models_attention_probabilities(capsys, model, layer, head) -> None:
    status, out, err = call(capsys, "--model", "minilm", "--layer", str(layer), "--head", str(head),
                            "--sentence", SENTENCE, "--format", "json")  # fmt: skip
    assert status == 0, err
    doc = json.loads(out)
    run = minilm.forward(model, SENTENCE)
    assert doc["tokens"] == list(run.tokens) == doc["key_tokens"]
    assert len(doc["heads"]) == 1
    weights = torch.tensor(doc["heads"][0]["weights"])
    torch.testing.assert_close(weights, run.weights[layer, head], atol=1e-6, rtol=0)
    context = torch.tensor(doc["heads"][0]["context"])
    torch.testing.assert_close(context, run.context[layer, head], atol=1e-6, rtol=0)


def test_json_keys_are_the_same_as_a_toys(capsys) -> None:
    _, toy, _ = call(capsys, "--format", "json")
    status, real, err = call(capsys, "--model", "minilm", "--format", "json")
    assert status == 0, err
    assert list(json.loads(real)) == list(json.loads(toy))
    assert list(json.loads(real)["heads"][0]) == list(json.loads(toy)["heads"][0])


def test_defaults_are_the_pages_opening_view(capsys, model) -> None:
    status, out, _ = call(capsys, "--model", "minilm", "--format", "json")
    assert status == 0
    run = minilm.forward(model, minilm.DEFAULT_SENTENCE)
    torch.testing.assert_close(torch.tensor(json.loads(out)["heads"][0]["weights"]), run.weights[3, 1],
                               atol=1e-6, rtol=0)  # fmt: skip


def test_table_names_the_head_and_shows_the_subword_tokens(capsys) -> None:
    status, out, err = call(
        capsys, "--model", "minilm", "--layer", "2", "--head", "7", "--sentence", "Unbelievably fun"
    )
    assert status == 0, err
    assert out.startswith("all-MiniLM-L6-v2, layer 2, head 7\n")
    assert "tokens:     [CLS] un ##bel" in out and out.count("[SEP]") > 1
    assert "weights = softmax(omega * 1/sqrt(32))" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "minilm", "--layer", "6"], "--layer must be a layer of the model, 0 to 5, got 6"),
        (["--model", "minilm", "--layer", "-1"], "0 to 5, got -1"),
        (["--model", "minilm", "--head", "12"], "--head must be a head of the model, 0 to 11, got 12"),
        (["--model", "minilm", "--head", "x"], "invalid int value"),
        (["--model", "bert"], "invalid choice"),
        (["--model", "minilm", "--preset", "raschka"], "leave one out"),
        (["--layer", "2"], "add --model minilm"),
        (["--head", "2"], "add --model minilm"),
        (["--model", "minilm", "--d-k", "4"], "--d-k is a toy setting"),
        (["--model", "minilm", "--sentence", "   "], "the sentence is empty"),
    ],
)
def test_bad_values_exit_2_with_one_line(capsys, argv, says) -> None:
    status, out, err = call(capsys, *argv)
    assert status == 2 and out == ""
    assert err.startswith("attention: error: ") and err.count("\n") == 1, err
    assert says in err


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_model_in_a_fresh_interpreter_prints_json() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "attention", "--model", "minilm", "--head", "0", "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)  # fmt: skip
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert json.loads(p.stdout)["tokens"][0] == "[CLS]"


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_script_of_a_model_head_reproduces_it_with_its_biases(capsys: pytest.CaptureFixture, tmp_path) -> None:
    status, text, err = call(capsys, "--model", "minilm", "--layer", "2", "--head", "5", "--sentence", SENTENCE,
                             "--format", "script")  # fmt: skip
    assert status == 0, err
    assert "b_query = torch.tensor(" in text and "+ b_query" in text  # the model's q/k/v biases, written out
    (tmp_path / "head.py").write_text(text)  # the head's three 384 x 32 matrices: too long for an argument
    ran = subprocess.run([sys.executable, str(tmp_path / "head.py")], capture_output=True, text=True, timeout=120,
                         check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    status, out, err = call(capsys, "--model", "minilm", "--layer", "2", "--head", "5", "--sentence", SENTENCE,
                            "--format", "json")  # fmt: skip
    want = json.loads(out)
    printed = json.loads(ran.stdout)
    torch.testing.assert_close(torch.tensor(printed["weights"][0]), torch.tensor(want["heads"][0]["weights"]),
                               atol=1e-6, rtol=0)  # fmt: skip
    torch.testing.assert_close(torch.tensor(printed["output"]), torch.tensor(want["output"]), atol=1e-5, rtol=0)
