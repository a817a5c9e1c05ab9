"""`python -m attention --model smollm2`: a head prints the keys of a toy result with the model's numbers, its script
reproduces them, --generate prints each step from the KV cache, bad values are one line with status 2."""

from __future__ import annotations

import json

import pytest
import torch

from attention import compute
from attention.io.cli.main import main
from attention.io.export import to_dict
from attention.models import smollm2
from harness.fixtures import one_thread  # noqa: F401  (fixtures, one_thread autouse)
from harness.scripts import assert_reproduces


@pytest.fixture(scope="module")
def run() -> tuple[smollm2.Prompt, smollm2.Run]:
    return smollm2.forward(smollm2.load(), "John gave a drink to")


def test_a_heads_json_has_a_toy_results_keys_and_the_models_numbers(run, capsys: pytest.CaptureFixture) -> None:
    prompt, model_run = run
    argv = ["--model", "smollm2", "--layer", "5", "--head", "7", "--sentence", prompt.text, "--format", "json"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    toy = to_dict(compute(smollm2.head_config(smollm2.load(), model_run, 5, 7)))
    assert set(got) == set(toy)
    assert got["tokens"] == list(prompt.tokens)
    torch.testing.assert_close(torch.tensor(got["heads"][0]["weights"]), model_run.weights[5, 7], atol=1e-5, rtol=0)


def test_the_table_names_the_head_and_the_script_reproduces_it(run, capsys: pytest.CaptureFixture) -> None:
    prompt, model_run = run
    assert main(["--model=smollm2", "--layer", "2", "--head", "4", "--sentence", prompt.text]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SmolLM2-135M-Instruct, layer 2, head 4 (reads K/V head 1)") and "softmax" in out.lower()
    assert_reproduces(
        _exec(smollm2.head_config(smollm2.load(), model_run, 2, 4)),
        smollm2.head_config(smollm2.load(), model_run, 2, 4),
    )


def _exec(config) -> dict:
    from harness.scripts import exec_script

    return exec_script(config)


def test_generate_prints_each_step_read_from_the_cache(capsys: pytest.CaptureFixture) -> None:
    argv = ["--model", "smollm2", "--generate", "2", "--temperature", "0", "--format", "json", "--layer", "18"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    steps = got["steps"]
    assert steps[0]["token"] == " Mary" and steps[0]["top5"][0]["token"] == " Mary"
    assert [s["cache_tokens"] for s in steps] == [15, 16]
    assert steps[1]["cache_bytes"] == 30 * 2 * 3 * 16 * 64 * 4
    assert len(steps[1]["weights"]) == 16 and abs(sum(steps[1]["weights"]) - 1) < 1e-5
    assert main(["--model", "smollm2", "--generate", "1", "--temperature", "0"]) == 0
    assert "step 1: ' Mary'" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--head", "9"], "--head must be between 0 and 8"),
        (["--layer", "30"], "--layer must be between 0 and 29"),
        (["--sentence", "  "], "the prompt is empty"),
        (["--generate", "2", "--format", "script"], "--generate writes a table or JSON"),
        (["--mask", "causal"], "unrecognized arguments"),
    ],
)
def test_bad_values_are_one_line_with_status_2(argv: list[str], says: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["--model", "smollm2", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
