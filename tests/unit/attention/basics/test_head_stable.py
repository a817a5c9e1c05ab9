"""Stable draws (the dashboard's default): adding heads adds heads, and a wider d_k or d_v adds columns.

Issue 23: Compare A/B's "1 head vs 4" changed head 1's weights only because of the order random numbers were drawn
in. With `draws="stable"` every column of every head's matrix has a generator of its own; the tutorials' order
(`draws="tutorial"`, the package's default) keeps their printed numbers (tests/unit/attention/basics/test_presets.py).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from attention import Config, compute
from attention.basics.config import SETTINGS
from attention.basics.weights import column_seed, input_scale, projections, seeded_projections
from attention.io.script import script
from harness.scripts import assert_reproduces, exec_script
from harness.strategies import configs

DASHBOARD_INITS = SETTINGS["init"].dashboard  # every init the pages offer
DRAWN = tuple(i for i in DASHBOARD_INITS if i != "identity")


def head(config: Config, i: int = 0) -> dict[str, torch.Tensor]:
    """Head i's W_query, W_key, W_value (and biases) as compute() uses them."""
    r = compute(config)
    out = {"w_query": r.w_query[i], "w_key": r.w_key[i], "w_value": r.w_value[i]}
    if r.b_query is not None:
        out.update(b_query=r.b_query[i], b_key=r.b_key[i], b_value=r.b_value[i])
    return out


def test_the_pages_offer_the_inits_tested_here() -> None:
    assert set(DASHBOARD_INITS) == {"normal", "rand-transposed", "rand", "linear", "identity"}
    assert SETTINGS["draws"].start == "stable" and SETTINGS["init"].start == "normal"


@pytest.mark.parametrize("init", DASHBOARD_INITS)
@pytest.mark.parametrize("bias", [False, True])
def test_head_1_is_the_same_at_1_2_4_and_8_heads(init: str, bias: bool) -> None:
    base = Config(init=init, draws="stable", bias=bias)
    first = head(base.replace(heads=1))
    for h in (2, 4, 8):
        got = head(base.replace(heads=h))
        assert got.keys() == first.keys()
        for name, w in first.items():
            torch.testing.assert_close(got[name], w, rtol=0, atol=0, msg=f"{init}: head 1's {name} at {h} heads")


@pytest.mark.parametrize("init", DRAWN)
def test_every_head_keeps_its_weights_when_heads_are_added(init: str) -> None:
    four, eight = (
        compute(Config(init=init, draws="stable", heads=4)),
        compute(Config(init=init, draws="stable", heads=8)),
    )
    assert torch.equal(eight.w_key[:4], four.w_key) and torch.equal(eight.w_value[:4], four.w_value)
    assert not torch.equal(eight.w_key[4], eight.w_key[0])  # the new heads are new draws


@pytest.mark.parametrize("init", DRAWN)
def test_a_wider_d_k_or_d_v_keeps_the_first_columns(init: str) -> None:
    narrow = compute(Config(init=init, draws="stable", heads=2, d_k=8, d_v=4))
    wide = compute(Config(init=init, draws="stable", heads=2, d_k=24, d_v=28))
    assert torch.equal(wide.w_query[:, :, :8], narrow.w_query)
    assert torch.equal(wide.w_key[:, :, :8], narrow.w_key)
    assert torch.equal(wide.w_value[:, :, :4], narrow.w_value)


def test_grouped_query_heads_keep_the_first_key_value_heads() -> None:
    one, two = compute(Config(heads=8, kv_heads=1, init="normal")), compute(Config(heads=8, kv_heads=2, init="normal"))
    assert torch.equal(one.w_key[0], two.w_key[0]) and torch.equal(one.w_query, two.w_query)


def test_the_split_layout_keeps_head_1s_first_columns() -> None:
    """Split: heads cut d_model, so d_k shrinks as heads grow; head 1 keeps the columns it still has."""
    one = compute(Config(init="normal", head_layout="split", heads=1))  # d_k = 16
    four = compute(Config(init="normal", head_layout="split", heads=4))  # d_k = 4
    assert torch.equal(four.w_query[0], one.w_query[0][:, :4])


