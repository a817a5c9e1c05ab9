"""The head atlas's scores (attention.lessons.atlas): on hand-made matrices with known answers, within their ranges,
and on both real models equal to the issue's definitions written out as loops over transformers' eager attentions;
the repeated-token probe finds the chat page's induction head; the corpus ships and fits the models."""

from __future__ import annotations

import math

import pytest
import torch

from attention.lessons import atlas
from attention.models import interpret
from harness.fixtures import offline, one_thread  # noqa: F401  (fixtures, one_thread autouse)
from harness.oracles import llama_from_gguf

IDS = [7, 8, 9, 7, 8, 9]  # three tokens, then the same three: queries 3, 4, 5 have an earlier copy


def one_hot(t: int, key, causal: bool = True) -> torch.Tensor:
    """(T, T): row i all on key(i) (None: spread evenly over the keys it may attend)."""
    w = torch.zeros(t, t)
    for i in range(t):
        j = key(i)
        if j is None:
            n = i + 1 if causal else t
            w[i, :n] = 1.0 / n
        else:
            w[i, j] = 1.0
    return w


def scores_of(*matrices: torch.Tensor, ids=IDS, **kw) -> dict[str, list[float]]:
    """Each score of each matrix, the matrices taken as one layer's heads."""
    out = atlas.head_scores(torch.stack(matrices)[None], ids, **kw)
    return {k: v[0].tolist() for k, v in out.items()}


# hand-made matrices ----------------------------------------------------------------------------------------


def test_each_score_on_matrices_built_to_have_it() -> None:
    previous = one_hot(6, lambda i: max(i - 1, 0))
    induction = one_hot(6, lambda i: i - 2 if i >= 3 else 0)  # query i reads the token after its copy at i - 3
    duplicate = one_hot(6, lambda i: i - 3 if i >= 3 else 0)  # query i reads its earlier copy
    uniform = one_hot(6, lambda i: None)
    s = scores_of(previous, induction, duplicate, uniform, causal=True)
    assert s["previous_token"] == pytest.approx([1.0, 1 / 5, 1 / 5, sum(1 / (i + 1) for i in range(1, 6)) / 5])
    assert s["first_token"] == pytest.approx([1 / 5, 2 / 5, 3 / 5, sum(1 / (i + 1) for i in range(1, 6)) / 5])
    assert s["induction"] == pytest.approx([0.0, 1.0, 0.0, (1 / 4 + 1 / 5 + 1 / 6) / 3])
    assert s["duplicate_token"] == pytest.approx([0.0, 0.0, 1.0, (1 / 4 + 1 / 5 + 1 / 6) / 3])
    assert s["entropy"] == pytest.approx([0.0, 0.0, 0.0, 1.0])  # one key: 0; even over the keys it may read: 1
    assert s["mean_distance"] == pytest.approx([5 / 6, (0 + 1 + 2 + 2 + 2 + 2) / 6, (0 + 1 + 2 + 3 + 3 + 3) / 6,
                                                sum(i / 2 for i in range(6)) / 6])  # fmt: skip
    assert "special" not in s and "punctuation" not in s  # a decoder's


def test_induction_needs_the_copy_before_the_previous_token() -> None:
    # "a a": query 1's earlier copy is key 0, and the token after it is the query itself (j + 1 = i): not counted
    s = scores_of(one_hot(2, lambda i: i), ids=[5, 5], causal=True)
    assert math.isnan(s["induction"][0]) and s["duplicate_token"] == [0.0]
    duplicate, induction = atlas.repeat_targets([3, 4, 3, 4])
    assert duplicate.nonzero().tolist() == [[2, 0], [3, 1]]
    assert induction.nonzero().tolist() == [[2, 1], [3, 2]]


