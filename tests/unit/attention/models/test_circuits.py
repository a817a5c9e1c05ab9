"""What a head writes: direct logit attribution (the parts sum to the model's logit; each head's value against
transformers' own hidden states), the OV circuit and copying score (the small matrix against the full one), the
QK split (exact, RoPE's part depends on distance only), and composition (hand-built heads with known scores, the
fast factors against the formula, transformers' weights), on SmolLM2 and the tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from attention.basics import position
from attention.models import circuits, smollm2, tiny
from attention.models.circuits import chat, trained
from harness.fixtures import offline, one_thread  # noqa: F401  (fixtures, one_thread autouse)
from harness.oracles import llama_from_gguf

SHORT = "When Mary and John went to the store, John gave a drink to"


def _close(value: float, expected: float) -> None:
    """The issue's bar: within 1e-4 x max(1, |logit|)."""
    assert abs(value - expected) <= 1e-4 * max(1.0, abs(expected)), (value, expected)


# the math on hand-built tensors --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_parts_sum_to_the_normed_logit_and_a_difference_to_the_difference(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    parts = torch.randn(7, 16, generator=g, dtype=torch.float64) * 3
    gain, u, w = (torch.randn(16, generator=g, dtype=torch.float64) for _ in range(3))
    labels = [circuits.Component("embed", None, None)] + [circuits.Component("head", 0, h) for h in range(6)]
    x = parts.sum(0)
    logit = float(smollm2.rms_norm(x, gain, 1e-5) @ u)  # the forward's own expression
    a = circuits.attribute(labels, parts, u, gain, 1e-5)
    assert a.values.shape == (7,) and a.normed.shape == (7, 16)
    assert float(a.scale) == pytest.approx(math.sqrt(float(x.pow(2).mean()) + 1e-5))
    assert float(a.logit) == pytest.approx(logit, rel=1e-12)
    d = circuits.attribute(labels, parts, u - w, gain, 1e-5)
    assert float(d.logit) == pytest.approx(logit - float(smollm2.rms_norm(x, gain, 1e-5) @ w), rel=1e-12)
    grid = circuits.by_head(a, 1, 6)
    assert grid.shape == (1, 6) and float(grid[0, 2]) == pytest.approx(float(a.values[3]))
    with pytest.raises(ValueError, match="labels"):
        circuits.attribute(labels[:3], parts, u)


def test_the_copying_score_from_the_small_matrix_equals_the_full_circuits() -> None:
    g = torch.Generator().manual_seed(3)
    v, d, dh = 13, 6, 3
    w_e, w_u = torch.randn(v, d, generator=g), torch.randn(d, v, generator=g)
    w_v, w_o = torch.randn(d, dh, generator=g), torch.randn(dh, d, generator=g)
    c = circuits.copying_score(w_v, w_o, w_u @ w_e)
    assert c.small.shape == (dh, dh) and c.eigenvalues.shape == (dh,)
    assert float(c.score) == pytest.approx(float(circuits.copying_score_full(w_e, w_v, w_o, w_u)), abs=1e-5)
    full = torch.linalg.eigvals(w_e.double() @ w_v.double() @ w_o.double() @ w_u.double())
    nonzero = full[full.abs() > 1e-9]
    assert sorted(nonzero.abs().tolist()) == pytest.approx(sorted(c.eigenvalues.abs().tolist()), rel=1e-4)


def test_a_head_that_copies_scores_one_and_one_that_suppresses_minus_one() -> None:
    g = torch.Generator().manual_seed(4)
    w_e = torch.randn(9, 4, generator=g)
    w_u = w_e.T  # tied: W_U W_E = E^T E is positive definite
    w_v, w_o = torch.eye(4)[:, :2], torch.eye(4)[:2]  # W_V W_O projects on two coordinates
    assert float(circuits.copying_score(w_v, w_o, w_u @ w_e).score) == pytest.approx(1.0, abs=1e-6)
    assert float(circuits.copying_score(w_v, -w_o, w_u @ w_e).score) == pytest.approx(-1.0, abs=1e-6)
    ov = circuits.ov_tokens(w_e[[5]] * 10, torch.tensor([5]), w_v, w_o, lambda x: x @ w_u, k=3)
    torch.testing.assert_close(ov.logits, (w_e[[5]] * 10) @ w_v @ w_o @ w_u)
    assert ov.top_values.shape == (1, 3) and int(ov.self_rank[0]) == int((ov.logits[0] > ov.logits[0, 5]).sum())


