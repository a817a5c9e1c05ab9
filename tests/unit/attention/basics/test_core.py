"""The package against PyTorch itself: SDPA and nn.MultiheadAttention as oracles, invariants, and bad configs."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from attention import Config, Result, compute
from attention.basics.config import MASKS
from harness.strategies import configs

SETTINGS = settings(max_examples=120, deadline=None)
CLOSE = {"atol": 1e-5, "rtol": 1e-5}


def tensors(result: Result) -> dict[str, torch.Tensor]:
    """Every tensor field of a Result, by name."""
    values = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return {name: v for name, v in values.items() if isinstance(v, torch.Tensor)}


def merge(w: torch.Tensor) -> torch.Tensor:
    """(h, d_in, d_head) per-head matrices -> (d_in, h*d_head), heads side by side."""
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)


# oracles ----------------------------------------------------------------------------------------


@SETTINGS
@given(configs())
def test_weights_and_context_match_sdpa(config: Config) -> None:
    r = compute(config)
    ok = ~r.empty_rows  # SDPA gives NaN where every key is blocked; the package gives zeros
    t_k = r.keys.shape[1]
    eye = torch.eye(t_k).expand(r.heads, t_k, t_k)  # with V = I, SDPA returns the weights themselves
    weights = F.scaled_dot_product_attention(r.queries, r.keys, eye, attn_mask=r.mask, scale=1 / r.scale)
    torch.testing.assert_close(r.weights[:, ok], weights[:, ok], **CLOSE)
    if config.dropout == 0:
        context = F.scaled_dot_product_attention(r.queries, r.keys, r.values, attn_mask=r.mask, scale=1 / r.scale)
        torch.testing.assert_close(r.context[:, ok], context[:, ok], **CLOSE)
    else:
        torch.testing.assert_close(r.context, r.dropped_weights @ r.values, **CLOSE)


@SETTINGS
@given(configs(layouts=("split",), out_proj=True, scales=("sqrt",), dropout=False, d_out=False))
def test_split_layout_with_out_proj_matches_multihead_attention(config: Config) -> None:
    config = config.replace(out_bias=config.bias)  # nn.MultiheadAttention's one bias flag covers both
    r = compute(config)
    d = config.width
    kv_dims = {"kdim": d, "vdim": d} if config.is_cross else {}
    mha = torch.nn.MultiheadAttention(d, config.heads, bias=config.bias, batch_first=True, **kv_dims).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([merge(r.w_query).T, merge(r.w_key).T, merge(r.w_value).T]))
        mha.out_proj.weight.copy_(r.w_out.T)
        if config.bias:
            mha.in_proj_bias.copy_(torch.cat([r.b_query.flatten(), r.b_key.flatten(), r.b_value.flatten()]))
            mha.out_proj.bias.copy_(r.b_out)
        x, y = r.embeddings[None], r.key_embeddings[None]
        # nn.MultiheadAttention's boolean attn_mask is True where attention is BLOCKED: the opposite of ours
        out, weights = mha(x, y, y, attn_mask=~r.mask, need_weights=True, average_attn_weights=False)
    ok = ~r.empty_rows
    torch.testing.assert_close(r.output[ok], out[0][ok], **CLOSE)
    torch.testing.assert_close(r.weights[:, ok], weights[0][:, ok], **CLOSE)


def test_raschka_default_reproduces_the_tutorial_code() -> None:
    """The tutorial's own cells (000), with the global seed they use, inline."""
    with torch.random.fork_rng():
        torch.manual_seed(123)
        sentence = "Life is short, eat dessert first"
        dc = {s: i for i, s in enumerate(sorted(sentence.replace(",", "").split()))}
        sentence_int = torch.tensor([dc[s] for s in sentence.replace(",", "").split()])
        embed = torch.nn.Embedding(6, 16)
        embedded_sentence = embed(sentence_int).detach()
        torch.manual_seed(123)
        d = embedded_sentence.shape[1]
        d_q, d_k, d_v = 24, 24, 28
        W_query = torch.nn.Parameter(torch.rand(d_q, d))
        W_key = torch.nn.Parameter(torch.rand(d_k, d))
        W_value = torch.nn.Parameter(torch.rand(d_v, d))
        x_2 = embedded_sentence[1]
        query_2 = W_query.matmul(x_2)
        keys = W_key.matmul(embedded_sentence.T).T
        values = W_value.matmul(embedded_sentence.T).T
        omega_2 = query_2.matmul(keys.T)
        attention_weights_2 = F.softmax(omega_2 / d_k**0.5, dim=0)
        context_vector_2 = attention_weights_2.matmul(values)
    r = compute(Config())
    assert torch.equal(r.embeddings, embedded_sentence)
    torch.testing.assert_close(r.w_query[0], W_query.detach().T, rtol=0, atol=0)
    torch.testing.assert_close(r.keys[0], keys.detach(), **CLOSE)
    torch.testing.assert_close(r.omega[0, 1], omega_2.detach(), **CLOSE)
    torch.testing.assert_close(r.weights[0, 1], attention_weights_2.detach(), **CLOSE)
    torch.testing.assert_close(r.context[0, 1], context_vector_2.detach(), **CLOSE)


