"""The command line checks sizes before work: every case that used to cost gigabytes or hours now exits in a fresh
interpreter held to 1 GB (a cgroup v1 memory limit where this machine has one, else its peak resident memory is
read), with one line: a long text is cut to the model's 512 tokens before it is tokenized, --block-size has a tile
budget, --format script computes no Result, input files are counted before they are parsed, a batch has a bound,
and a memory error from any library or a tokenizers panic is one line, exit 2.

benchmarks/cli_bounds.py times the same cases; both run them through harness/bounded.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from attention.io.cli import common, inputs, toy
from attention.io.cli.main import main
from harness.bounded import HEAVY, LIMIT, bounded


def one_line(status: int, out: str, err: str, *words: str) -> None:
    assert status == 2, (status, err[-2000:])
    assert out == "" and err.count("\n") == 1 and err.startswith("attention: error: "), err[-2000:]
    for w in words:
        assert w in err, err


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
def test_a_16_mib_text_for_the_model_is_cut_before_it_is_tokenized(tmp_path: Path) -> None:
    text = tmp_path / "long.txt"
    text.write_text("The animal didn't cross the street because it was too tired. " * ((16 << 20) // 62))
    status, out, err, _, peak = bounded("--model", "minilm", "--sentence-file", str(text), "--format", "json")
    assert status == 0, err[-2000:]
    assert out.count('"tokens"') == 1 and '"[SEP]"' in out and peak < LIMIT / 1e6


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_block_size_one_at_512_tokens_and_16_heads_is_refused_with_the_smallest_that_fits() -> None:
    status, out, err, _, peak = bounded(*HEAVY, "--block-size", "1")
    one_line(status, out, err, "--block-size 1 makes 262,144 tiles", "give --block-size")
    least = int(err.split("give --block-size ")[1].split()[0])
    assert toy.tile_bytes(512, 512, 16, 256, least) <= toy.TILE_BYTES < toy.tile_bytes(512, 512, 16, 256, least - 1)
    assert peak < LIMIT / 1e6


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_script_is_written_without_computing_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err, _, peak = bounded(*HEAVY, "--format", "script")
    assert status == 0 and out.startswith(("#", '"""', "import")) and "torch" in out, err[-2000:]
    assert peak < 600  # MB: the interpreter and torch, no 135 MB Result and its temporaries
    monkeypatch.setattr(toy, "compute", lambda *a: pytest.fail("computed a Result for a script"))
    assert main(["--heads", "2", "--format", "script"]) == 0


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_weight_file_of_more_numbers_than_any_input_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "w.json"
    row = "[" + ", ".join(["0.123456789012345678"] * 1024) + "]"
    big.write_text("[" + ", ".join([row] * 2100) + "]")  # 2.15 M numbers, 47 MB: under the file bound
    status, out, err, _, peak = bounded("--d-model", "2100", "--d-k", "1024", "--w-query", str(big))
    one_line(status, out, err, "--w-query", "2,150,400 numbers", "at most 2,097,152")
    assert peak < LIMIT / 1e6


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_batch_of_millions_of_sequences_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    batch = tmp_path / "batch.json"
    batch.write_text("[" + ",".join(["[[1]]"] * 8_400_000) + "]")
    status, out, err, _, peak = bounded("--embeddings", str(batch), "--format", "json")
    one_line(status, out, err, "--embeddings", "8,400,000 numbers")
    assert peak < LIMIT / 1e6


def test_a_batch_over_the_bound_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    batch = tmp_path / "batch.json"
    batch.write_text("[" + ",".join(["[[1, 2]]"] * (inputs.MAX_BATCH + 1)) + "]")
    assert main(["--embeddings", str(batch)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"a batch of {inputs.MAX_BATCH + 1:,} sequences" in err
    batch.write_text("[" + ",".join(["[[1, 2]]"] * 3) + "]")
    assert main(["--embeddings", str(batch), "--heads", "1", "--format", "json"]) == 0


@pytest.mark.parametrize("bad", [
    [[1, True]], [[1, 2], [3]], [[1, "x"]], [[1, 1e39]],
])  # fmt: skip
def test_the_fast_check_of_a_matrix_keeps_every_message(tmp_path: Path, capsys: pytest.CaptureFixture, bad) -> None:
    import json

    path = tmp_path / "m.json"
    path.write_text(json.dumps(bad))
    assert main(["--embeddings", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert any(w in err for w in ("not a number", "not rectangular", "does not fit a float32")), err


def test_a_memory_error_or_a_tokenizers_panic_from_any_library_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from attention.models import minilm

    class PanicException(BaseException):  # what pyo3 raises for a Rust panic: not an Exception
        pass

    def panic(*a, **k):
        raise PanicException("called `Result::unwrap()` on an `Err` value")

    monkeypatch.setattr(minilm, "read", panic)
    assert main(["--model", "minilm", "--sentence", "hello"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the tokenizer failed" in err

    def no_memory(*a, **k):
        raise MemoryError

    monkeypatch.setattr(minilm, "read", no_memory)
    assert main(["--model", "minilm", "--sentence", "hello"]) == 2
    assert capsys.readouterr().err == f"attention: error: {common.OUT_OF_MEMORY}\n"
    monkeypatch.setattr(toy, "compute", lambda *a: (_ for _ in ()).throw(RuntimeError("can't allocate memory")))
    assert main(["--heads", "2"]) == 2
    assert capsys.readouterr().err == f"attention: error: {common.OUT_OF_MEMORY}\n"
