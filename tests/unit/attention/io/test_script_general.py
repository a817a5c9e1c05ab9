"""The plain-PyTorch script (`attention.io.script`, the dashboard's "Code" panel) for the settings beyond the tutorials:
grouped-query heads, keys and values of another width, positions, given biases, score biases, bottom-right causal
masks and per-head widths in the split layout. Each script, run, prints compute()'s numbers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config
from attention.io.script import script
from harness.scripts import assert_reproduces, exec_script
from harness.strategies import configs, matrix

INF = float("inf")
INITS = ("rand", "rand-transposed", "linear", "identity")
SPLIT = {"head_layout": "split", "d_model": 8}

NAMED = {
    **{
        f"grouped-query, {layout}, {init}": Config(
            heads=4, kv_heads=2, init=init, bias=True, out_proj=True, d_k=4, d_v=3, mask="causal", seed=3, **kw
        )
        for init in INITS
        for layout, kw in (("independent", {}), ("split", SPLIT))
    },  # fmt: skip
    "multi-query, given, split": Config.from_embeddings(
        [[1.0, 0.5], [-1.0, 2.0], [0.0, 1.0]],
        heads=2,
        kv_heads=1,
        head_layout="split",
        init="given",
        bias=True,
        w_query=[[1.0, 0.0], [0.5, -1.0]],
        w_key=[[2.0], [1.0]],
        w_value=[[1.0], [-1.0]],
        b_key=[0.5],
        b_query=[0.1, -0.2],
        out_proj=True,
        w_out=[[1.0, 0.0], [0.0, 1.0]],
        out_bias=True,
        b_out=[1.0, -1.0],
    ),  # fmt: skip
    "grouped-query, given, independent": Config.from_embeddings(
        [[1.0, 0.5, 0.0], [-1.0, 2.0, 1.0]],
        heads=4,
        kv_heads=2,
        d_k=1,
        d_v=2,
        init="given",
        bias=True,
        w_query=[[1.0, 0.0, 0.5, -1.0]] * 3,
        w_key=[[2.0, 1.0]] * 3,
        w_value=[[1.0, -1.0, 0.5, 0.25]] * 3,
        b_value=[0.5, 0.25, 0.0, -1.0],
    ),  # fmt: skip
    **{
        f"keys {w} wide, {layout}, {init}": Config.from_embeddings(
            [[0.5 * i - j for j in range(6)] for i in range(4)],
            [[(i + j) % 3 - 1.0 for j in range(w)] for i in range(5)],
            heads=2,
            kv_heads=1 if init == "linear" else None,
            d_k=4,
            d_v=2,
            init=init,
            bias=True,
            out_proj=True,
            seed=8,
            **({"head_layout": "split"} if layout == "split" else {}),
        )
        for w in (3, 8)
        for init in INITS
        for layout in ("independent", "split")
    },  # fmt: skip
    **{
        f"position {kind}, {init}": Config(position=kind, heads=2, d_k=4, init=init, mask="causal", seed=4)
        for kind in ("sinusoidal", "learned", "rope", "alibi")
        for init in ("rand", "identity")
    },  # fmt: skip
    "rope base 500, cross-attention": Config(
        position="rope", rope_base=500.0, cross_sentence="a b c d e f g h", heads=3, d_k=6, seed=2
    ),  # fmt: skip
    "learned, cross-attention drawn after the weights": Config(
        position="learned", cross_sentence="x y z", cross_embedding_init="rand", dropout=0.3, seed=6
    ),
    "sinusoidal, cross-attention": Config(position="sinusoidal", cross_sentence="one two", d_model=7),
    "alibi, 12 heads": Config(position="alibi", heads=12, d_k=2, d_v=2, mask="window", window=3),
    "score bias with -inf and a blocked row": Config(
        sentence="a b c", score_bias=[[0.5, -INF, 1.0], [-INF, -INF, -INF], [0.0, -2.0, -1e30]], mask="causal"
    ),
    "score bias alone": Config(sentence="a b c", score_bias=[[0.5, -INF, 1.0], [0.0, 3.0, -1.0], [2.0, 0.0, -1.0]]),
    "bottom-right causal, T_q < T_k": Config(
        sentence="a b", cross_sentence="p q r s t", mask="causal", causal_align="bottom-right"
    ),  # fmt: skip
    "bottom-right causal, T_q > T_k": Config(
        sentence="a b c d e", cross_sentence="p q", mask="causal", causal_align="bottom-right"
    ),  # fmt: skip
    "bottom-right window": Config(
        sentence="a b c", cross_sentence="p q r s t u", mask="window", window=2, causal_align="bottom-right"
    ),  # fmt: skip
    **{
        f"split with d_k 5, d_v 3, {init}": Config(
            head_layout="split", d_model=6, heads=2, d_k=5, d_v=3, init=init, bias=True, out_proj=True, seed=9
        )
        for init in INITS
    },  # fmt: skip
    "split with d_v alone": Config(head_layout="split", d_model=8, heads=4, d_v=5, init="rand", out_proj=True),
}


@pytest.mark.parametrize("name", list(NAMED))
def test_the_script_reproduces_compute(name: str) -> None:
    assert_reproduces(exec_script(NAMED[name]), NAMED[name])


def test_a_script_of_many_new_settings_runs_standalone() -> None:
    config = Config(sentence="we walk to the old mill", heads=4, kv_heads=2, head_layout="split", d_model=8, d_k=4,
                    position="rope", score_bias=[[0.0] * 5 + [-INF]] * 6, mask="causal", init="linear", bias=True,
                    out_proj=True, seed=11)  # fmt: skip
    p = subprocess.run([sys.executable, "-c", script(config)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert_reproduces(json.loads(p.stdout), config)


def test_given_biases_are_written_not_dropped() -> None:
    config = NAMED["multi-query, given, split"]
    text = script(config)
    assert "b_key = torch.tensor([0.5])" in text and "b_out = torch.tensor([1.0, -1.0])" in text
    assert "+ b_key" in text and "+ b_value" not in text  # a bias not given is zero: nothing to add


def test_each_new_branch_is_written_only_when_used() -> None:
    plain = script(Config(heads=2))
    for word in ("repeat_interleave", "rope", "slopes", "pe =", "score_bias", "d_kv", "h_kv", "diagonal="):
        assert word not in plain
    assert "repeat_interleave" in script(NAMED["grouped-query, independent, rand"])
    assert "def rope(" in script(NAMED["position rope, rand"])
    assert "tril(diagonal=3)" in script(NAMED["bottom-right causal, T_q < T_k"])
    assert "d_k = d_v = d_out // h" in script(Config(head_layout="split", heads=4))
    assert "d_model, h, d_k, d_v = 6, 2, 5, 3" in script(NAMED["split with d_k 5, d_v 3, rand"])


@st.composite
def general_configs(draw: st.DrawFn) -> Config:
    """A random config, then some of the new settings on top of it (each only where it is valid)."""
    config = draw(configs(given_weights=True, dropout=False))
    t_q, t_k = len(config.tokens), len(config.key_tokens)
    changes: dict = {}
    if config.init != "given" and draw(st.booleans()):
        changes["kv_heads"] = draw(st.sampled_from([k for k in (1, 2, 4) if config.heads % k == 0]))
    if config.head_layout == "split" and config.init != "given" and config.d_out is None and draw(st.booleans()):
        changes.update(d_k=draw(st.integers(1, 6)), d_v=draw(st.integers(1, 6)))
    if config.cross_embeddings is not None and config.init != "given" and draw(st.booleans()):
        changes["cross_embeddings"] = draw(matrix(t_k, draw(st.integers(1, 9))))  # keys of another width (kdim)
    same_width = len(changes.get("cross_embeddings", [[0] * config.width])[0]) == config.width
    kinds = ["none", "alibi"] + ["sinusoidal", "learned"] * same_width
    d_k = changes.get("d_k", config.head_dims[0])
    changes["position"] = draw(st.sampled_from(kinds + ["rope"] * (d_k % 2 == 0)))
    if draw(st.booleans()):
        rows = draw(matrix(t_q, t_k))
        blocked = draw(st.lists(st.booleans(), min_size=t_q * t_k, max_size=t_q * t_k))
        changes["score_bias"] = [[-INF if blocked[i * t_k + j] else x for j, x in enumerate(row)]
                                 for i, row in enumerate(rows)]  # fmt: skip
    changes["causal_align"] = draw(st.sampled_from(["top-left", "bottom-right"]))
    return config.replace(**changes)


@settings(max_examples=40, deadline=None)
@given(general_configs())
def test_the_script_reproduces_random_configs_with_the_new_settings(config: Config) -> None:
    assert_reproduces(exec_script(config), config)