# invariants -------------------------------------------------------------------------------------


@SETTINGS
@given(configs())
def test_invariants(config: Config) -> None:
    r = compute(config)
    h, t_q, t_k = r.heads, len(r.tokens), len(r.key_tokens)
    d_k, d_v = config.head_dims
    assert r.omega.shape == r.weights.shape == r.dropped_weights.shape == (h, t_q, t_k)
    assert r.queries.shape == (h, t_q, d_k) and r.keys.shape == (h, t_k, d_k) and r.values.shape == (h, t_k, d_v)
    assert r.context.shape == (h, t_q, d_v) and r.concat.shape == (t_q, h * d_v)
    assert r.output.shape == (t_q, config.out_width if config.out_proj else h * d_v)
    assert torch.isfinite(r.weights).all() and torch.isfinite(r.output).all()
    # each named intermediate follows from the ones before it
    for out, x, w, b in (
        (r.queries, r.embeddings, r.w_query, r.b_query),
        (r.keys, r.key_embeddings, r.w_key, r.b_key),
        (r.values, r.key_embeddings, r.w_value, r.b_value),
    ):
        torch.testing.assert_close(out, x @ w + (0 if b is None else b[:, None]), **CLOSE)
    assert r.scale == {"sqrt": math.sqrt(d_k), "none": 1.0, "temperature": config.temperature}[config.scale]
    torch.testing.assert_close(r.omega, r.queries @ r.keys.transpose(-2, -1), **CLOSE)
    assert torch.equal(r.scaled, r.omega / r.scale)
    if config.out_proj:
        torch.testing.assert_close(r.output, r.concat @ r.w_out + (0 if r.b_out is None else r.b_out), **CLOSE)
    else:
        assert r.w_out is None and torch.equal(r.output, r.concat)
    empty = ~r.mask.any(dim=-1)
    assert torch.equal(r.empty_rows, empty) and r.has_empty_rows == bool(empty.any())
    # rows sum to 1, except rows with no allowed key, which are exactly 0 and give a zero context
    sums = r.weights.sum(dim=-1)  # (h, T_q)
    torch.testing.assert_close(sums[:, ~empty], torch.ones_like(sums[:, ~empty]), **CLOSE)
    assert (r.weights[:, empty] == 0).all() and (r.context[:, empty] == 0).all()
    # blocked weights are exactly 0, before and after dropout
    assert (r.weights[:, ~r.mask] == 0).all() and (r.dropped_weights[:, ~r.mask] == 0).all()
    # dropout zeroes a weight or scales it by 1/(1-p)
    kept = r.dropped_weights != 0
    scaled = r.weights / (1 - config.dropout)
    torch.testing.assert_close(r.dropped_weights[kept], scaled[kept], **CLOSE)
    # the heads reassemble into the whole, in order
    assert torch.equal(r.concat, r.context.transpose(0, 1).reshape(t_q, h * d_v))
    for i in range(h):
        assert torch.equal(r.concat[:, i * d_v : (i + 1) * d_v], r.context[i])
    if config.dropout == 0:  # a context row is a convex combination of the value rows
        lo, hi = r.values.min(dim=1, keepdim=True).values, r.values.max(dim=1, keepdim=True).values  # (h, 1, d_v)
        assert (r.context[:, ~empty] >= lo - 1e-5).all() and (r.context[:, ~empty] <= hi + 1e-5).all()
    # the same config gives the same numbers, bit for bit
    again = tensors(compute(config))
    for name, t in tensors(r).items():
        assert torch.equal(t, again[name]), name


@pytest.mark.parametrize("kind", MASKS)
def test_every_mask_kind_has_the_query_by_key_shape(kind: str) -> None:
    config = Config(
        sentence="a b c",
        cross_sentence="v w x y z",
        mask=kind,
        padding=2,
        window=2,
        custom_mask=[[True, False, True, False, True]] * 3,
        heads=2,
    )
    r = compute(config)
    assert r.mask.shape == (3, 5) and r.mask.dtype == torch.bool
    assert r.weights.shape == (2, 3, 5)
    expected = {
        "none": torch.ones(3, 5, dtype=torch.bool),
        "causal": torch.ones(3, 5, dtype=torch.bool).tril(),
        "padding": torch.tensor([[True, True, True, False, False]] * 3),
        "window": torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0]], dtype=torch.bool),
        "custom": torch.tensor([[True, False, True, False, True]] * 3),
    }[kind]
    assert torch.equal(r.mask, expected)


def test_a_row_with_every_key_blocked_gives_zeros_and_the_flag() -> None:
    mask = [[True, True, False], [False, False, False], [True, False, True]]
    r = compute(Config(sentence="x y z", mask="custom", custom_mask=mask, heads=2, out_proj=True))
    assert r.has_empty_rows and r.empty_rows.tolist() == [False, True, False]
    assert (r.weights[:, 1] == 0).all() and (r.context[:, 1] == 0).all()
    assert not torch.isnan(r.output).any()
    full = compute(Config(sentence="x y z", mask="padding", padding=3))
    assert full.empty_rows.all() and (full.output == 0).all()