def test_encoder_scores_special_and_punctuation_and_entropy_over_every_key() -> None:
    uniform = torch.full((5, 5), 0.2)
    on_sep = one_hot(5, lambda i: 4, causal=False)
    on_cls = one_hot(5, lambda i: 0, causal=False)
    s = scores_of(uniform, on_sep, on_cls, ids=[101, 7, 1012, 8, 102], causal=False, special=(0, 4), sep=(4,),
                  punctuation=[2])  # fmt: skip
    assert s["special"] == pytest.approx([0.4, 1.0, 1.0])
    assert s["sep"] == pytest.approx([0.2, 1.0, 0.0])  # [SEP] alone: the head parked on [CLS] is not one
    assert s["punctuation"] == pytest.approx([0.2, 0.0, 0.0])
    assert s["entropy"] == pytest.approx([1.0, 0.0, 0.0])  # every row may read all 5 keys
    assert s["mean_distance"] == pytest.approx([sum(abs(i - j) for i in range(5) for j in range(5)) / 25,
                                                (4 + 3 + 2 + 1 + 0) / 5, (0 + 1 + 2 + 3 + 4) / 5])  # fmt: skip
    none = scores_of(uniform, ids=[101, 7, 8, 9, 102], causal=False, special=(0, 4), punctuation=[])
    assert math.isnan(none["punctuation"][0])  # no punctuation mark: left out, not 0
    assert atlas.is_punctuation(",") and atlas.is_punctuation("##.") and not atlas.is_punctuation("[SEP]")
    assert not atlas.is_punctuation("it's")


def test_leaving_the_first_token_out_renormalises_what_is_left() -> None:
    t = 6
    w = torch.zeros(t, t)  # every query parks 0.8 on token 0 and reads its previous token with the rest
    w[0, 0] = 1.0
    w[1, 0] = 1.0
    for i in range(2, t):
        w[i, 0], w[i, i - 1] = 0.8, 0.2
    kept = scores_of(w, causal=True)
    dropped = scores_of(w, causal=True, drop_first=True)
    assert kept["previous_token"] == pytest.approx([(1.0 + 4 * 0.2) / 5])
    assert dropped["previous_token"] == pytest.approx([1.0])  # of what is not parked, all on the previous token
    assert dropped["first_token"] == kept["first_token"] == pytest.approx([(1.0 + 4 * 0.8) / 5])
    rest = atlas.renormalised_without_first(w[None])[0]
    torch.testing.assert_close(rest.sum(dim=-1)[1:], torch.ones(t - 2))  # row 1 had nothing left: stays 0


