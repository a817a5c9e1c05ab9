"""Norm-based attention, rollout and head behaviour scores on cases small enough to work out by hand, against their
defining formulas written as loops, and on attention matrices built to have, and to lack, each behaviour."""

from __future__ import annotations

import functools

import pytest
import torch

from attention import Config, compute
from attention.models import interpret

# norm-based attention ----------------------------------------------------------------------------


def test_norms_by_hand_without_an_output_projection() -> None:
    values = torch.tensor([[[3.0, 4.0], [1.0, 0.0]]])  # 1 head, ||v|| = 5 and 1
    weights = torch.tensor([[[0.5, 0.5], [0.25, 0.75]]])
    n = interpret.norm_based(weights, values, None, special=[0])
    torch.testing.assert_close(n.value_norms, torch.tensor([[5.0, 1.0]]))
    torch.testing.assert_close(n.norms, torch.tensor([[[2.5, 0.5], [1.25, 0.75]]]))
    torch.testing.assert_close(n.weight_share, torch.tensor([[0.5, 0.25]]))
    torch.testing.assert_close(n.norm_share, torch.tensor([[2.5 / 3.0, 1.25 / 2.0]]))


def test_norms_by_hand_through_each_heads_rows_of_w_out() -> None:
    values = torch.tensor([[[1.0], [2.0]], [[1.0], [0.0]]])  # 2 heads, d_v = 1
    w_out = torch.tensor([[3.0, 4.0], [0.0, 1.0]])  # row 0 is head 0's W_O, row 1 head 1's
    weights = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.0, 1.0]]])
    n = interpret.norm_based(weights, values, w_out, special=[1])
    torch.testing.assert_close(n.transformed, torch.tensor([[[3.0, 4.0], [6.0, 8.0]], [[0.0, 1.0], [0.0, 0.0]]]))
    torch.testing.assert_close(n.value_norms, torch.tensor([[5.0, 10.0], [1.0, 0.0]]))
    torch.testing.assert_close(n.norms, torch.tensor([[[5.0, 0.0], [2.5, 5.0]], [[0.5, 0.0], [0.0, 0.0]]]))
    # head 1, query 1 moves nothing: its share is 0, not NaN, while its weight share is 1
    torch.testing.assert_close(n.norm_share, torch.tensor([[0.0, 5.0 / 7.5], [0.0, 0.0]]))
    torch.testing.assert_close(n.weight_share, torch.tensor([[0.0, 0.5], [0.5, 1.0]]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_norms_are_the_defining_formula_and_sum_to_the_output_projection(seed: int) -> None:
    config = Config(sentence="a b c d e", d_model=6, d_k=3, d_v=2, heads=3, out_proj=True, bias=True, seed=seed)
    r = compute(config)
    n = interpret.norm_based(r.weights, r.values, r.w_out, special=[0, 4])
    h, t, d_v = r.values.shape
    for k in range(h):
        w_o = r.w_out[k * d_v : (k + 1) * d_v]  # (d_v, d_model)
        for i in range(t):
            for j in range(t):
                want = torch.linalg.vector_norm(r.weights[k, i, j] * (r.values[k, j] @ w_o))
                torch.testing.assert_close(n.norms[k, i, j], want)
    # sum over heads and keys of alpha_ij f(x_j), plus the bias, is the attention's output (Kobayashi's eq. 5)
    total = sum(r.weights[k] @ n.transformed[k] for k in range(h)) + r.b_out
    torch.testing.assert_close(total, r.output)
    want_share = (n.norms[..., 0] + n.norms[..., 4]) / n.norms.sum(-1)
    torch.testing.assert_close(n.norm_share, want_share)
    torch.testing.assert_close(n.weight_share, r.weights[..., 0] + r.weights[..., 4])


# rollout -----------------------------------------------------------------------------------------


def test_rollout_by_hand() -> None:
    a1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # everyone reads token 0
    a2 = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # everyone reads token 1
    r = interpret.rollout(torch.stack([a1, a2])[:, None])  # (L=2, h=1, 2, 2)
    torch.testing.assert_close(r.with_residual[0], torch.tensor([[1.0, 0.0], [0.5, 0.5]]))
    torch.testing.assert_close(r.with_residual[1], torch.tensor([[0.5, 0.5], [0.0, 1.0]]))
    torch.testing.assert_close(r.rollout[0], r.with_residual[0])
    # [[.5, .5], [0, 1]] @ [[1, 0], [.5, .5]]
    torch.testing.assert_close(r.rollout[1], torch.tensor([[0.75, 0.25], [0.5, 0.5]]))


def test_rollout_averages_heads_and_renormalises_rows() -> None:
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    r = interpret.rollout(torch.stack([a, b])[None])  # one layer, two heads
    torch.testing.assert_close(r.averaged[0], torch.full((2, 2), 0.5))
    torch.testing.assert_close(r.rollout[0], torch.tensor([[0.75, 0.25], [0.25, 0.75]]))
    blocked = torch.tensor([[[[0.0, 0.0], [0.5, 0.5]]]])  # query 0 sees nothing: 0.5 I alone, renormalised
    torch.testing.assert_close(interpret.rollout(blocked).rollout[0], torch.tensor([[1.0, 0.0], [0.25, 0.75]]))


@pytest.mark.parametrize("residual", [0.0, 0.5, 0.9])
def test_rollout_is_the_product_of_the_layers(residual: float) -> None:
    g = torch.Generator().manual_seed(3)
    weights = torch.softmax(torch.randn(4, 3, 5, 5, generator=g), dim=-1)
    r = interpret.rollout(weights, residual)
    eye = torch.eye(5)
    layers = [(1 - residual) * w.mean(0) + residual * eye for w in weights]  # rows already sum to 1
    for depth in range(1, 5):
        want = functools.reduce(lambda acc, a: a @ acc, layers[1:depth], layers[0])
        torch.testing.assert_close(r.rollout[depth - 1], want)
    torch.testing.assert_close(r.rollout.sum(-1), torch.ones(4, 5))


# behaviour scores --------------------------------------------------------------------------------

T = 5
UNIFORM = torch.full((T, T), 1 / T)
EYE = torch.eye(T)
BELOW = torch.diag(torch.ones(T - 1), -1)  # A[i, i-1] = 1
ABOVE = torch.diag(torch.ones(T - 1), 1)  # A[i, i+1] = 1


def test_previous_and_next_token_have_and_lack_the_behaviour() -> None:
    previous = BELOW.clone()
    previous[0, 0] = 1.0  # the first query has no previous token: it is not counted
    following = ABOVE.clone()
    following[-1, -1] = 1.0
    torch.testing.assert_close(interpret.previous_token(previous), torch.tensor(1.0))
    torch.testing.assert_close(interpret.next_token(following), torch.tensor(1.0))
    for lacking in (EYE, following):
        torch.testing.assert_close(interpret.previous_token(lacking), torch.tensor(0.0))
    for lacking in (EYE, previous):
        torch.testing.assert_close(interpret.next_token(lacking), torch.tensor(0.0))
    torch.testing.assert_close(interpret.previous_token(UNIFORM), torch.tensor(1 / T))
    half = 0.5 * previous + 0.5 * EYE
    torch.testing.assert_close(interpret.previous_token(half), torch.tensor(0.5))
    torch.testing.assert_close(interpret.previous_token(torch.ones(1, 1)), torch.tensor(0.0))  # one token


def test_sink_has_and_lacks_the_behaviour() -> None:
    special = (0, T - 1)
    on_cls = torch.zeros(T, T)
    on_cls[:, 0] = 1.0
    torch.testing.assert_close(interpret.sink(on_cls, special), torch.tensor(1.0))
    middle = torch.zeros(T, T)
    middle[:, 2] = 1.0
    torch.testing.assert_close(interpret.sink(middle, special), torch.tensor(0.0))
    torch.testing.assert_close(interpret.sink(EYE, special), torch.tensor(2 / T))  # only [CLS] and [SEP] themselves
    torch.testing.assert_close(interpret.sink(UNIFORM, special), torch.tensor(2 / T))


WORDS = (None, 0, 0, 1, 2, None)  # [CLS] the ##x the cat [SEP]
TOKENS = ("[CLS]", "the", "##x", "the", "cat", "[SEP]")


def test_same_word_pairs_by_hand() -> None:
    pairs = interpret.same_word_pairs(WORDS, TOKENS)
    want = torch.zeros(6, 6, dtype=torch.bool)
    for i, j in ((1, 2), (2, 1), (1, 3), (3, 1)):  # pieces of word 0; the identical "the"
        want[i, j] = True
    assert torch.equal(pairs, want)
    only_pieces = torch.zeros(6, 6, dtype=torch.bool)
    only_pieces[1, 2] = only_pieces[2, 1] = True
    assert torch.equal(interpret.same_word_pairs(WORDS), only_pieces)


def test_same_word_has_and_lacks_the_behaviour() -> None:
    pairs = interpret.same_word_pairs(WORDS, TOKENS)
    to_partner = torch.eye(6)
    to_partner[1] = torch.tensor([0.0, 0.0, 0.5, 0.5, 0.0, 0.0])
    to_partner[2] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    to_partner[3] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(interpret.same_word(to_partner, pairs), torch.tensor(1.0))
    torch.testing.assert_close(interpret.same_word(torch.eye(6), pairs), torch.tensor(0.0))
    half = 0.5 * to_partner + 0.5 * torch.eye(6)
    torch.testing.assert_close(interpret.same_word(half, pairs), torch.tensor(0.5))
    # queries 1, 2, 3 have partners; uniform gives 2/6, 1/6, 1/6
    torch.testing.assert_close(interpret.same_word(torch.full((6, 6), 1 / 6), pairs), torch.tensor(4 / 18))
    no_pairs = interpret.same_word_pairs((None, 0, 1, None), ("[CLS]", "a", "b", "[SEP]"))
    torch.testing.assert_close(interpret.same_word(torch.eye(4), no_pairs), torch.tensor(0.0))


def test_coreference_reads_the_pronoun_to_antecedent_weight() -> None:
    tokens = ("[CLS]", "the", "animal", "was", "tired", "because", "it", "[SEP]")
    pronoun, antecedent = interpret.find_token(tokens, "it"), interpret.find_token(tokens, "animal")
    assert (pronoun, antecedent) == (6, 2) and interpret.find_token(tokens, "she") is None
    has = torch.eye(8)
    has[pronoun] = torch.nn.functional.one_hot(torch.tensor(antecedent), 8).float()
    torch.testing.assert_close(interpret.coreference(has, pronoun, antecedent), torch.tensor(1.0))
    torch.testing.assert_close(interpret.coreference(torch.eye(8), pronoun, antecedent), torch.tensor(0.0))


def test_head_scores_and_best_heads_find_the_planted_heads() -> None:
    special = (0, T - 1)
    weights = UNIFORM.repeat(3, 4, 1, 1)  # (L=3, h=4, T, T)
    previous, following, sink_head = BELOW.clone(), ABOVE.clone(), torch.zeros(T, T)
    previous[0, 0] = following[-1, -1] = 1.0
    sink_head[:, 0] = 1.0
    weights[2, 1], weights[0, 3], weights[1, 2] = previous, following, sink_head
    words, tokens = (None, 0, 0, 1, None), ("[CLS]", "a", "##b", "it", "[SEP]")
    pairs = interpret.same_word_pairs(words, tokens)
    weights[1, 0] = EYE[[0, 2, 1, 3, 4]]  # the two pieces attend to each other
    weights[0, 1] = EYE
    weights[0, 1, 3] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0])  # "it" -> "a"
    s = interpret.head_scores(weights, special, pairs, pronoun=3, antecedent=1)
    assert s.previous_token.shape == (3, 4)
    assert interpret.best_heads(s) == {
        "previous_token": (2, 1),
        "next_token": (0, 3),
        "sink": (1, 2),
        "same_word": (1, 0),
        "coreference": (0, 1),
    }
    for score in s.scores().values():
        assert bool((score >= 0).all() and (score <= 1).all())
    without = interpret.head_scores(weights, special, pairs)
    assert without.coreference is None and "coreference" not in interpret.best_heads(without)


