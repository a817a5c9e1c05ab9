"""Exports: the JSON object, CSV with defused labels, and the standalone script that reproduces compute()."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings

from attention import Config, compute, masks, presets
from attention.io.export import labels, matrix_csv, safe_cell, to_dict, to_json
from attention.io.script import script
from harness.scripts import assert_reproduces, exec_script
from harness.strategies import configs

HEAD_KEYS = {
    "w_query",
    "w_key",
    "w_value",
    "queries",
    "keys",
    "values",
    "omega",
    "scaled",
    "mask",
    "weights",
    "context",
}


# JSON -------------------------------------------------------------------------------------------


def test_to_dict_has_the_issues_keys_and_shapes() -> None:
    config = Config(cross_sentence="a b c d", heads=2, out_proj=True, mask="custom", custom_mask=[[1, 0, 1, 0]] * 6)
    r = compute(config)
    d = to_dict(r)
    assert {"tokens", "key_tokens", "embeddings", "output", "w_out", "heads", "config", "empty_rows"} <= set(d)
    assert d["tokens"] == list(r.tokens) and d["key_tokens"] == ["a", "b", "c", "d"]
    assert len(d["heads"]) == 2 and all(HEAD_KEYS <= set(head) for head in d["heads"])
    head = d["heads"][1]
    assert (len(head["omega"]), len(head["omega"][0])) == (6, 4)
    assert (len(head["w_query"]), len(head["w_query"][0])) == (16, 24)
    assert head["mask"][0] == [True, False, True, False]
    assert head["context"] == r.context[1].tolist() and d["output"] == r.output.tolist()
    assert d["w_out"] == r.w_out.tolist() and d["config"] == config.to_dict()
    assert d["empty_rows"] == [False] * 6


def test_json_is_strict_and_has_no_infinity() -> None:
    r = compute(Config(mask="causal"))  # the masked scores are -inf; they are not exported
    text = to_json(r)
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert data["w_out"] is None and data["heads"][0]["b_query"] is None
    assert data["heads"][0]["weights"][0][1:] == [0.0] * 5


def test_overflowed_numbers_become_null_not_invalid_json() -> None:
    # Config keeps inputs small enough that compute stays finite; the export still never writes
    # invalid JSON if a number does overflow (a Result edited by hand, say)
    x = [[1.0, 1.0], [1.0, 2.0]]
    r = compute(Config(sentence=None, embeddings=x, d_model=None, init="identity", d_k=2, d_v=2))
    r = dataclasses.replace(
        r,
        omega=r.omega.clone().index_put_(
            (torch.tensor([0]), torch.tensor([0]), torch.tensor([0])), torch.tensor(float("inf"))
        ),
    )
    data = json.loads(to_json(r))
    assert data["heads"][0]["omega"][0][0] is None and data["heads"][0]["omega"][1][1] == 5.0


# CSV --------------------------------------------------------------------------------------------


def test_labels_are_position_then_word_and_distinct() -> None:
    assert labels(["the", "chef", "the"]) == ["1 the", "2 chef", "3 the"]
    assert len(set(labels(["a"] * 10))) == 10


@pytest.mark.parametrize("label", ['=HYPERLINK("http://x","y")', "+1", "-1", "@x", "\t=1", " =1"])
def test_formula_labels_are_neutralised_and_round_trip(label: str) -> None:
    text = matrix_csv(torch.tensor([[0.5, -1.0]]), [label], [label, 'ok, "quoted"'])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["", "'" + label, 'ok, "quoted"'] and rows[1] == ["'" + label, "0.5", "-1"]
    assert safe_cell("1 =x") == "1 =x" and safe_cell("'=x") == "'=x"


def test_csv_numbers_read_back_to_the_same_float32() -> None:
    m = torch.randn(5, 7) * torch.logspace(-8, 8, 7)
    rows = list(csv.reader(io.StringIO(matrix_csv(m, labels("abcde"), labels("vwxyzuv")))))
    back = torch.tensor([[float(x) for x in row[1:]] for row in rows[1:]], dtype=torch.float32)
    assert torch.equal(back, m)
    assert rows[1][0] == "1 a" and rows[0][1:] == labels("vwxyzuv")


def test_csv_of_weights_and_a_mask() -> None:
    r = compute(Config(sentence="the chef the", mask="causal"))
    weights = list(csv.reader(io.StringIO(matrix_csv(r.weights[0], labels(r.tokens), labels(r.tokens)))))
    assert weights[0] == ["", "1 the", "2 chef", "3 the"] and weights[1][1:] == ["1", "0", "0"]
    mask = list(csv.reader(io.StringIO(matrix_csv(r.mask, labels(r.tokens), labels(r.tokens)))))
    assert mask[3] == ["3 the", "1", "1", "1"]
    with pytest.raises(ValueError, match="3x2 matrix"):
        matrix_csv(r.mask, labels(r.tokens), ["a", "b"])


# script -----------------------------------------------------------------------------------------

SCRIPT_CONFIGS = {
    "default": Config(),
    "cross+custom mask": Config(
        cross_sentence="one two three two", mask="custom", custom_mask=[[1, 0, 1, 1], [0, 0, 0, 0]] * 3
    ),
    "split+out_proj+bias": Config(head_layout="split", heads=4, init="linear", bias=True, out_proj=True, d_out=8),
    "dropout": Config(heads=2, init="rand", dropout=0.4, mask="window", window=2, seed=5),
    "temperature": Config(
        scale="temperature", temperature=0.7, init="identity", d_k=16, d_v=16, mask="padding", padding=2
    ),
    "given weights, cross embedding": Config(
        sentence=None,
        embeddings=[[1, 2], [3, 4.5]],
        d_model=None,
        cross_sentence="p q r",
        cross_embedding_init="embedding",
        init="given",
        d_k=1,
        d_v=1,
        heads=2,
        w_query=[[1, 0], [0, 1]],
        w_key=[[0.5, 1], [1, -1]],
        w_value=[[2, 1], [1, 0]],
        out_proj=True,
        w_out=[[1, 2], [3, 4]],
        bias=True,
    ),
    "huge seed": Config(seed=2**64 - 1, embedding_init="randn", cross_sentence="x y", cross_embedding_init="rand"),
}


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
@pytest.mark.parametrize("name", ["default", "split+out_proj+bias"])
def test_script_runs_standalone_in_a_subprocess(name: str) -> None:
    config = SCRIPT_CONFIGS[name]
    p = subprocess.run([sys.executable, "-c", script(config)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert_reproduces(json.loads(p.stdout), config)


@pytest.mark.parametrize("name", list(SCRIPT_CONFIGS))
def test_script_reproduces_compute(name: str) -> None:
    assert_reproduces(exec_script(SCRIPT_CONFIGS[name]), SCRIPT_CONFIGS[name])


@pytest.mark.parametrize("name", [n for n in presets.PRESETS if n != "spelled-out-multi-head"])
def test_script_reproduces_each_preset(name: str) -> None:
    assert_reproduces(exec_script(presets.get(name).config), presets.get(name).config)


def test_script_reproduces_the_spelled_out_preset_at_a_smaller_size() -> None:
    config = presets.get("spelled-out-multi-head").config.replace(d_model=32, d_k=16, d_v=8)
    assert_reproduces(exec_script(config), config)


@settings(max_examples=60, deadline=None)
@given(configs(given_weights=True))
def test_script_reproduces_random_configs(config: Config) -> None:
    assert_reproduces(exec_script(config), config)


def test_script_imports_only_torch_math_json_and_writes_only_needed_branches() -> None:
    plain = script(Config(init="rand"))
    imports = {line for line in plain.splitlines() if line.startswith(("import ", "from "))}
    assert imports == {"import json", "import math", "import torch"}
    assert "mask" not in plain and "dropout" not in plain and "linear" not in plain and "W_out" not in plain
    assert "kaiming_uniform_" in script(Config(init="linear")) and "torch.nn.init" in script(Config(init="linear"))
    causal = script(Config(mask="causal"))
    assert "tril()" in causal and "masked_fill(~mask.any" not in causal  # no query loses every key
    assert "masked_fill(~mask.any" in script(Config(mask="padding", padding=6))


def test_user_text_stays_inside_string_literals() -> None:
    config = Config(sentence="a\"\nimport os  #\u2028 'b' \\x", cross_sentence="os.system('x')")
    text = script(config)
    assert "\nimport os" not in text
    assert_reproduces(exec_script(config), config)


def run_script(config: Config) -> dict:
    """Run script(config) quietly and return its namespace (the mask it built, among the rest)."""
    namespace: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(script(config), "<attention script>", "exec"), namespace)
    return namespace


WORDS = " ".join(f"w{i}" for i in range(512))


@pytest.mark.parametrize(
    ("mask", "written"),
    [
        (masks.causal(5, 5), ".tril()"),
        (masks.padding(5, 5, 2), "mask[:, 3:] = False"),
        (masks.window(5, 5, 2), "(j > i - 2)"),
        (masks.padding(5, 5, 0), "nothing to mask"),
        (masks.padding(5, 5, 5), "torch.zeros(5, 5, dtype=torch.bool)"),
    ],
    ids=["causal", "padding", "window", "all allowed", "all blocked"],
)
def test_a_custom_mask_that_a_rule_gives_is_written_as_the_rule(mask: torch.Tensor, written: str) -> None:
    config = Config(sentence="a b c d e", mask="custom", custom_mask=mask.tolist())
    text = script(config)
    assert written in text and "mask_rows" not in text and "[True" not in text
    assert_reproduces(exec_script(config), config)


def test_a_512_token_causal_custom_mask_gives_a_small_script() -> None:
    # a 2.5 KB link (mask=custom at 512 tokens, no stored mask that fits) falls back to causal, passed as a
    # custom mask: the script was 1.7 MB of True/False literals
    config = Config(sentence=WORDS, mask="custom", custom_mask=masks.causal(512, 512).tolist())
    text = script(config)
    assert len(text.encode()) < 20_000
    namespace = run_script(config)
    assert torch.equal(namespace["mask"], masks.causal(512, 512))
    assert_reproduces(exec_script(config), config)


@pytest.mark.parametrize("t_q, t_k", [(7, 4), (512, 512)])
def test_an_irregular_mask_is_one_bit_string_per_row_and_round_trips(t_q: int, t_k: int) -> None:
    mask = torch.rand(t_q, t_k, generator=torch.Generator().manual_seed(3)) < 0.5  # (T_q, T_k)
    mask[0, 0] = mask[0, 1] = True  # no rule gives it: row 0 is no prefix of causal, window or padding
    mask[1, 0] = False
    cross = " ".join(f"k{j}" for j in range(t_k))
    config = Config(sentence=" ".join(WORDS.split()[:t_q]), cross_sentence=cross, mask="custom", custom_mask=mask)
    text = script(config)
    rows = "".join("1" if x else "0" for x in mask[2].tolist())
    assert f'    "{rows}",\n' in text
    assert len(text.encode()) < t_q * (t_k + 8) + 10_000  # the literal stays within a byte a cell, and a line a row
    assert torch.equal(run_script(config)["mask"], mask)
    assert_reproduces(exec_script(config), config)