@pytest.mark.parametrize(("i", "j"), [(5, 2), (9, 9), (12, 0)])
def test_the_qk_split_is_exact_and_its_rotation_depends_on_the_distance_only(i: int, j: int) -> None:
    g = torch.Generator().manual_seed(i * 31 + j)
    q, parts = torch.randn(8, generator=g), torch.randn(3, 8, generator=g)
    s = circuits.qk_split(("a", "b", "c"), q, parts, i, j, 100.0)
    angles = lambda p: position.rope_angles(torch.tensor([p]), 8, 100.0)  # noqa: E731
    rq, rk = position.apply_rope(q[None], angles(i))[0], position.apply_rope(parts.sum(0)[None], angles(j))[0]
    assert float(s.score) == pytest.approx(float(rq @ rk) / math.sqrt(8), abs=1e-5)
    torch.testing.assert_close(s.content + s.rotation, s.parts)
    torch.testing.assert_close(s.content, parts @ q / math.sqrt(8))
    moved = circuits.qk_split(("a", "b", "c"), q, parts, i + 7, j + 7, 100.0)
    torch.testing.assert_close(moved.parts, s.parts, atol=1e-4, rtol=0)
    if i == j:
        assert torch.allclose(s.rotation, torch.zeros(3), atol=1e-5)  # same position: no turn between them
    plain = circuits.qk_split(("a", "b", "c"), q, parts)
    assert torch.equal(plain.rotation, torch.zeros(3))


def _model(layers: int, heads: int, kv: int, d: int, dh: int, seed: int) -> list[circuits.HeadMatrices]:
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return [circuits.HeadMatrices(r(heads, d, dh), r(kv, d, dh), r(kv, d, dh), r(heads, dh, d)) for _ in range(layers)]