def test_512_tokens_are_accepted() -> None:
    r = compute(Config(sentence="w " * 512, d_k=4, d_v=4))
    assert r.weights.shape == (1, 512, 512)


# bad configs ------------------------------------------------------------------------------------


BAD_CONFIGS = [
    ({"heads": 3, "head_layout": "split"}, "3 does not divide 16"),
    ({"d_model": 12, "d_out": 10, "heads": 4, "head_layout": "split"}, "does not divide 10"),
    ({"sentence": ""}, "sentence is empty"),
    ({"sentence": " , . "}, "sentence is empty"),
    ({"d_k": 0}, "d_k must be between 1"),
    ({"d_v": -1}, "d_v must be between 1"),
    ({"heads": 0}, "heads must be between 1"),
    ({"mask": "custom", "custom_mask": [[True, False], [True, True]]}, "custom_mask is 2x2 but the input needs 6x6"),
    ({"mask": "custom"}, "needs custom_mask"),
    ({"sentence": "w " * 513}, "513 tokens; at most 512"),
    ({"sentence": None, "d_model": None, "embeddings": [[1.0, float("nan")]]}, "NaN or infinite"),
    ({"sentence": None, "d_model": None, "embeddings": [[1.0, 2.0], [3.0]]}, "not rectangular"),
    ({"seed": 2**64}, "seed must be between"),
    ({"seed": -(2**63) - 1}, "seed must be between"),
    ({"dropout": 1.0}, "dropout must be a probability"),
    ({"scale": "temperature", "temperature": 0.0}, "temperature must be a number from 0.001 to 1000"),
    ({"mask": "diagonal"}, "mask must be one of"),
    ({"init": "given"}, "needs w_query"),
    ({"w_query": [[1.0]]}, "init is not 'given'"),
    (
        {"cross_sentence": "a b", "cross_embeddings": [[1.0, 2.0]]},
        "cross sentence has 2 words but its embeddings have 1 row: give one word a row",
    ),
    ({"embeddings": [[1.0, 2.0]], "sentence": None}, "d_model is 16 but the given embeddings are 2 wide"),
]


@pytest.mark.parametrize(("changes", "message"), BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_bad_configs_raise_a_readable_value_error(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("*", r"\*")):
        Config(**changes)


def test_from_embeddings_takes_its_width_and_labels_from_the_matrices() -> None:
    x, y = [[1.0, 0.0, 1.0], [0.0, 2.0, 0.0]], [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [2.0, 0.0, 0.0]]
    config = Config.from_embeddings(x, y, d_k=2, d_v=4, heads=2)
    assert (config.width, config.tokens, config.key_tokens) == (3, ("x1", "x2"), ("y1", "y2", "y3"))
    r = compute(config)
    assert r.omega.shape == (2, 2, 3) and r.context.shape == (2, 2, 4)
    assert torch.equal(r.embeddings, torch.tensor(x)) and torch.equal(r.key_embeddings, torch.tensor(y))
    assert Config.from_embeddings(x, sentence="a b").tokens == ("a", "b")
    with pytest.raises(ValueError, match="d_model is 4 but the given embeddings are 3 wide"):
        Config.from_embeddings(x, d_model=4)


# the global RNG ---------------------------------------------------------------------------------


RNG_CONFIGS = [
    Config(init=init, embedding_init=embedding, dropout=0.5, bias=True, out_proj=True, heads=2, seed=7)
    for init in ("rand", "rand-transposed", "linear", "identity")
    for embedding in ("embedding", "rand", "randn")
] + [
    Config(cross_sentence="one two three", cross_embedding_init=e, embedding_init="rand", dropout=0.3)
    for e in ("embedding", "rand", "randn")
]


def test_compute_leaves_the_global_rng_alone() -> None:
    before = torch.random.get_rng_state()
    for config in RNG_CONFIGS:
        compute(config)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_compute_never_seeds_the_global_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the global RNG was seeded")

    expected = [compute(c).output for c in RNG_CONFIGS]
    for module in (torch, torch.random):
        monkeypatch.setattr(module, "manual_seed", refuse)
        monkeypatch.setattr(module, "seed", refuse)
    with pytest.raises(AssertionError, match="global RNG was seeded"):
        torch.manual_seed(0)  # the patch itself works
    for config, output in zip(RNG_CONFIGS, expected, strict=True):
        assert torch.equal(compute(config).output, output)


@pytest.mark.parametrize(
    ("embeddings", "message"),
    [([[10**400]], "must be a matrix"), ([[1e39]], r"beyond ±1e\+06"), ([[2e6, 0.0]], r"beyond ±1e\+06")],
)
def test_numbers_that_would_overflow_float32_are_refused(embeddings, message):
    with pytest.raises(ValueError, match=message):
        Config(embeddings=embeddings, d_model=None, sentence=None)


def test_the_largest_allowed_inputs_stay_finite():
    big = [[1e6] * 8 for _ in range(4)]
    result = compute(Config(embeddings=big, d_model=None, sentence=None, init="identity", d_k=8, d_v=8))
    assert torch.isfinite(result.omega).all()
    assert torch.isfinite(result.weights).all()