def test_best_heads_takes_the_first_on_a_tie() -> None:
    flat = torch.zeros(2, 3)
    flat[0, 2] = flat[1, 1] = 1.0
    scores = interpret.HeadScores(flat, flat, flat, flat, None)
    assert interpret.best_heads(scores)["sink"] == (0, 2)


def test_scores_read_a_toy_result() -> None:
    r = compute(Config(sentence="the cat sat on the mat", heads=2, seed=1))
    words = tuple(range(6))
    s = interpret.head_scores(r.weights[None], special=(), pairs=interpret.same_word_pairs(words, r.tokens))
    torch.testing.assert_close(s.same_word, r.weights[None, :, [0, 4], [4, 0]].mean(-1))  # "the" <-> "the"
    torch.testing.assert_close(s.sink, torch.zeros(1, 2))


# --------------------------------------------------------------------------- coreference on any sentence


@pytest.mark.parametrize(
    ("sentence", "pair"),
    [
        ("The animal didn't cross the street because it was too tired.", ("it", "animal")),
        ("The trophy didn't fit in the suitcase because it was too small", ("it", "trophy")),  # a guess: subject
        ("My sister said she would come", ("she", "sister")),
        ("Mary said she was late", ("she", "Mary")),  # no determiner: the first content word
        ("The chefs cooked and they sang", ("they", "chefs")),
        ("The dog barked loudly all night. Nobody fed him", ("him", "dog")),  # earlier sentence: the nearest noun
        ("The bakers in the old town say their bread is best", ("their", "bakers")),
    ],
)
def test_coreference_pair_names_a_pronoun_and_its_likely_antecedent(sentence: str, pair: tuple[str, str]) -> None:
    from attention.basics.config import tokenize

    tokens = tokenize(sentence)
    found = interpret.coreference_pair(tokens)
    assert found is not None and (tokens[found[0]], tokens[found[1]]) == pair
    assert found[1] < found[0]  # an antecedent comes before its pronoun


@pytest.mark.parametrize("sentence", ["Life is short, eat dessert first", "It rains", "the and of it"])
def test_no_pair_without_a_pronoun_after_a_noun(sentence: str) -> None:
    from attention.basics.config import tokenize

    assert interpret.coreference_pair(tokenize(sentence)) is None


def test_coreference_pair_reads_model_tokens_and_scores_the_pair() -> None:
    """[CLS]/[SEP] are skipped, a word's "##" pieces are not words, and the score is A[pronoun, antecedent]."""
    tokens = ["[CLS]", "the", "keep", "##er", "smiled", "because", "he", "was", "home", ".", "[SEP]"]
    assert interpret.coreference_pair(tokens) == (6, 2)  # "he" -> "keep" (the first piece of "keeper")
    weights = torch.rand(2, 3, len(tokens), len(tokens), generator=torch.Generator().manual_seed(0))
    p, a = interpret.coreference_pair(tokens)
    scores = interpret.head_scores(weights, [0, 10], torch.zeros(11, 11, dtype=torch.bool), p, a)
    torch.testing.assert_close(scores.coreference, weights[:, :, 6, 2])
    model = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "."]
    assert interpret.coreference_pair(model) == (10, 2)  # the model's own pieces of the default sentence