def test_composition_equals_the_formula_pair_by_pair_with_grouped_query_heads() -> None:
    layers = _model(3, 4, 2, 12, 3, seed=5)
    c = circuits.composition(iter(layers))  # lazy, one pass
    n = 12
    assert c.q.shape == c.k.shape == c.v.shape == (n, n) and c.heads[5] == (1, 1)
    assert torch.equal(c.later, torch.arange(n)[None] // 4 > torch.arange(n)[:, None] // 4)
    for kind in "qkv":
        m = getattr(c, kind)
        assert bool((m[~c.later] == 0).all()) and bool((m[c.later] > 0).all()) and float(m.max()) <= 1
    for i, j in [(0, 4), (3, 11), (5, 9), (1, 7)]:
        (li, hi), (lj, hj) = c.heads[i], c.heads[j]
        want = circuits.reference(layers[li], hi, layers[lj], hj)
        for kind in "qkv":
            assert float(getattr(c, kind)[i, j]) == pytest.approx(want[kind], rel=1e-4)


def test_an_identity_ov_into_a_qk_gives_the_known_score_and_orthogonal_spaces_zero() -> None:
    e = torch.eye(6)
    p01, p45 = e[:, :2], e[:, 4:]  # (6, 2): the first two coordinates, the last two
    # layer 0 (one K/V head for two query heads): both read 0, 1; head 0 writes there (W_OV = P01), head 1 to 4, 5
    first = circuits.HeadMatrices(torch.stack([p01, p01]), p01[None], p01[None], torch.stack([p01.T, p45.T]))
    # layer 1: head 0's query reads 0, 1 (W_QK = P01); head 1's query reads 4, 5 but its key reads 0, 1
    second = circuits.HeadMatrices(torch.stack([p01, p45]), p01[None], p01[None], torch.stack([p01.T, p01.T]))
    c = circuits.composition([first, second])
    half = 1 / math.sqrt(2)  # ||P P|| / (||P|| ||P||) = sqrt(2) / (sqrt(2) sqrt(2)) for a rank-2 projection P
    assert float(c.q[0, 2]) == pytest.approx(half) and float(c.k[0, 2]) == pytest.approx(half)
    assert float(c.v[0, 2]) == pytest.approx(half)
    assert float(c.q[0, 3]) == pytest.approx(0.0, abs=1e-7) and float(c.k[0, 3]) == pytest.approx(half)
    # head 1 of layer 0 writes W_V W_O = P01-to-45 (reads 0, 1, writes 4, 5): into head 1's query (reads 4, 5)
    assert float(c.q[1, 3]) == pytest.approx(half) and float(c.q[1, 2]) == pytest.approx(0.0, abs=1e-7)
    assert float(c.v[1, 2]) == pytest.approx(0.0, abs=1e-7)  # layer 1's values read 0, 1 only


# SmolLM2 --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> smollm2.Model:
    return smollm2.load()


@pytest.fixture(scope="module")
def traced(model: smollm2.Model) -> tuple[smollm2.Prompt, chat.Trace]:
    p = smollm2.prompt(model, SHORT, smollm2.PAGE_TOKENS)
    return p, chat.trace(model, p.ids)


def test_smollm2s_parts_sum_to_its_own_logit_and_two_tokens_to_their_difference(model, traced) -> None:
    p, t = traced
    run = smollm2.run_ids(model, p.ids, keep=False)
    mary, john = smollm2.encode(model, " Mary")[0][0], smollm2.encode(model, " John")[0][0]
    a = chat.attribution(model, t, mary)
    assert len(a.components) == 1 + 30 * 10 and a.components[1] == circuits.Component("head", 0, 0)
    assert [c.kind for c in a.components].count("head") == 270
    _close(float(a.values.sum()), float(run.logits[0, mary]))
    _close(float(a.logit), float(t.logits[mary]))
    torch.testing.assert_close(a.parts.sum(0), t.hidden[-1, -1], atol=1e-3, rtol=1e-5)
    d = chat.attribution(model, t, mary, john)
    _close(float(d.logit), float(run.logits[0, mary] - run.logits[0, john]))
    assert float(d.logit) > 0  # the model prefers " Mary"


def test_switching_off_the_top_head_moves_the_logit_the_way_its_attribution_says(model: smollm2.Model) -> None:
    ids = smollm2.induction_ids(model, length=8)
    t = chat.trace(model, ids)
    target = int(t.logits.argmax())
    a = chat.attribution(model, t, target)
    grid = circuits.by_head(a, 30, 9)
    index = int(grid.abs().argmax())
    layer, head = divmod(index, 9)
    off = smollm2.run_ids(model, ids, keep=False, ablate=[(layer, head)])
    moved = float(off.logits[0, target] - t.logits[target])
    assert moved * float(grid[layer, head]) < 0  # a head that added to the logit takes it away when switched off


def test_a_heads_ov_rows_and_copying_score_come_from_its_own_weights(model: smollm2.Model) -> None:
    w = smollm2.head_weights(model, 3, 4)
    ov = chat.head_ov_tokens(model, 3, 4, [100, 2000], k=5)
    e = model.embeddings.dequantize(torch.tensor([100, 2000])) * model.layers[3].attn_norm
    row = (e @ w.w_value @ w.w_out * model.out_norm) @ model.embeddings.dequantize(slice(0, 4096)).T
    torch.testing.assert_close(ov.logits[:, :4096], row, atol=1e-4, rtol=1e-4)
    assert ov.top_ids.shape == (2, 5) and bool((ov.top_values[:, :1] >= ov.logits).all())
    c = chat.head_copying(model, 3, 4)
    assert c.small.shape == (64, 64) and -1 <= float(c.score) <= 1
    small = w.w_out @ chat.unembed_embed(model, 3) @ w.w_value
    assert float(c.score) == pytest.approx(float(torch.trace(small.double()) / torch.linalg.eigvals(small.double())
                                                 .abs().sum()), abs=1e-5)  # fmt: skip


def test_the_qk_split_of_a_real_score_sums_to_the_models_own_score(model, traced) -> None:
    p, t = traced
    run = smollm2.run_ids(model, p.ids)
    last = len(p.ids) - 1
    for layer, head, key in [(0, 0, 3), (18, 4, 0), (5, 8, last)]:
        s = chat.qk(model, t, layer, head, last, key)
        kv = head // model.group
        want = float(run.queries[layer, head, last] @ run.keys[layer, kv, key]) / 8.0
        assert float(s.score) == pytest.approx(want, abs=1e-4)
        assert s.names == ("key's token", "earlier layers at the key")
    with pytest.raises(ValueError, match="sees keys"):
        chat.qk(model, t, 0, 0, 2, 3)


@pytest.mark.thorough  # the oracle group: transformers' model
def test_each_heads_value_equals_the_same_from_transformers_hidden_states(model, traced, offline) -> None:
    hf, _ = llama_from_gguf(model.path)
    p, t = traced
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        layer.self_attn.o_proj.register_forward_pre_hook(
            lambda mod, args, i=i: seen.__setitem__(f"o{i}", args[0][0, -1])
        )
        for i, layer in enumerate(hf.model.layers)
    ]
    hooks.append(hf.model.norm.register_forward_pre_hook(lambda mod, args: seen.__setitem__("x", args[0][0, -1])))
    with torch.no_grad():
        out = hf(torch.tensor([p.ids]))
    for h in hooks:
        h.remove()
    target = int(out.logits[0, -1].argmax())
    a = chat.attribution(model, t, target)
    x, gain, eps = seen["x"], hf.model.norm.weight, hf.config.rms_norm_eps
    s = torch.sqrt(x.pow(2).mean() + eps)
    u = (hf.lm_head.weight[target] * gain).detach()
    grid = circuits.by_head(a, 30, 9)
    for layer in (0, 11, 29):
        o = hf.model.layers[layer].self_attn.o_proj.weight.detach()  # (d_model, h*d_head)
        for head in range(9):
            cols = slice(head * 64, (head + 1) * 64)
            want = float((seen[f"o{layer}"][cols] @ o[:, cols].T) / s @ u)
            assert float(grid[layer, head]) == pytest.approx(want, abs=1e-4)
    _close(float(a.logit), float(out.logits[0, -1, target]))


