"""A (B, T, d) batch from the command line: --embeddings (and --cross-embeddings) files of a batch of sequences,
each sequence's result equal to compute_batch's and to its own single-sequence computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attention import Config, compute, compute_batch
from attention.io.cli.main import main

G = torch.Generator().manual_seed(3)
X = torch.randn(3, 4, 6, generator=G)  # 3 sequences of 4 tokens, d_model 6
Y = torch.randn(3, 5, 2, generator=G)  # their key/value inputs: 5 tokens, 2 wide


def write(tmp_path: Path, name: str, value) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value.tolist() if isinstance(value, torch.Tensor) else value))
    return str(path)


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_a_batch_file_gives_one_json_object_per_sequence(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, err = run(capsys, "--embeddings", write(tmp_path, "x.json", X), "--cross-embeddings",
                           write(tmp_path, "y.json", Y), "--heads", "2", "--d-k", "3", "--d-v", "4", "--out-proj",
                           "--mask", "causal", "--causal-align", "bottom-right", "--format", "json")  # fmt: skip
    assert status == 0, err
    batch = json.loads(out)["batch"]
    config = Config(heads=2, d_k=3, d_v=4, out_proj=True, mask="causal", causal_align="bottom-right")
    want = compute_batch(config, X, Y)
    assert len(batch) == 3
    for b, one in enumerate(batch):
        alone = compute(Config.from_embeddings(X[b], Y[b], heads=2, d_k=3, d_v=4, out_proj=True, mask="causal",
                                               causal_align="bottom-right"))  # fmt: skip
        assert one["tokens"] == ["x1", "x2", "x3", "x4"] and one["key_tokens"] == ["y1", "y2", "y3", "y4", "y5"]
        torch.testing.assert_close(torch.tensor(one["output"]), want.output[b], atol=1e-6, rtol=0)
        torch.testing.assert_close(torch.tensor(one["output"]), alone.output, atol=1e-6, rtol=0)
        weights = torch.tensor([h["weights"] for h in one["heads"]])  # (h, T_q, T_k)
        torch.testing.assert_close(weights, want.weights[b], atol=1e-6, rtol=0)
    assert not torch.equal(want.output[0], want.output[1])  # the sequences really differ


def test_a_batch_as_tables_and_with_a_preset(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, err = run(capsys, "--preset", "chef-self-attention", "--embeddings", write(tmp_path, "x.json", X))
    assert status == 0, err
    assert [line for line in out.splitlines() if line.startswith("sequence")] == [
        "sequence 1 of 3", "sequence 2 of 3", "sequence 3 of 3"
    ]  # fmt: skip
    assert out.count("d_model 6,") == 3


def test_one_matrix_is_still_one_result(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, _ = run(capsys, "--embeddings", write(tmp_path, "x.json", X[0]), "--format", "json")
    assert status == 0 and "batch" not in json.loads(out)


@pytest.mark.parametrize(
    ("files", "extra", "message"),
    [
        ({"--embeddings": [[[1, 2], [3, 4]], [[1, 2]]]}, [], "sequence 1 is 2x2 but sequence 2 is 1x2; pad them"),
        ({"--embeddings": [[[1, 2]], [1, 2]]}, [], "sequence 2 of the batch"),
        ({"--embeddings": [[["a", 2]]]}, [], "(sequence 1): row 1 holds"),
        ({"--cross-embeddings": [[[1, 2]]]}, [], "give --embeddings a batch of the same B"),
        (
            {"--embeddings": X, "--cross-embeddings": Y[:2]},
            [],
            "batch of 3, so --cross-embeddings must too; it holds 2",
        ),
        ({"--embeddings": X, "--cross-embeddings": Y[0]}, [], "it holds one matrix"),
        ({"--embeddings": X}, ["--format", "script"], "--format script works on one sequence"),
        ({"--embeddings": X}, ["--decode"], "--decode works on one sequence"),
        ({"--embeddings": X}, ["--block-size", "2"], "--block-size works on one sequence"),
    ],
)
def test_a_bad_batch_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, files, extra, message) -> None:
    argv = [a for i, (f, v) in enumerate(files.items()) for a in (f, write(tmp_path, f"{i}.json", v))]
    status, out, err = run(capsys, *argv, *extra)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert message in err, err