@pytest.mark.parametrize("init", ["rand", "rand-transposed", "linear"])
def test_the_tutorial_order_is_unchanged_and_redraws(init: str) -> None:
    """draws="tutorial" is the package's default: the old numbers (all heads of W_query first), so W_key moves."""
    config = Config(init=init, heads=4)
    assert config.draws == "tutorial"
    g = torch.Generator().manual_seed(config.seed)
    if init == "linear":
        w = torch.empty(24, 16)
        torch.nn.init.kaiming_uniform_(w, a=5**0.5, generator=g)
        torch.testing.assert_close(projections(config, torch.Generator().manual_seed(123)).w_query[:, :24], w.T)
    else:
        w = torch.rand(4, 24, 16, generator=g) if init == "rand-transposed" else torch.rand(4, 16, 24, generator=g)
        first = w[0].T if init == "rand-transposed" else w[0]
        torch.testing.assert_close(projections(config, torch.Generator().manual_seed(123)).w_query[:, :24], first)
    if init != "linear":  # the linear init's tutorial draws one module (q, k, v) a head: already head by head
        assert not torch.equal(head(config.replace(heads=1))["w_key"], head(config)["w_key"])


def test_column_seeds_are_distinct_and_documented() -> None:
    seeds = {column_seed(123, m, i, j) for m in ("query", "key", "value", "out") for i in range(4) for j in range(8)}
    assert len(seeds) == 4 * 4 * 8
    assert column_seed(123, "query", 0, 0) != column_seed(124, "query", 0, 0)
    assert 0 <= column_seed(2**64 - 1, "key", 63, 4095) < 2**64


def test_the_draws_after_the_weights_do_not_repeat_the_inputs() -> None:
    """Stable draws: random key/value inputs come from their own generator, not a copy of the query inputs'."""
    c = Config(init="normal", embedding_init="rand", cross_sentence="a b c", cross_embedding_init="rand")
    r = compute(c)
    assert not torch.equal(r.key_embeddings[0], r.embeddings[0])
    _, g = seeded_projections(c)
    assert not torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=torch.Generator().manual_seed(123)))


def test_normal_scales_to_unit_variance_scores() -> None:
    """sigma^4 |x|^2 |y|^2 = 1: over many tokens and heads the scaled scores have variance close to 1."""
    words = " ".join(f"w{i}" for i in range(200))
    r = compute(Config(sentence=words, init="normal", heads=8))
    assert 0.8 < float(r.scaled.var()) < 1.25
    x = r.embeddings
    sigma = input_scale(x, x)
    assert abs(sigma**4 * float(x.pow(2).sum(-1).mean()) ** 2 - 1) < 1e-6
    assert input_scale(torch.zeros(2, 3), torch.zeros(2, 3)) == 1.0  # all-zero inputs: no division by zero
    # the same sigma whatever the order of the tokens (the position page's shuffle)
    assert input_scale(x, x) == input_scale(x.flip(0), x.flip(0))


NEW_PATHS = {
    f"{init}, {layout}, bias {bias}, out {out}": Config(
        init=init, draws="stable", heads=2, d_k=3, d_v=2, bias=bias, out_proj=out, seed=7, **kw
    )
    for init in DASHBOARD_INITS
    for layout, kw in (("independent", {}), ("split", {"head_layout": "split", "d_model": 8}))
    for bias, out in ((False, False), (True, True))
}
NEW_PATHS["normal, tutorial order, grouped, cross, dropout, learned"] = Config(
    init="normal", heads=4, kv_heads=2, cross_sentence="a b", cross_embedding_init="rand", dropout=0.3,
    position="learned", out_proj=True,
)  # fmt: skip
NEW_PATHS["rand, stable, cross drawn after, sinusoidal"] = Config(
    init="rand", draws="stable", cross_sentence="x y z", cross_embedding_init="randn", position="sinusoidal"
)


@pytest.mark.parametrize("name", NEW_PATHS)
def test_the_script_reproduces_the_normal_init_and_stable_draws(name: str) -> None:
    assert_reproduces(exec_script(NEW_PATHS[name]), NEW_PATHS[name])


@settings(max_examples=25, deadline=None)
@given(configs(inits=("normal", "rand", "linear", "identity")).map(lambda c: c.replace(draws="stable")))
def test_the_script_reproduces_random_stable_configs(config: Config) -> None:
    assert_reproduces(exec_script(config), config)


def test_the_script_says_why_the_columns_are_drawn_one_at_a_time() -> None:
    text = script(Config(init="normal"))
    assert "def column(" in text and "sigma" in text and "generator=g)" in text
    assert "def column(" not in script(Config())  # the tutorial's order is written as before