@pytest.mark.thorough  # the oracle group: transformers' dequantized weights
def test_composition_equals_the_formula_on_transformers_weights(model: smollm2.Model, offline) -> None:
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(model.path.parent, gguf_file=model.path.name)
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(config)
    sd = load_gguf_checkpoint(str(model.path), return_tensors=True, model_to_load=skeleton)["tensors"]

    def hf_layer(i: int) -> circuits.HeadMatrices:
        w = lambda n: sd[f"model.layers.{i}.self_attn.{n}_proj.weight"].T.float()  # noqa: E731
        return circuits.split_heads(w("q"), w("k"), w("v"), w("o"), 9, 3)

    ours = circuits.composition(chat._matrices(model, i) for i in range(3))
    theirs = [hf_layer(i) for i in range(3)]
    for i, j in [(0, 9), (4, 26), (13, 22), (8, 18)]:
        (li, hi), (lj, hj) = ours.heads[i], ours.heads[j]
        want = circuits.reference(theirs[li], hi, theirs[lj], hj)
        for kind in "qkv":
            assert float(getattr(ours, kind)[i, j]) == pytest.approx(want[kind], rel=1e-4, abs=1e-6)


# the tiny model -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run() -> tiny.Run:
    return tiny.train(tiny.Settings(task="induction", layers=2, heads=2, d_model=16, steps=60, every=20, seed=1))


def test_the_tiny_models_parts_sum_to_its_logit_and_its_score_splits_exactly(small_run: tiny.Run) -> None:
    s, w = small_run.settings, small_run.snapshots[-1].weights
    ids = tiny.probe(s).ids[0]
    t = trained.trace(w, ids, s.heads)
    assert t.heads.shape == (2, 2, len(ids), 16)
    a = trained.attribution(w, t, 3, at=5)
    assert [c.kind for c in a.components[:3]] == ["embed", "position", "head"] and float(a.scale) == 1.0
    _close(float(a.logit), float(t.logits[5, 3]))
    _close(float(trained.attribution(w, t, 3, 4).logit), float(t.logits[-1, 3] - t.logits[-1, 4]))
    cfg = tiny.layer_result(small_run.snapshots[-1], s, 1, ids)
    split = trained.qk(w, t, 1, 1, 9, 4)
    assert split.names[:2] == ("key's token", "key's position") and len(split.names) == 4
    assert float(split.score) == pytest.approx(float(cfg.omega[1, 9, 4]) / math.sqrt(s.d_head), abs=1e-4)
    assert torch.equal(split.rotation, torch.zeros(4))


def test_the_tiny_models_copying_scores_and_composition_over_training(small_run: tiny.Run) -> None:
    s = small_run.settings
    w = small_run.snapshots[-1].weights
    scores = trained.copying_scores(w, s.heads)
    assert scores.shape == (2, 2) and bool((scores.abs() <= 1).all())
    m = trained._matrices(w, 1, 2)
    gram = w.unembed @ w.token
    assert float(scores[1, 0]) == pytest.approx(float(circuits.copying_score_full(w.token, m.w_value[0], m.w_out[0],
                                                                          w.unembed)), abs=1e-4)  # fmt: skip
    ov = trained.head_ov_tokens(w, s.heads, 0, 1, [1, 2], k=3)
    m0 = trained._matrices(w, 0, 2)
    torch.testing.assert_close(ov.logits, w.token[[1, 2]] @ m0.w_value[1] @ m0.w_out[1] @ w.unembed)
    assert gram.shape == (16, 16) and ov.top_ids.shape == (2, 3)
    g = trained.growth(small_run)
    assert g is not None and g.steps == tuple(x.step for x in small_run.snapshots) and g.writer[0] == 0
    assert g.reader[0] == 1 and g.k.shape == (len(g.steps),) and bool(((g.k > 0) & (g.k <= 1)).all())
    last = trained.head_composition(w, s.heads)
    i, j = g.writer[1], 2 + g.reader[1]
    assert float(g.k[-1]) == pytest.approx(float(last.k[i, j])) and float(g.q[-1]) == pytest.approx(float(last.q[i, j]))
    one = tiny.Run(tiny.Settings(task="induction", layers=1, steps=20, every=10), small_run.snapshots[:1])
    assert trained.growth(one) is None


