"""Positional encodings through Config and compute: what each adds, proven against PyTorch and the formulas."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config, compute
from attention.basics import position
from attention.basics.config import POSITIONS

X = torch.randn(7, 8, generator=torch.Generator().manual_seed(0)).tolist()  # 7 tokens, d_model 8


def context(kind: str, rows: list[list[float]], **kw) -> torch.Tensor:
    return compute(Config.from_embeddings(rows, position=kind, heads=2, d_k=4, d_v=3, **kw)).context


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(7)), st.integers(0, 999))
def test_without_position_shuffling_the_sentence_shuffles_the_rows(perm: list[int], seed: int) -> None:
    shuffled = [X[i] for i in perm]
    torch.testing.assert_close(context("none", shuffled, seed=seed), context("none", X, seed=seed)[:, perm])


@pytest.mark.parametrize("kind", [k for k in POSITIONS if k != "none"])
def test_with_any_encoding_shuffling_changes_the_rows(kind: str) -> None:
    perm = [2, 0, 5, 1, 6, 3, 4]  # not a reversal: ALiBi's symmetric |i - j| penalty cannot tell one from the original
    shuffled = [X[i] for i in perm]
    assert not torch.allclose(context(kind, shuffled), context(kind, X)[:, perm], atol=1e-4)


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_absolute_tables_are_added_to_the_inputs(kind: str) -> None:
    r = compute(Config.from_embeddings(X, position=kind))
    table = position.sinusoidal(7, 8) if kind == "sinusoidal" else r.position.table
    torch.testing.assert_close(r.embeddings, torch.tensor(X) + table[:7])
    assert r.position.table.shape == (7, 8) and bool(r.position.table.abs().sum() > 0)


def rotate_half_by_hand(x: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE from its formula: features i and i + d/2 of token m turned by m * base^(-2i/d)."""
    t, d = x.shape[-2:]
    out = x.clone()
    for m in range(t):
        for i in range(d // 2):
            a = m * base ** (-2 * i / d)
            x1, x2 = x[..., m, i], x[..., m, i + d // 2]
            out[..., m, i] = x1 * torch.cos(torch.tensor(a)) - x2 * torch.sin(torch.tensor(a))
            out[..., m, i + d // 2] = x2 * torch.cos(torch.tensor(a)) + x1 * torch.sin(torch.tensor(a))
    return out


@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_rope_rotates_queries_and_keys_after_projection(base: float) -> None:
    r = compute(Config.from_embeddings(X, position="rope", rope_base=base, heads=2, d_k=6, mask="causal"))
    torch.testing.assert_close(r.queries, rotate_half_by_hand(r.unrotated_queries, base), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.keys, rotate_half_by_hand(r.unrotated_keys, base), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.queries.norm(dim=-1), r.unrotated_queries.norm(dim=-1))  # rotations keep lengths
    torch.testing.assert_close(r.omega, r.queries @ r.keys.transpose(-2, -1))


def test_alibi_equals_sdpa_with_the_bias_as_a_float_mask() -> None:
    r = compute(Config.from_embeddings(X, position="alibi", heads=4, d_k=4, mask="causal"))
    bias = position.alibi_bias(4, 7, 7).masked_fill(~r.mask, float("-inf"))  # (h, T, T): a float attn_mask
    want = torch.nn.functional.scaled_dot_product_attention(r.queries, r.keys, r.values, attn_mask=bias)
    torch.testing.assert_close(r.context, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.scaled, r.omega / r.scale + r.position.bias)


def test_rope_needs_an_even_d_k() -> None:
    with pytest.raises(ValueError, match="d_k must be even"):
        Config(position="rope", d_k=5)


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_command_line_takes_position_and_rope_base() -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "attention", *args, "--format", "json"], capture_output=True,
                              text=True)  # fmt: skip

    plain, rope = run(), run("--rope-base", "500")  # --rope-base alone implies --position rope
    assert plain.returncode == rope.returncode == 0 and plain.stdout != rope.stdout
    assert '"position": "rope"' in rope.stdout and '"rope_base": 500.0' in rope.stdout
    bad = run("--position", "spiral")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
