"""The command line's LLM modes: --decode (a KV cache, step by step) and --block-size (FlashAttention's tiles)."""

from __future__ import annotations

import json

import pytest
import torch

from attention import Config, compute
from attention.io.cli.main import main
from attention.llm import decoding


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_decode_writes_every_step_equal_to_the_causal_rows(capsys: pytest.CaptureFixture) -> None:
    status, out, err = run(capsys, "--decode", "--heads", "4", "--kv-heads", "2", "--format", "json")
    assert status == 0, err
    steps = json.loads(out)["steps"]
    full = compute(Config(heads=4, kv_heads=2, mask="causal"))  # --decode implies the causal mask
    assert len(steps) == len(full.tokens)
    for s in steps:
        t = s["t"]
        torch.testing.assert_close(torch.tensor(s["weights"]), full.weights[:, t, : t + 1], atol=1e-6, rtol=0)
        assert s["cache_bytes"] == 2 * (t + 1) * (24 + 28) * 4  # 2 K/V heads keep keys (24) and values (28)
        assert s["products"] == 4 * (t + 1)
    status, out, _ = run(capsys, "--decode", "--mask", "window", "--window", "2")
    assert status == 0 and out.count("step ") == 6


REFUSED = [
    ["--decode", "--mask", "none"],
    ["--decode", "--block-size", "2"],
    ["--decode", "--format", "script"],
    ["--block-size", "0"],
    ["--block-size", "7"],
]


@pytest.mark.parametrize("argv", REFUSED)
def test_modes_refuse_what_they_cannot_show_with_one_line(capsys: pytest.CaptureFixture, argv: list[str]) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and err.startswith("attention: error:")


def test_block_size_writes_the_tiles_and_the_same_output(capsys: pytest.CaptureFixture) -> None:
    status, out, err = run(capsys, "--block-size", "4", "--mask", "causal", "--format", "json")
    assert status == 0, err
    tiled = json.loads(out)
    want = compute(Config(mask="causal")).context
    torch.testing.assert_close(torch.tensor(tiled["output"]), want, atol=1e-6, rtol=0)
    assert tiled["largest_difference"] < 1e-5 and len(tiled["tiles"]) == 4  # 2 query blocks x 2 key blocks
    assert [t["skipped"] for t in tiled["tiles"]] == [False, True, False, False]  # the causal mask skips one
    status, out, _ = run(capsys, "--block-size", "4")
    assert status == 0 and "largest difference from the ordinary softmax" in out


def test_a_grouped_cache_keeps_one_key_per_kv_head() -> None:
    steps = decoding.decode_result(compute(Config(heads=6, kv_heads=2, mask="causal")))
    assert steps[-1].cache_keys.shape == (2, 6, 24) and steps[-1].kv_heads == 2
