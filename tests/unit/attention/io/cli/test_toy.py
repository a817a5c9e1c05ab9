"""The command line: presets, flags over presets, JSON and table output, and one-line errors for bad input."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config, compute, presets
from attention.io import export
from attention.io.cli import inputs, toy
from attention.io.cli.main import main

ROOT = Path(__file__).resolve().parents[5]


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m attention ARGV` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "attention", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )


def call(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """main(argv) in this process: (exit status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(status: int, err: str) -> None:
    assert status == 2, err
    assert err.startswith("attention: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


def write(tmp_path: Path, name: str, value: object) -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return str(path)


# in a fresh interpreter -------------------------------------------------------------------------


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_list_presets_in_a_subprocess() -> None:
    p = run("--list-presets")
    assert p.returncode == 0 and p.stderr == ""
    assert [line.split()[0] for line in p.stdout.splitlines()] == list(presets.PRESETS)


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_json_and_a_bad_flag_in_a_subprocess(tmp_path: Path) -> None:
    p = run("--preset", "chef-causal", "--format", "json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["heads"][0]["context"] == compute(presets.get("chef-causal").config).context[0].tolist()
    bad = run("--embeddings", write(tmp_path, "x.json", "[[1, 2], [3"))
    assert bad.returncode == 2 and bad.stdout == ""
    one_line_error(bad.returncode, bad.stderr)


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
@pytest.mark.parametrize("output", ["table", "json"])
def test_output_to_a_closed_pipe_is_not_an_error(output: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # 300 words: megabytes of output, so the reader leaves while it is still being written
    shell = f"{sys.executable} -m attention --sentence '{'w ' * 300}' --format {output} | head -c 100 > /dev/null"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
@pytest.mark.parametrize(("path", "what"), [("/dev/zero", "is a device"), ("fifo", "is a pipe (FIFO)")])
def test_a_device_or_fifo_is_refused_without_reading_it(tmp_path: Path, path: str, what: str) -> None:
    if path == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs on this system")
        path = str(tmp_path / "fifo")
        os.mkfifo(path)  # no writer ever comes: opening it to read would wait forever
    elif not os.path.exists(path):
        pytest.skip(f"no {path} on this system")
    p = run("--embeddings", path, timeout=60)  # /dev/zero used to be read until memory ran out
    one_line_error(p.returncode, p.stderr)
    assert what in p.stderr and "give" in p.stderr and p.stdout == ""


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
def test_a_json_output_of_half_a_gigabyte_streams_in_bounded_memory(tmp_path: Path) -> None:
    """512 tokens, 16 heads, widths 256: 545 MB of JSON, which took 2.7 GB of memory when built in one string."""
    words = " ".join(f"w{i}" for i in range(512))
    argv = ["--sentence", words, "--heads", "16", "--d-model", "256", "--d-k", "256", "--d-v", "256"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The child's own peak, read from its /proc/self/status (VmHWM) as it exits: a rusage figure would count the
    # pytest process it was forked from, whose pages it held until exec (Linux keeps that in ru_maxrss).
    peak_file = tmp_path / "peak"
    wrapper = (
        "import atexit, re, runpy, sys\n"
        "out = sys.argv.pop(1)\n"
        "def peak():\n"
        "    kib = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "    open(out, 'w').write(kib)\n"
        "atexit.register(peak)\n"
        "runpy.run_module('attention', run_name='__main__', alter_sys=True)\n"
    )
    command = [sys.executable, "-c", wrapper, str(peak_file), *argv, "--format", "json"]
    p = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env, timeout=280)
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    peak = int(peak_file.read_text()) * 1024
    assert peak < 2**30, f"peak memory {peak / 2**20:.0f} MiB"


# in this process --------------------------------------------------------------------------------


# spelled-out-multi-head's full JSON is 296 MB (8 heads of 512 x 1024 weights) and takes ~15 s to write:
# it is checked below with its sizes shrunk by flags, which also exercises flags over a preset
SMALL = {"spelled-out-multi-head": ["--d-model", "16", "--d-k", "8", "--d-v", "4"]}


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_each_preset_as_json_matches_compute(capsys: pytest.CaptureFixture, name: str) -> None:
    status, out, err = call(capsys, "--preset", name, *SMALL.get(name, []), "--format", "json")
    assert status == 0 and err == ""
    data = json.loads(out)
    config = presets.get(name).config
    if name in SMALL:
        config = config.replace(d_model=16, d_k=8, d_v=4)
        assert data["config"]["heads"] == 8 and data["config"]["out_proj"] is True
    r = compute(config)
    assert data["tokens"] == list(r.tokens) and data["key_tokens"] == list(r.key_tokens)
    assert data["output"] == r.output.tolist()
    assert [head["weights"] for head in data["heads"]] == r.weights.tolist()
    assert [head["omega"] for head in data["heads"]] == r.omega.tolist()


def test_default_table_shows_each_step_with_token_labels(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--preset", "raschka-self-attention")
    assert status == 0
    assert "omega = Q K^T" in out and "weights = softmax" in out and "context = weights @ V" in out
    rows = [line.split()[2:] for line in out.splitlines() if line.startswith("2 is ")]  # omega, weights, context
    assert rows[1] == ["0.2912", "0.0106", "0.0982", "0.0625", "0.4917", "0.0458"]


def test_multi_head_table_shows_every_head_then_the_output(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--preset", "chef-multi-head")
    assert status == 0
    assert "head 1: omega" in out and "head 2: context" in out and "output = concat(heads) @ W_out + b_out" in out
    assert out.index("head 2: context") < out.index("output =")
    assert [line.split()[2:] for line in out.splitlines() if line.startswith("12 wine")][-1] == ["0.5761", "-0.3689"]


def test_flags_override_only_what_they_name(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--preset", "chef-self-attention", "--mask", "causal", "--format", "json")
    assert status == 0
    config = json.loads(out)["config"]
    assert config["mask"] == "causal" and config["seed"] == 1240 and config["init"] == "linear"
    assert json.loads(out)["heads"][0]["context"] == compute(presets.get("chef-causal").config).context[0].tolist()


def test_a_presets_matrices_give_way_to_flags_they_no_longer_fit(capsys: pytest.CaptureFixture) -> None:
    status, out, err = call(capsys, "--preset", "chef-causal", "--sentence", "a b c", "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert data["tokens"] == ["a", "b", "c"] and data["config"]["embeddings"] is None
    assert data["config"]["d_model"] == 3 and data["config"]["seed"] == 1240  # the preset's width and seed stay
    status, out, err = call(capsys, "--preset", "integer-example", "--init", "rand", "--format", "json")
    assert status == 0, err
    assert json.loads(out)["config"]["w_query"] is None and json.loads(out)["embeddings"][0] == [1, 0, 1, 0]
    status, out, _ = call(
        capsys, "--preset", "chef-causal", "--sentence", "a b c d e f g h i j k l", "--format", "json"
    )
    assert json.loads(out)["embeddings"] == compute(presets.get("chef-causal").config).embeddings.tolist()


def test_every_field_has_a_flag(capsys: pytest.CaptureFixture) -> None:
    from attention.basics.config import FIELD_NAMES
    from attention.io.cli.toy import parser

    flags = {a.dest for a in parser()._actions}
    assert set(FIELD_NAMES) <= flags
    assert main(["--help"]) == 0
    help_text = capsys.readouterr().out
    for flag in ("--d-k", "--no-bias", "--out-proj", "--no-out-bias", "--head-layout", "--custom-mask"):
        assert flag in help_text


def test_embeddings_file_without_d_model_takes_its_width(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    x = write(tmp_path, "x.json", [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    status, out, err = call(capsys, "--embeddings", x, "--sentence", "a b c", "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert data["config"]["d_model"] is None and data["embeddings"] == [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]


def test_given_weights_reproduce_the_integer_example(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    c = presets.get("integer-example").config
    files = {
        f"--{n}": write(tmp_path, f"{n}.json", getattr(c, n.replace("-", "_"))) for n in ("w-query", "w-key", "w-value")
    }
    x = write(tmp_path, "x.json", c.embeddings)
    argv = [
        "--embeddings",
        x,
        "--d-k",
        "5",
        "--d-v",
        "5",
        "--scale",
        "none",
        *sum(files.items(), ()),
        "--format",
        "json",
    ]
    status, out, err = call(capsys, *argv)
    assert status == 0, err
    assert json.loads(out)["heads"][0]["context"] == compute(c).context[0].tolist()  # --init given is implied


@pytest.mark.parametrize("document", ["bare", "object", "ints"])
def test_an_exported_mask_round_trips(capsys: pytest.CaptureFixture, tmp_path: Path, document: str) -> None:
    mask = [[True, False, True], [False, False, False], [True, True, True]]
    value = {"bare": mask, "object": {"mask": mask}, "ints": [[int(b) for b in row] for row in mask]}[document]
    status, out, err = call(
        capsys, "--sentence", "a b c", "--custom-mask", write(tmp_path, "m.json", value), "--format", "json"
    )
    assert status == 0, err
    data = json.loads(out)
    assert data["config"]["mask"] == "custom" and data["heads"][0]["mask"] == mask
    assert data["empty_rows"] == [False, True, False] and data["heads"][0]["weights"][1] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--window", "2"], "mask", "window"),
        (["--padding", "1"], "mask", "padding"),
        (["--padding", "1", "--window", "2"], "mask", "none"),  # two settings: --mask must say which
        (["--mask", "causal", "--window", "2"], "mask", "causal"),
        (["--temperature", "2"], "scale", "temperature"),
        (["--temperature", "2", "--scale", "none"], "scale", "none"),
    ],
)
def test_a_setting_implies_its_mask_or_scale(capsys: pytest.CaptureFixture, argv: list[str], field: str, value: str):
    status, out, _ = call(capsys, *argv, "--format", "json")
    assert status == 0 and json.loads(out)["config"][field] == value


def test_script_format_prints_the_reproducing_script(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--preset", "chef-causal", "--format", "script")
    assert status == 0 and out.startswith('"""') and "import torch" in out and "tril()" in out


def test_control_characters_in_tokens_are_shown_escaped(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--sentence", "red \x1b[2Jclear bell\x07 abc\u202edef 👩\u200d👧")
    assert status == 0 and "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[2Jclear" in out and "abc\\u202edef" in out and "👩\u200d👧" in out  # emoji joiners stay


# bad input --------------------------------------------------------------------------------------

BAD_JSON = {
    "malformed": "[[1, 2], [3",
    "not a matrix": '{"a": 1}',
    "empty": "[]",
    "empty row": "[[]]",
    "ragged": "[[1, 2], [3]]",
    "nan": "[[NaN, 1]]",
    "infinity": "[[Infinity, 1]]",
    "overflow": "[[1e400, 1]]",
    "float32 overflow": "[[1e39, 1]]",
    "huge int": "[[" + "9" * 400 + "]]",
    "too many digits": "[[" + "9" * 5000 + "]]",
    "string": '[["1", 2]]',
    "boolean": "[[true, 2]]",
    "nested": "[[[[1]]]]",  # [[[1]]] is a batch of one sequence
    "deep": "[" * 100000 + "]" * 100000,
    "not utf-8": b"\xff\xfe[[1]]",
}


@pytest.mark.parametrize("case", list(BAD_JSON))
def test_bad_embeddings_files_exit_2_with_one_line(capsys: pytest.CaptureFixture, tmp_path: Path, case: str) -> None:
    path = tmp_path / "bad.json"
    content = BAD_JSON[case]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status, out, err = call(capsys, "--embeddings", str(path))
    one_line_error(status, err)
    assert out == "" and "--embeddings" in err


BAD_ARGV = [
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--d-k", "0"], "d_k must be between 1"),
    (["--d-k", "1e3"], "invalid int value"),
    (["--heads", "3", "--head-layout", "split"], "does not divide"),
    (["--sentence", ""], "sentence is empty"),
    (["--sentence", "w " * 513], "at most 512"),
    (["--mask", "diagonal"], "invalid choice"),
    (["--dropout", "nan"], "dropout must be a probability"),
    (["--dropout", "1"], "dropout must be a probability"),
    (["--temperature", "inf"], "temperature must be a number from 0.001 to 1000"),
    (["--seed", str(2**64)], "seed must be between"),
    (["--seed", "twelve"], "invalid int value"),
    (["--frobnicate"], "unrecognized arguments"),
    (["--d-"], "unrecognized arguments"),
    (["--sentence"], "expected one argument"),
    (["--embeddings", "/nonexistent/x.json"], "cannot read"),
    (["--w-query", "/nonexistent/w.json"], "cannot read"),
    (["--window", "0"], "window must be at least 1"),
    (["--padding", "-1"], "padding must be 0 or more"),
    (["--cross-sentence", "   "], "cross sentence is empty"),
    (["--init", "given"], "needs w_query"),
    (["--preset", "\x1b[31mred"], "unknown preset"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGV, ids=[m for _, m in BAD_ARGV])
def test_bad_flags_exit_2_with_one_line(capsys: pytest.CaptureFixture, argv: list[str], message: str) -> None:
    status, out, err = call(capsys, *argv)
    one_line_error(status, err)
    assert message in err and out == "" and "\x1b" not in err


def test_bad_mask_files_exit_2(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    for value in ([[1, 2]], {"grid": [[True]]}, [[True, "yes"]], [[True] * 2] * 2, [[0.5]]):
        status, _, err = call(capsys, "--sentence", "a b c", "--custom-mask", write(tmp_path, "m.json", value))
        one_line_error(status, err)
    status, _, err = call(capsys, "--mask", "causal", "--custom-mask", write(tmp_path, "m.json", [[True]]))
    one_line_error(status, err)
    assert "leave one out" in err


def test_numbers_that_overflow_during_compute_exit_2(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    x = write(tmp_path, "x.json", [[1e30, 1e30], [1.0, 2.0]])
    status, _, err = call(capsys, "--embeddings", x, "--sentence", "a b", "--init", "identity", "--d-k", "2")
    one_line_error(status, err)
    assert "beyond" in err  # refused up front: such inputs would overflow float32


FILE_FLAGS = ["--embeddings", "--cross-embeddings", "--w-query", "--w-key", "--w-value", "--w-out", "--custom-mask"]


@pytest.mark.parametrize("flag", FILE_FLAGS)
def test_a_directory_is_refused_by_every_file_flag(capsys: pytest.CaptureFixture, tmp_path: Path, flag: str) -> None:
    status, out, err = call(capsys, flag, str(tmp_path))
    one_line_error(status, err)
    assert f"{flag}: " in err and "is a directory: give the path of a JSON file" in err and out == ""


def test_a_file_over_the_cap_is_refused_before_it_is_read(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.truncate(inputs.MAX_INPUT_BYTES + 1)  # sparse: no disk space, and reading it would take ~70 MB
    status, _, err = call(capsys, "--embeddings", str(path))
    one_line_error(status, err)
    assert "65 MiB, but input files may be at most 64 MiB" in err and "give a smaller matrix" in err


def test_the_cap_holds_when_the_size_from_stat_is_wrong(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = "/proc/self/status"  # says size 0, holds hundreds of bytes
    if not os.path.exists(path) or os.stat(path).st_size:
        pytest.skip("needs a /proc file whose stat size is 0")
    monkeypatch.setattr(inputs, "MAX_INPUT_BYTES", 64)
    status, _, err = call(capsys, "--embeddings", path)
    one_line_error(status, err)
    assert "is over 0 MiB" in err


def test_the_cap_holds_the_largest_legal_matrix_at_full_precision() -> None:
    row = [-2.2250738585072014e-308] * inputs.MAX_DIM  # the longest text json.dumps gives a float
    assert len(json.dumps([row], indent=2)) * inputs.MAX_TOKENS <= inputs.MAX_INPUT_BYTES


@pytest.mark.parametrize("flag", ["--embeddings", "--custom-mask"])
def test_a_byte_order_mark_is_accepted(capsys: pytest.CaptureFixture, tmp_path: Path, flag: str) -> None:
    value = [[1, 0], [2, 1]] if flag == "--embeddings" else [[True, False], [True, True]]
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(value).encode())  # how Notepad saves "UTF-8 with BOM"
    status, out, err = call(capsys, "--sentence", "a b", flag, str(path), "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert (data["embeddings"] if flag == "--embeddings" else data["heads"][0]["mask"]) == value


@pytest.mark.parametrize("where", ["compute", "write_json"])
def test_running_out_of_memory_exits_2_with_one_line(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    def no_memory(*args: object) -> None:
        raise MemoryError  # as Python raises it: no message, which used to leave the error line empty

    monkeypatch.setattr(toy if where == "compute" else export, where, no_memory)
    status, _, err = call(capsys, "--format", "json")
    one_line_error(status, err)
    assert "not enough memory for these sizes: try fewer tokens or heads" in err


# --format json streams the same text as export.to_json, which builds it in one string -------------

STREAMED = {
    **{name: presets.get(name).config for name in presets.PRESETS if name not in SMALL},
    "spelled-out-multi-head, small": presets.get("spelled-out-multi-head").config.replace(d_model=16, d_k=8, d_v=4),
    "bias, dropout, every key masked": Config(
        sentence="a b c d", heads=3, bias=True, out_proj=True, mask="padding", padding=4, dropout=0.3
    ),
    "cross, split, causal": Config(
        sentence="a b c d", cross_sentence="x y", heads=2, head_layout="split", d_model=8, mask="causal"
    ),
}


@pytest.mark.parametrize("block", [1, 7, export._STREAM_NUMBERS])
@pytest.mark.parametrize("name", list(STREAMED))
def test_streamed_json_is_to_json_byte_for_byte(monkeypatch: pytest.MonkeyPatch, name: str, block: int) -> None:
    monkeypatch.setattr(export, "_STREAM_NUMBERS", block)  # small blocks: matrices written in several pieces
    result = compute(STREAMED[name])
    out = io.StringIO()
    export.write_json(result, out)
    assert out.getvalue() == export.to_json(result)
    assert json.loads(out.getvalue()) == export.to_dict(result)


def test_streamed_json_writes_non_finite_numbers_as_null() -> None:
    result = compute(Config(sentence="a b c"))
    omega = result.omega.clone()
    omega[0, 1, :2] = torch.tensor([float("inf"), float("nan")])
    result = dataclasses.replace(result, omega=omega)
    out = io.StringIO()
    export.write_json(result, out)
    assert out.getvalue() == export.to_json(result)
    assert json.loads(out.getvalue())["heads"][0]["omega"][1][:2] == [None, None]


def test_cli_json_is_to_json_and_a_newline(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = call(capsys, "--preset", "chef-multi-head", "--format", "json")
    assert status == 0 and out == export.to_json(compute(presets.get("chef-multi-head").config)) + "\n"


# fuzz -------------------------------------------------------------------------------------------

FLAGS = [
    "--preset", "--sentence", "--cross-sentence", "--embedding-init", "--cross-embedding-init", "--d-model", "--d-k",
    "--d-v", "--d-out", "--heads", "--head-layout", "--init", "--bias", "--no-bias", "--out-proj", "--no-out-proj",
    "--out-bias", "--no-out-bias", "--scale", "--temperature", "--mask", "--padding", "--window", "--dropout",
    "--seed", "--format", "--embeddings", "--custom-mask", "--list-presets", "--w-query",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(
        [
            "chef-causal",
            "math-notes",
            "split",
            "independent",
            "linear",
            "rand",
            "given",
            "causal",
            "window",
            "custom",
            "temperature",
            "json",
            "table",
            "script",
            "embedding",
            "randn",
            "none",
            "-1",
            "0",
            "1",
            "2",
            "3",
            "4",
            "8",
            "0.5",
            "nan",
            "inf",
            "1e3",
            "",
            "a b c",
            "the chef the",
            "/nonexistent.json",
            "=HYPERLINK(1)",
            "--",
            "-",
        ]
    ),  # fmt: skip
    st.integers(-(2**66), 2**66).map(str),
    st.floats(allow_nan=True).map(str),
    st.text(max_size=12),
)
ARGV = st.lists(st.one_of(st.sampled_from(FLAGS), VALUES), max_size=8)


@settings(max_examples=200, deadline=None)
@given(ARGV)
def test_fuzzed_argv_exits_0_or_2_and_never_raises(argv: list[str]) -> None:
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(argv)  # an exception here fails the test with its traceback
    assert status in (0, 2), (argv, err.getvalue())
    if status == 2:
        assert err.getvalue().startswith("attention: error: ") and err.getvalue().count("\n") == 1
    else:
        assert out.getvalue() and err.getvalue() == ""