def test_scores_pool_over_texts_as_sums_and_counts() -> None:
    a = atlas.tallies(one_hot(6, lambda i: i - 2 if i >= 3 else 0)[None, None], IDS, causal=True)
    b = atlas.tallies(one_hot(4, lambda i: 0)[None, None], [1, 2, 3, 4], causal=True)  # no repeat: counts 0 queries
    pooled = (a + b).scores()
    assert float(pooled["induction"]) == pytest.approx(1.0)  # b adds no query to average over
    assert float(pooled["first_token"]) == pytest.approx((2 + 3) / (5 + 3))
    assert (a + b).texts == 2 and (a + b).tokens == 10


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_lie_in_their_ranges(causal: bool, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    t = 12
    omega = torch.randn(3, 4, t, t, generator=g) * 3
    if causal:
        omega = omega.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    w = omega.softmax(dim=-1)
    ids = torch.randint(0, 5, (t,), generator=g).tolist()
    for drop in (False, True):
        s = atlas.head_scores(
            w, ids, causal=causal, special=(0, t - 1), sep=(t - 1,), punctuation=[3, 5], drop_first=drop
        )
        for k, v in s.items():
            hi = t - 1 if k == "mean_distance" else 1.0
            assert v.shape == (3, 4)
            assert bool(((v >= -1e-6) & (v <= hi + 1e-6)).all()), k


# the real models against transformers ----------------------------------------------------------------------


def reference(
    a: list[list[float]], ids: list[int], causal: bool, special=(), punctuation=None, drop=False, sep=()
) -> dict:
    """The issue's definitions, written out as loops over one head's matrix (lists of floats)."""
    t = len(ids)
    out = {"first_token": sum(a[i][0] for i in range(1, t)) / (t - 1)}
    if drop:
        a = [[a[i][j] / sum(a[i][1:]) for j in range(1, t)] for i in range(1, t)]
        ids, t = ids[1:], t - 1
        special, sep = [j - 1 for j in special if j > 0], [j - 1 for j in sep if j > 0]
        punctuation = None if punctuation is None else [j - 1 for j in punctuation if j > 0]
    out["previous_token"] = sum(a[i][i - 1] for i in range(1, t)) / (t - 1)
    dup, ind, ent = [], [], []
    for i in range(t):
        copies = [j for j in range(i) if ids[j] == ids[i]]
        if copies:
            dup.append(sum(a[i][j] for j in copies))
        after = [j + 1 for j in copies if j + 1 < i]
        if after:
            ind.append(sum(a[i][k] for k in after))
        n = i + 1 if causal else t
        if n > 1:
            ent.append(-sum(p * math.log(p) for p in a[i][:n] if p > 0) / math.log(n))
    out["duplicate_token"] = sum(dup) / len(dup) if dup else math.nan
    out["induction"] = sum(ind) / len(ind) if ind else math.nan
    out["entropy"] = sum(ent) / len(ent)
    out["mean_distance"] = sum(a[i][j] * abs(i - j) for i in range(t) for j in range(t)) / t
    if not causal:
        out["special"] = sum(a[i][j] for i in range(t) for j in special) / t
        out["sep"] = sum(a[i][j] for i in range(t) for j in sep) / t if sep else math.nan
    if punctuation:
        out["punctuation"] = sum(a[i][j] for i in range(t) for j in punctuation) / t
    return out


def assert_scores_equal_reference(
    scored: atlas.Atlas, attentions, ids, causal, special=(), punctuation=None, sep=()
) -> None:
    for layer, w in enumerate(attentions):
        for head in range(w.shape[1]):
            a = w[0, head].double().tolist()
            want = reference(a, list(ids), causal, special, punctuation, scored.drop_first, sep)
            for k, v in want.items():
                got = float(scored.scores[k][layer, head])
                assert got == pytest.approx(v, abs=1e-4, nan_ok=True), (k, layer, head, got, v)


MINILM_TEXTS = ("The cat sat on the mat, and the cat slept.", "x = f(x); y = f(y)")
SMOLLM2_TEXTS = ("When Mary and John went to the store, John gave a drink to Mary.", "a b c d a b c d")


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("text", MINILM_TEXTS)
def test_minilm_scores_equal_the_definitions_on_bertmodels_eager_attentions(offline, text: str, drop: bool) -> None:
    from transformers import BertModel

    from attention.models import minilm

    bert = BertModel.from_pretrained(minilm.model_path(), attn_implementation="eager").float().eval()
    r = atlas.runner("minilm")
    t = r.encode(text)
    with torch.no_grad():
        attentions = bert(torch.tensor([t.ids]), output_attentions=True).attentions  # L x (1, h, T, T)
    scored = atlas.model_atlas("minilm", "text", text, drop)
    punctuation = [j for j, tok in enumerate(t.tokens) if atlas.is_punctuation(tok)]
    assert punctuation  # the texts were chosen with some
    assert t.sep == (len(t.ids) - 1,) and t.tokens[-1] == "[SEP]"
    assert_scores_equal_reference(scored, attentions, t.ids, False, t.special, punctuation, t.sep)


@pytest.fixture(scope="module")
def llama(offline):
    from attention.models import smollm2

    return llama_from_gguf(smollm2.load().path)[0]


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("text", SMOLLM2_TEXTS)
def test_smollm2_scores_equal_the_definitions_on_llamas_eager_attentions(llama, text: str, drop: bool) -> None:
    t = atlas.runner("smollm2").encode(text)
    with torch.no_grad():
        attentions = llama(torch.tensor([t.ids]), output_attentions=True).attentions  # L x (1, h, T, T)
    scored = atlas.model_atlas("smollm2", "text", text, drop)
    assert_scores_equal_reference(scored, attentions, t.ids, True)


def test_the_repeated_token_probe_ranks_the_chat_pages_induction_head_first() -> None:
    from attention.models import smollm2

    model = smollm2.load()
    ids = smollm2.induction_ids(model)  # the chat page's induction preset: the head it calls its induction head
    chat = divmod(int(interpret.induction(smollm2.run_ids(model, ids).weights, ids).argmax()), model.heads)
    scored = atlas.model_atlas("smollm2", "repeated")
    assert scored.texts == len(atlas.REPEAT_SEEDS) > 1  # more probes than the page's one
    (layer, head, score), runner_up = atlas.ranked(scored.scores["induction"], 2)
    assert (layer, head) == chat
    assert score > 0.5 and score > runner_up[2]
    assert atlas.top_sentences(scored)[3].startswith(f"{atlas.head_name(layer, head)} is the strongest induction head")


# the corpus ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(atlas.MODELS))
def test_the_corpus_ships_varied_texts_each_read_whole_by_both_models(model: str) -> None:
    kinds = {kind for kind, _ in atlas.corpus()}
    assert {"sentence", "code", "list", "dialogue"} <= kinds
    r = atlas.runner(model)
    for _, text in atlas.corpus():
        t = r.encode(text)
        assert len(t.ids) <= atlas.MAX_TOKENS and not t.truncated


def test_a_long_text_is_cut_at_the_atlas_length_keeping_sep() -> None:
    t = atlas.runner("minilm").encode("word " * 200)
    assert len(t.ids) == atlas.MAX_TOKENS and t.truncated and t.tokens[-1] == "[SEP]" and t.special == (0, 63)
    assert t.sep == (63,)
    assert atlas.runner("smollm2").encode("word " * 200).truncated


def test_findings_follow_the_scores() -> None:
    base = {k: torch.zeros(4, 2) for k in atlas.SCORES}
    base["first_token"][2:] = 0.9  # layers 2 and 3 park on the first token
    base["previous_token"][0, 1] = 0.8
    scored = atlas.Atlas("smollm2", "corpus", False, base, {k: 10 for k in atlas.SCORES}, 3, 30, 1)
    said = " ".join(atlas.findings(scored))
    assert "from layer 2 on" in said
    assert "1 of 8 heads score 0.5 or more as previous-token heads: layer 0" in said
    assert "No head scores 0.3 or more as an induction head" in said
    assert atlas.top_sentences(scored)[0].startswith("L0H1 is the strongest previous-token head on the shipped corpus")


def test_findings_say_which_special_token_an_encoders_heads_park_on() -> None:
    """[CLS]/[SEP] heads split by [SEP]'s share: Clark et al.'s BERT parks on [SEP]; the sentence counts, for this
    model, which of the two each strong head parks on."""
    base = {k: torch.zeros(6, 2) for k in atlas.ENCODER_SCORES}
    base["special"][1, 0], base["sep"][1, 0] = 0.9, 0.05  # parks on [CLS]
    base["special"][3, 1], base["sep"][3, 1] = 0.8, 0.7  # parks on [SEP]
    base["special"][4, 0], base["sep"][4, 0] = 0.6, 0.4  # on [SEP] for the most part
    scored = atlas.Atlas("minilm", "corpus", False, base, {k: 10 for k in atlas.ENCODER_SCORES}, 3, 30, 1)
    said = " ".join(atlas.findings(scored))
    assert "Of the 3 heads that park on [CLS]/[SEP], 2 park mostly on [SEP] (layers 3–4" in said
    assert "and 1 mostly on [CLS]" in said
    base["sep"][3, 1] = base["sep"][4, 0] = 0.0
    assert "2 park mostly" not in " ".join(atlas.findings(scored)) and "0 park mostly on [SEP] and 3" in " ".join(
        atlas.findings(scored)
    )
    decoder = atlas.Atlas(
        "smollm2", "corpus", False, {k: base[k] for k in atlas.SCORES}, {k: 10 for k in atlas.SCORES}, 3, 30, 1
    )
    assert "[SEP]" not in " ".join(atlas.findings(decoder))
