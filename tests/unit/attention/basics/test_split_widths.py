"""The split layout with a per-head width given: project d_in -> heads * d_k, then cut into heads, whatever d_model
is (the from-scratch multi-head attention of widely used tutorials), against PyTorch."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config, compute
from attention.io.cli.main import main
from harness.strategies import matrix


class FromScratch(torch.nn.Module):
    """Multi-head attention as tutorials write it from scratch: one Linear per projection, cut into heads."""

    def __init__(self, d_in: int, heads: int, d_k: int, d_v: int, bias: bool) -> None:
        super().__init__()
        self.h, self.d_k, self.d_v = heads, d_k, d_v
        self.W_query = torch.nn.Linear(d_in, heads * d_k, bias=bias)
        self.W_key = torch.nn.Linear(d_in, heads * d_k, bias=bias)
        self.W_value = torch.nn.Linear(d_in, heads * d_v, bias=bias)
        self.out_proj = torch.nn.Linear(heads * d_v, d_in)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = len(x)
        q = self.W_query(x).view(t, self.h, self.d_k).transpose(0, 1)  # (h, T, d_k)
        k = self.W_key(x).view(t, self.h, self.d_k).transpose(0, 1)
        v = self.W_value(x).view(t, self.h, self.d_v).transpose(0, 1)  # (h, T, d_v)
        scores = (q @ k.transpose(1, 2)).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -torch.inf)
        weights = torch.softmax(scores / math.sqrt(self.d_k), dim=-1)
        context = (weights @ v).transpose(0, 1).reshape(t, self.h * self.d_v)
        return weights, self.out_proj(context)


SHAPES = [(6, 2, 4, 3, True), (5, 3, 2, 7, False), (8, 4, 8, 8, True), (3, 1, 16, 1, True)]


@pytest.mark.parametrize(("d_model", "heads", "d_k", "d_v", "bias"), SHAPES)
def test_a_given_d_k_sets_the_projection_width_as_a_from_scratch_module_does(d_model, heads, d_k, d_v, bias) -> None:
    x = torch.randn(5, d_model, generator=torch.Generator().manual_seed(d_model))
    torch.manual_seed(11)  # the module draws from the global generator; the package from its own, seeded alike
    module = FromScratch(d_model, heads, d_k, d_v, bias)
    weights, output = module(x)
    config = Config.from_embeddings(x, head_layout="split", heads=heads, d_k=d_k, d_v=d_v, init="linear", bias=bias,
                                    out_proj=True, out_bias=True, mask="causal", seed=11)  # fmt: skip
    r = compute(config)
    assert r.queries.shape == (heads, 5, d_k) and r.values.shape == (heads, 5, d_v) and r.output.shape == (5, d_model)
    torch.testing.assert_close(r.w_query.transpose(0, 1).reshape(d_model, -1), module.W_query.weight.detach().T)
    torch.testing.assert_close(r.weights, weights.detach(), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(r.output, output.detach(), atol=1e-5, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_given_split_weights_of_any_head_width_equal_sdpa(data: st.DataObject) -> None:
    heads = data.draw(st.sampled_from([1, 2, 4]))
    kv_heads = data.draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0]))
    d_model, d_k, d_v, t = (data.draw(st.integers(1, n)) for n in (9, 6, 6, 6))
    x = torch.tensor(data.draw(matrix(t, d_model)))
    wq, wk, wv = (torch.tensor(data.draw(matrix(d_model, n))) for n in (heads * d_k, kv_heads * d_k, kv_heads * d_v))
    causal = data.draw(st.booleans())
    r = compute(Config.from_embeddings(x, head_layout="split", heads=heads, kv_heads=kv_heads, d_k=d_k, d_v=d_v,
                                       init="given", w_query=wq, w_key=wk, w_value=wv,
                                       mask="causal" if causal else "none"))  # fmt: skip

    def cut(y: torch.Tensor, n: int) -> torch.Tensor:
        return y.view(t, n, -1).transpose(0, 1)  # (n, T, width)

    want = torch.nn.functional.scaled_dot_product_attention(
        cut(x @ wq, heads), cut(x @ wk, kv_heads), cut(x @ wv, kv_heads), is_causal=causal, enable_gqa=True
    )  # (h, T, d_v)
    torch.testing.assert_close(r.context, want, atol=1e-4, rtol=1e-4)
    assert r.kv_keys.shape == (kv_heads, t, d_k) and r.concat.shape == (t, heads * d_v)


@pytest.mark.parametrize("init", ["rand", "rand-transposed", "linear", "identity"])
def test_left_out_widths_keep_the_numbers_of_d_model_cut_into_heads(init: str) -> None:
    base = Config(head_layout="split", d_model=12, heads=3, init=init, bias=True, out_proj=True, seed=4)
    assert base.d_k is None and base.head_dims == (4, 4)
    for same in (base.replace(d_k=4), base.replace(d_k=4, d_v=4), base.replace(d_out=12), base.replace(d_v=4)):
        a, b = compute(base), compute(same)
        assert torch.equal(a.output, b.output) and torch.equal(a.weights, b.weights)
    assert Config(head_layout="split", d_model=12, heads=3, d_k=5).head_dims == (5, 5)  # d_v follows a given d_k
    assert Config(d_k=5).head_dims == (5, 28) and Config().head_dims == (24, 28)  # the independent layout's


def test_a_given_d_k_lifts_the_divisibility_rule_and_a_disagreeing_d_out_is_named() -> None:
    with pytest.raises(ValueError, match="does not divide 7: pick heads from 1, 7, give d_k"):
        Config(head_layout="split", d_model=7, heads=2)
    assert compute(Config(head_layout="split", d_model=7, heads=2, d_k=3)).queries.shape == (2, 6, 3)
    with pytest.raises(ValueError, match=r"d_out=8 is the split projection's width but heads x d_k = 2 x 3 = 6"):
        Config(head_layout="split", heads=2, d_k=3, d_out=8)
    assert Config(head_layout="split", heads=2, d_k=4, d_out=8).head_dims == (4, 4)


def test_the_command_line_takes_a_per_head_width_in_the_split_layout(capsys: pytest.CaptureFixture) -> None:
    argv = ["--d-model", "6", "--head-layout", "split", "--heads", "2", "--d-k", "4", "--d-v", "3", "--out-proj",
            "--init", "linear", "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    r = compute(Config(d_model=6, head_layout="split", heads=2, d_k=4, d_v=3, out_proj=True, init="linear"))
    assert [len(out["heads"][0]["queries"][0]), len(out["heads"][0]["values"][0]), len(out["output"][0])] == [4, 3, 6]
    torch.testing.assert_close(torch.tensor(out["output"]), r.output, atol=1e-6, rtol=0)
    assert main(["--head-layout", "split", "--heads", "2", "--d-k", "3", "--d-out", "8"]) == 2
    assert "heads x d_k = 2 x 3 = 6" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("config", "kept"),
    [
        (Config(d_k=24, d_v=28), {}),
        (Config(d_k=5, d_v=28), {"d_k": 5}),
        (Config(head_layout="split", heads=2, d_k=8, d_v=8), {"head_layout": "split", "heads": 2}),
        (Config(head_layout="split", heads=2, d_k=4, d_v=4), {"head_layout": "split", "heads": 2, "d_k": 4}),
        (Config(head_layout="split", heads=2, d_k=8, d_v=4), {"head_layout": "split", "heads": 2, "d_v": 4}),
        (
            Config(head_layout="split", d_model=7, heads=2, d_k=3),
            {"head_layout": "split", "d_model": 7, "heads": 2, "d_k": 3},
        ),  # fmt: skip
    ],
)
def test_changes_leave_out_a_width_that_leaving_it_out_derives(config: Config, kept: dict) -> None:
    assert config.changes() == kept
    assert Config(**config.changes()).head_dims == config.head_dims


def test_changes_leave_out_settings_not_in_use() -> None:
    config = Config(mask="causal", padding=3, window=5, scale="sqrt", temperature=2.0, rope_base=500.0)
    assert config.changes() == {"mask": "causal"}
    assert Config(mask="window", window=5, padding=3).changes() == {"mask": "window", "window": 5}