# the command line -----------------------------------------------------------------------------------------


def test_the_attribution_json_keeps_the_contract_and_its_parts_sum_to_the_logit(model, traced, capsys) -> None:
    import json

    from attention.io.cli.main import main

    p, t = traced
    assert main(["--model", "smollm2", "--attribution", "--sentence", SHORT, "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    top = int(t.logits.argmax())
    assert got["target"] == {"id": top, "token": smollm2.labels(model, [top])[0]} and set(got) == {"target", "logit",
                                                                                              "components"}  # fmt: skip
    assert [c["kind"] for c in got["components"]].count("head") == 270 and len(got["components"]) == 301
    assert set(got["components"][0]) == {"kind", "layer", "head", "value"}
    _close(sum(c["value"] for c in got["components"]), got["logit"])
    _close(got["logit"], float(t.logits[top]))
    assert main(["--model", "smollm2", "--attribution", "--sentence", SHORT, "--target", " John"]) == 0
    assert "logit[' John']" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--attribution", "--target", "Riverbank"], "not one token"),
        (["--attribution", "--target", ""], "not one token"),
        (["--composition", "--generate", "2"], "choose one"),
        (["--target", " Mary"], "go with --attribution"),
        (["--attribution", "--format", "script"], "not a script"),
    ],
)
def test_a_bad_circuit_request_is_one_line_with_status_two(argv, says, capsys) -> None:
    from attention.io.cli.main import main

    assert main(["--model", "smollm2", "--sentence", "The river", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


@pytest.mark.thorough  # all 270 heads: seconds of matrix products
def test_the_composition_json_has_every_head_once_and_nulls_where_no_later_layer(model, capsys) -> None:
    import json

    from attention.io.cli.main import main

    assert main(["--model", "smollm2", "--composition", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["heads"][:2] == [[0, 0], [0, 1]] and len(got["heads"]) == 270 == len(set(map(tuple, got["heads"])))
    for kind in "qkv":
        m = got[kind]
        assert len(m) == 270 and all(len(r) == 270 for r in m)
        assert m[0][8] is None and m[9][0] is None and 0 < m[0][9] <= 1
    layers = [chat._matrices(model, i) for i in (0, 29)]
    want = circuits.reference(layers[0], 4, layers[1], 7)
    for kind in "qkv":
        assert got[kind][4][29 * 9 + 7] == pytest.approx(want[kind], rel=1e-4)


def test_the_attribution_to_each_next_token_equals_the_last_positions_of_its_prefixes(model, traced) -> None:
    p, _ = traced
    values = chat.next_token_attribution(model, p.ids)
    assert values.shape == (30, 9, len(p.ids) - 1)
    for t in (2, 7):
        prefix = chat.trace(model, p.ids[: t + 1])
        want = circuits.by_head(chat.attribution(model, prefix, p.ids[t + 1]), 30, 9)
        torch.testing.assert_close(values[:, :, t], want, atol=1e-4, rtol=1e-4)
    scores = chat.copying_scores(model)
    assert scores.shape == (30, 9) and float(scores[3, 4]) == pytest.approx(float(chat.head_copying(model, 3, 4).score))


@pytest.mark.thorough  # all 270 heads from the weights: tens of seconds of matrix products
def test_the_shipped_composition_equals_the_one_computed_from_the_weights(model: smollm2.Model, tmp_path) -> None:
    shipped = chat._shipped(model, chat.SHIPPED)
    assert shipped is not None, "run chat.save_composition(smollm2.load()) to ship the numbers"
    computed = chat.compute_composition(model)
    for kind in ("q", "k", "v", "later", "ov_norms", "qk_norms"):
        torch.testing.assert_close(getattr(shipped, kind), getattr(computed, kind), atol=1e-6, rtol=1e-5)
    assert shipped.heads == computed.heads
    other = tmp_path / "other.pt"
    torch.save({**torch.load(chat.SHIPPED, weights_only=True), "sha256": "0" * 64}, other)
    assert chat._shipped(model, other) is None and chat._shipped(model, tmp_path / "missing.pt") is None
