"""Other people's attention code said directly in Config: given biases, additive float masks, keys and values of
another width, both causal alignments, and a batch; each against PyTorch's own implementation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention.bias import causal_lower_right

from attention import Config, compute, compute_batch

G = torch.Generator().manual_seed(7)
X = torch.randn(5, 8, generator=G)  # 5 queries, d_model 8
Y = torch.randn(7, 3, generator=G)  # 7 keys/values, 3 wide (kdim = vdim = 3)


def mha_config(mha: torch.nn.MultiheadAttention, x: torch.Tensor, y: torch.Tensor, **kw) -> Config:
    """nn.MultiheadAttention's own weights and biases as a Config (x @ W: the transposes of its Linear weights)."""
    e = mha.embed_dim
    separate = not mha._qkv_same_embed_dim
    wq, wk, wv = (
        (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight) if separate else mha.in_proj_weight.chunk(3)
    )  # fmt: skip
    b = mha.in_proj_bias.detach()
    return Config.from_embeddings(
        x, y, heads=mha.num_heads, head_layout="split", init="given", bias=True, out_proj=True,
        w_query=wq.detach().T, w_key=wk.detach().T, w_value=wv.detach().T, b_query=b[:e], b_key=b[e : 2 * e],
        b_value=b[2 * e :], w_out=mha.out_proj.weight.detach().T, b_out=mha.out_proj.bias.detach(), **kw,
    )  # fmt: skip


@pytest.mark.parametrize("kdim", [8, 3, 12])
def test_given_biases_and_keys_of_another_width_equal_nn_multihead_attention(kdim: int) -> None:
    torch.manual_seed(kdim)
    mha = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim)
    with torch.no_grad():  # nn.MultiheadAttention starts its biases at zero: make them count
        mha.in_proj_bias.uniform_(-1, 1)
        mha.out_proj.bias.uniform_(-1, 1)
    y = torch.randn(7, kdim, generator=G)
    r = compute(mha_config(mha, X, y))
    out, weights = mha(X[:, None], y[:, None], y[:, None], average_attn_weights=False)
    torch.testing.assert_close(r.output, out[:, 0].detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.weights, weights[0].detach(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("init", ["rand", "linear", "identity"])
def test_drawn_weights_take_the_key_inputs_width(init: str) -> None:
    r = compute(Config.from_embeddings(X, Y, heads=2, d_k=4, d_v=5, init=init))
    assert r.w_key.shape == (2, 3, 4) and r.w_value.shape == (2, 3, 5) and r.w_query.shape == (2, 8, 4)
    torch.testing.assert_close(r.keys, Y @ r.w_key)


def test_a_float_score_bias_equals_sdpa_with_a_float_attn_mask() -> None:
    bias = torch.randn(5, 7, generator=G)
    bias[1, 2:] = float("-inf")  # blocked, as a -inf in a float mask blocks
    bias[4, :] = float("-inf")  # a query that may see nothing: zeros here, NaN in SDPA
    r = compute(Config.from_embeddings(X, Y, heads=2, d_k=4, score_bias=bias, mask="causal"))
    assert not bool(r.mask[1, 2:].any()) and bool(r.empty_rows[4])
    from_mask = torch.zeros(5, 7).masked_fill(~torch.ones(5, 7, dtype=torch.bool).tril(), float("-inf"))
    want = torch.nn.functional.scaled_dot_product_attention(
        r.queries, r.keys, r.values, attn_mask=bias + from_mask, scale=1 / r.scale
    )  # (h, T_q, d_v)
    torch.testing.assert_close(r.context[:, :4], want[:, :4], atol=1e-5, rtol=1e-5)
    assert bool((r.context[:, 4] == 0).all())


def test_a_hugging_face_extended_mask_blocks_like_a_boolean_one() -> None:
    padded = torch.tensor([1, 1, 1, 1, 1, 0, 0])  # the last two keys are padding
    extended = (1.0 - padded[None, :].float()) * torch.finfo(torch.float32).min  # (1, T_k), as HF builds it
    r = compute(Config.from_embeddings(X, Y, score_bias=extended.expand(5, 7)))
    boolean = compute(Config.from_embeddings(X, Y, mask="padding", padding=2))
    torch.testing.assert_close(r.weights, boolean.weights, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("t_q", "t_k"), [(3, 7), (7, 3), (5, 5)])
def test_both_causal_alignments_equal_pytorchs(t_q: int, t_k: int) -> None:
    x, y = torch.randn(t_q, 4, generator=G), torch.randn(t_k, 4, generator=G)
    for align in ("top-left", "bottom-right"):
        r = compute(Config.from_embeddings(x, y, d_k=4, mask="causal", causal_align=align))
        allowed = ~r.empty_rows  # bottom-right with T_q > T_k leaves the first queries no key
        if align == "top-left":
            want = torch.nn.functional.scaled_dot_product_attention(r.queries, r.keys, r.values, is_causal=True)
        else:
            want = torch.nn.functional.scaled_dot_product_attention(
                r.queries, r.keys, r.values, attn_mask=causal_lower_right(t_q, t_k)
            )
        torch.testing.assert_close(r.context[:, allowed], want[:, allowed], atol=1e-5, rtol=1e-5)
    last = compute(Config.from_embeddings(x, y, d_k=4, mask="causal", causal_align="bottom-right"))
    assert bool(last.mask[-1].all())  # bottom-right: the last query sees every key


def test_a_batch_gives_each_sequence_its_own_result() -> None:
    inputs = torch.randn(3, 5, 8, generator=G)
    config = Config(heads=2, d_k=4, d_v=6, mask="causal", out_proj=True, seed=5)
    batch = compute_batch(config, inputs)
    assert len(batch) == 3 and batch.weights.shape == (3, 2, 5, 5) and batch.output.shape == (3, 5, 8)
    for b in range(3):
        alone = compute(Config.from_embeddings(inputs[b], heads=2, d_k=4, d_v=6, mask="causal", out_proj=True, seed=5))
        assert torch.equal(batch.context[b], alone.context) and torch.equal(batch.output[b], alone.output)
    # the same weights for every sequence, as a batched module applies one set of weights
    want = torch.nn.functional.scaled_dot_product_attention(
        batch.queries, batch.keys, batch.values, is_causal=True, scale=1 / batch.results[0].scale
    )  # (B, h, T, d_v)
    torch.testing.assert_close(batch.context, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"\(B, T, d\)"):
        compute_batch(config, inputs[0])


def test_the_command_line_says_each_of_them(tmp_path: Path) -> None:
    def write(name: str, value) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(value))
        return str(path)

    x = write("x.json", X.tolist())
    y = write("y.json", Y.tolist())
    bias = write("bias.json", [[0.0] * 6 + [-1e30]] * 5)
    run = subprocess.run(
        [sys.executable, "-m", "attention", "--embeddings", x, "--cross-embeddings", y, "--score-bias", bias,
         "--mask", "causal", "--causal-align", "bottom-right", "--format", "json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    weights = torch.tensor(json.loads(run.stdout)["heads"][0]["weights"])  # (T_q, T_k)
    r = compute(Config.from_embeddings(X, Y, score_bias=[[0.0] * 6 + [-1e30]] * 5, mask="causal",
                                       causal_align="bottom-right"))  # fmt: skip
    torch.testing.assert_close(weights, r.weights[0], atol=1e-6, rtol=0)
    assert bool((weights[:, 6] == 0).all()) and bool((weights[0, 3:] == 0).all())
