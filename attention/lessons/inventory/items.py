"""The attention inventory's eleven items, one idea of the course each. Every draw computes its right answer with the
package (softmax, masks, the toy computation, the KV cache's size, FlashAttention's tiles, the induction targets)
and each wrong answer as the value a misconception gives on the same numbers.
"""

from __future__ import annotations

import math
import random

import torch

from ...basics import masks
from ...basics.config import Config
from ...basics.core import compute
from ...llm import flash, kv_memory
from ...models import interpret
from .. import permutation
from .item import Draft, Item, Option

# Short, plain words for the twins' sentences (tokens a learner reads at a glance; none repeats within a draw)
WORDS = (
    "cat sat on the mat while rain fell soft grey clouds drift over hills birds sing near old trees kids run "
    "past red doors a dog naps by warm fire tea cools in blue cups stars shine late and wind hums low"
).split()


def _words(rng: random.Random, n: int) -> list[str]:
    return rng.sample(sorted(set(WORDS)), n)


def _vector(x: torch.Tensor | list[float]) -> str:
    return "(" + ", ".join(f"{float(v):.2f}" for v in x) + ")"


# 1. The softmax ignores a shift -------------------------------------------------------------------------------------
def _shift(rng: random.Random) -> Draft:
    scores = torch.tensor([float(rng.randint(-3, 3)) for _ in range(rng.randint(3, 4))])
    c = rng.choice([-4, -3, -2, 2, 3, 4, 5])
    before, after = torch.softmax(scores, -1), torch.softmax(scores + c, -1)
    same = bool(torch.allclose(before, after, atol=1e-6))
    rises = "rises" if c > 0 else "falls"
    right = f"They stay {_vector(after)}" if same else f"They change to {_vector(after)}"
    return Draft(
        f"A row of scores {_vector(scores)} gives the weights {_vector(before)}. Add {c} to every score of the "
        "row before the softmax. What happens to the weights?",
        (
            Option(right),
            Option(f"Every weight {rises}, each by the same amount", "shift_moves_weights"),
            Option("The largest weight grows and the others shrink", "shift_sharpens"),
        ),
        (
            Option(
                "e^(s + c) = e^c · e^s: the factor e^c is in every term and cancels when the row is divided by its sum"
            ),  # fmt: skip
            Option("A larger score always means a larger weight", "shift_moves_weights"),
            Option(
                "The softmax divides each score by the row's sum, so adding changes the ratios",
                "softmax_divides_scores",
            ),  # fmt: skip
        ),
        tuple(float(w) for w in after),
        f"softmax(s + {c}) = softmax(s): the weights stay {_vector(after)}.",
    )


# 2. The spread of q·k ---------------------------------------------------------------------------------------------
def _law_spread(d_k: int) -> float:
    """The standard deviation of q·k for q, k with d_k independent N(0, 1) entries: variances add, Var = d_k."""
    return math.sqrt(sum(1.0 for _ in range(d_k)))  # each product q_i k_i has variance 1·1 = 1


def _spread(rng: random.Random) -> Draft:
    d_k = rng.randint(2, 1024)
    spread = _law_spread(d_k)
    return Draft(
        f"q and k each have d_k = {d_k} numbers, every one drawn independently from N(0, 1). Before any "
        "scaling, about how large is the spread (standard deviation) of the score q·k?",
        (
            Option(f"About {spread:.3g}"),
            Option("About 1", "dot_keeps_unit_spread"),
            Option(f"About {d_k:,}", "spread_is_variance"),
            Option(f"About {d_k * d_k:,}", "spread_squares"),
        ),
        (
            Option(
                f"q·k adds {d_k} independent products of variance 1: variances add to {d_k}, and the spread is "
                "its square root"
            ),  # fmt: skip
            Option("Each product has spread 1, and the spreads add up", "spread_is_variance"),
            Option("A dot product of standard normal vectors is standard normal too", "dot_keeps_unit_spread"),
        ),
        spread,
        f"Var(q·k) = {d_k} × 1, so the spread is √{d_k} = {spread:.3g}.",
    )


# 3. Why divide by √d_k ---------------------------------------------------------------------------------------------
def _scaling(rng: random.Random) -> Draft:
    small, big = sorted(rng.sample([2**k for k in range(13)], 2))
    after = [_law_spread(d) / math.sqrt(d) for d in (small, big)]  # spread of q·k/√d_k
    same = abs(after[0] - after[1]) < 1e-9
    right = f"It stays about {after[1]:g}" if same else f"It goes from {after[0]:g} to {after[1]:g}"
    return Draft(
        f"Scores q·k are divided by √d_k before the softmax (entries of q and k from N(0, 1)). When d_k grows from "
        f"{small} to {big}, what happens to the spread of the divided scores?",
        (
            Option(right),
            Option(f"It grows √({big}/{small}) = {math.sqrt(big / small):g} times", "scaling_does_not_fix"),
            Option(f"It shrinks √({big}/{small}) = {math.sqrt(big / small):g} times", "divide_by_dk"),
        ),
        (
            Option("The spread of q·k is √d_k, and dividing by √d_k cancels it, whatever d_k is"),
            Option(
                "Wider vectors always give wider scores; the division only makes them smaller", "scaling_does_not_fix"
            ),  # fmt: skip
            Option("The division is by d_k, so the larger d_k the smaller the scores", "divide_by_dk"),
        ),
        after[1],
        f"√{big} / √{big} = 1: the softmax sees scores of the same spread at any width, so it does not saturate.",
    )


# 4. What a causal mask lets a token see ----------------------------------------------------------------------------
def _causal(rng: random.Random) -> Draft | None:
    t = rng.randint(5, 9)
    i = rng.randint(2, t - 1)  # 1-based; neither end, where two misconceptions coincide with the answer
    words = _words(rng, t)
    allowed = int(masks.causal(t, t)[i - 1].sum())
    return Draft(
        f"“{' '.join(words)}” ({t} tokens) under a causal mask. How many keys may token {i}, “{words[i - 1]}”, "
        "attend to?",
        (
            Option(str(allowed)),
            Option(str(t), "mask_hides_nothing"),
            Option(str(i - 1), "no_self_attention"),
            Option(str(t - i + 1), "sees_the_future"),
        ),
        (
            Option("Itself and every token before it: nothing after it"),
            Option("A token cannot attend to itself, only to the tokens before it", "no_self_attention"),
            Option("Itself and the tokens after it: it reads what comes next", "sees_the_future"),
            Option("The mask blocks only padding, so every token is visible", "mask_hides_nothing"),
        ),
        allowed,
        f"Row {i} of the causal mask allows keys 1 to {i}: {allowed} keys.",
    )


# 5. Order without positions ----------------------------------------------------------------------------------------
def _order(rng: random.Random) -> Draft:
    words = _words(rng, rng.randint(4, 6))
    a, b = sorted(rng.sample(range(len(words)), 2))
    perm = torch.arange(len(words))
    perm[a], perm[b] = b, a
    shuffled = permutation.apply_order(words, perm)
    config = {"mask": "none", "position": "none", "seed": rng.randint(0, 9999), "dropout": 0.0}
    context = compute(Config(sentence=" ".join(words), **config)).context
    moved = compute(Config(sentence=" ".join(shuffled), **config)).context
    check = permutation.permutation_check(context, moved, perm)
    same = "The same numbers, now in its new row"
    return Draft(
        f"No position encoding, no mask: “{' '.join(words)}”. Swap “{words[a]}” and “{words[b]}”. What happens to "
        f"the context vector of “{words[a]}”?",
        (
            Option(same if check.equivariant else "Different numbers"),
            Option("Different numbers: the words around it changed", "attention_knows_order"),
            Option("The same numbers in the same row: nothing moves", "rows_stay_in_place"),
        ),
        (
            Option(
                "Without positions every score depends only on the two words, not on where they stand: a bag of words"
            ),  # fmt: skip
            Option("A token attends most to its neighbours", "attention_knows_order"),
            Option("Each row of the output belongs to a place in the sentence, not to a word", "rows_stay_in_place"),
        ),
        check.max_difference,
        f"The rows are the old ones reordered (largest difference {check.max_difference:.1g}): attention alone "
        "cannot tell the order.",
    )


# 6. Heads and their sizes ------------------------------------------------------------------------------------------
def _heads(rng: random.Random) -> Draft:
    heads = rng.choice([2, 4, 8, 12, 16])
    d_model = heads * rng.choice([16, 32, 64])
    d_k = Config(d_model=d_model, heads=heads, head_layout="split").head_dims[0]
    return Draft(
        f"nn.MultiheadAttention's layout: d_model = {d_model} split across {heads} heads. How many numbers wide "
        "is each head's query (its d_k)?",
        (
            Option(str(d_k)),
            Option(str(d_model), "each_head_full_width"),
            Option(str(d_model * heads), "heads_multiply_width"),
        ),
        (
            Option(
                f"The heads cut d_model's {d_model} columns between them: {heads} heads × {d_k} = {d_model}, "
                "the cost of one head"
            ),  # fmt: skip
            Option("Each head must see the whole embedding, so it needs all d_model numbers", "each_head_full_width"),
            Option("Every head adds its own d_model-wide projection", "heads_multiply_width"),
        ),
        d_k,
        f"{d_model} / {heads} = {d_k}: more heads, narrower heads, the same total width.",
    )


# 7. Sinks: a large weight is not a large effect --------------------------------------------------------------------
def _sink(rng: random.Random) -> Draft | None:
    words = _words(rng, 4)
    # the first token is the sink (the largest weight, a short value); of tokens 2 and 3 one has the longest value
    # and a small weight, the other a fair weight and value; the last token is small in both
    fair, longest = rng.sample([1, 2], 2)
    raw, norms = [0.0] * 4, [0.0] * 4
    raw[0], norms[0] = rng.uniform(2.0, 3.0), rng.uniform(0.05, 0.15)
    raw[fair], norms[fair] = rng.uniform(1.0, 1.5), rng.uniform(1.0, 1.6)
    raw[longest], norms[longest] = rng.uniform(-1.0, -0.5), rng.uniform(2.4, 3.0)
    raw[3], norms[3] = rng.uniform(-1.5, -1.0), rng.uniform(0.3, 0.8)
    weights = torch.softmax(torch.tensor(raw), -1)  # (4,)
    moved = weights * torch.tensor(norms)  # (4,) how far each token's weighted value moves the output
    right, heaviest, far = int(moved.argmax()), int(weights.argmax()), int(torch.tensor(norms).argmax())
    if len({right, heaviest, far, 3}) < 4 or float(moved.sort().values[-2]) > 0.8 * float(moved.max()):
        return None  # four different tokens, and a clear winner
    table = "; ".join(f"“{w}” weight {float(a):.2f}, value length {n:.2f}" for w, a, n in
                      zip(words, weights, norms, strict=True))  # fmt: skip
    return Draft(
        f"A head reads four tokens: {table}. Which token changes the head's output the most?",
        (
            Option(f"“{words[right]}”"),
            Option(f"“{words[heaviest]}”", "weight_is_importance"),
            Option(f"“{words[far]}”", "values_without_weights"),
            Option(f"“{words[3]}”", "latest_token_matters_most"),
        ),
        (
            Option("The output adds weight × value: a large weight on a short value (a sink) moves it little"),
            Option("The token with the largest weight is the one the head reads", "weight_is_importance"),
            Option("The weights only decide where to look; the longest value wins", "values_without_weights"),
        ),
        words[right],
        f"weight × length: “{words[right]}” {float(moved[right]):.2f} against the sink “{words[heaviest]}”'s "
        f"{float(moved[heaviest]):.2f}.",
    )


# 8. What a head writes, where it looks -----------------------------------------------------------------------------
def _writes(rng: random.Random) -> Draft | None:
    words = _words(rng, 3)
    weights = torch.softmax(torch.tensor([rng.uniform(-1, 1) for _ in range(3)]) * 2, -1)  # (3,)
    values = torch.tensor([[float(rng.randint(-3, 3)) for _ in range(2)] for _ in range(3)])  # (3, 2)
    written = weights @ values  # (2,) the weighted average of the values
    top = int(weights.argmax())
    wrong = (values[top], values.mean(0), values.sum(0))
    if any(float((w - written).abs().max()) < 0.15 for w in wrong) or float((wrong[1] - wrong[2]).abs().max()) < 0.15:
        return None  # every wrong vector visibly different from the right one and from each other
    table = "; ".join(f"“{w}” weight {float(a):.2f}, value {_vector(v)}" for w, a, v in
                      zip(words, weights, values, strict=True))  # fmt: skip
    return Draft(
        f"One query's row of weights and the values it mixes: {table}. What does the head write for this query?",
        (
            Option(_vector(written)),
            Option(_vector(values[top]), "hard_attention"),
            Option(_vector(values.mean(0)), "weights_ignored"),
            Option(_vector(values.sum(0)), "sum_not_average"),
        ),
        (
            Option(
                "The weights (where it looks) decide the mix; the values decide what is written: Σ weight × value"
            ),  # fmt: skip
            Option("Attention copies the one token it looks at most", "hard_attention"),
            Option("Every token it attends to counts the same", "weights_ignored"),
        ),
        tuple(float(w) for w in written),
        f"{' + '.join(f'{float(a):.2f}×{_vector(v)}' for a, v in zip(weights, values, strict=True))} = "
        f"{_vector(written)}.",
    )


# 9. A grouped-query cache's size -----------------------------------------------------------------------------------
def _cache(rng: random.Random) -> Draft:
    layers = rng.choice([16, 22, 24, 28, 32, 36, 40])
    heads = rng.choice([16, 32, 48])
    kv_heads = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0 and k < heads])
    d_head = rng.choice([64, 96, 128])
    numbers = kv_memory.kv_cache_bytes(layers, kv_heads, d_head, tokens=1, bytes_per_number=1)
    return Draft(
        f"A model has {layers} layers, {heads} query heads sharing {kv_heads} key/value "
        f"head{'s' if kv_heads > 1 else ''} (grouped-query attention), and heads {d_head} numbers wide. How many "
        "numbers does its KV cache keep for each token?",
        (
            Option(f"{numbers:,}"),
            Option(f"{2 * layers * heads * d_head:,}", "cache_per_query_head"),
            Option(f"{layers * kv_heads * d_head:,}", "keys_only"),
            Option(f"{2 * kv_heads * d_head:,}", "one_layer_only"),
        ),
        (
            Option("Every layer keeps a key and a value for each K/V head; the query heads of a group share them"),
            Option("Every query head keeps its own keys and values", "cache_per_query_head"),
            Option("Only the keys are kept: the values are recomputed", "keys_only"),
        ),
        numbers,
        f"2 × {layers} layers × {kv_heads} K/V heads × {d_head} = {numbers:,}.",
    )


# 10. Induction ------------------------------------------------------------------------------------------------------
def _induction(rng: random.Random) -> Draft | None:
    first = _words(rng, rng.randint(5, 7))
    k = rng.randint(2, len(first) - 2)  # the repeat stops at the first's token k; its next token is first[k]
    tokens = first + first[:k]
    ids = [first.index(w) for w in tokens]
    targets = interpret.induction_targets(ids)[-1]  # (T,) keys after an earlier copy of the last token
    j = int(targets.nonzero().flatten()[0])
    query = len(tokens) - 1
    labels = [f"“{w}” (token {n + 1})" for n, w in enumerate(tokens)]
    return Draft(
        f"A model reads “{' '.join(tokens)}”. From the last token, {labels[query]}, which earlier token does an "
        "induction head put its weight on?",
        (
            Option(labels[j]),
            Option(labels[j - 1], "looks_at_the_match"),
            Option(labels[query - 1], "previous_token"),
            Option(labels[0], "always_the_sink"),
        ),
        (
            Option("It finds where this token came before and reads the token that followed, to copy it next"),
            Option("It looks back at the same word, to see what it meant", "looks_at_the_match"),
            Option("It always reads the token just before", "previous_token"),
        ),
        tokens[j],
        f"The earlier “{tokens[query]}” is token {j}; the token after it, {labels[j]}, is what the head reads and "
        "the model predicts next.",
    )


# 11. What FlashAttention changes and what it does not --------------------------------------------------------------
def _flash(rng: random.Random) -> Draft | None:
    t = rng.choice([256, 512, 1024, 2048, 4096])
    b = rng.choice([32, 64, 128])
    memory = flash.memory_numbers(t, t, b)
    held = memory.tile_scores + memory.statistics
    g = torch.Generator().manual_seed(rng.randint(0, 2**31 - 1))
    q, k_, v = (torch.randn(1, 48, 8, generator=g) for _ in range(3))  # a small twin of the same computation
    tiled = flash.tiled_attention(q, k_, v, scale=math.sqrt(8), block_size=b // 8).output
    exact = bool(torch.allclose(tiled, flash.ordinary_attention(q, k_, v, scale=math.sqrt(8)), atol=1e-5))
    same = "exactly the same output (to rounding)" if exact else "a different output"
    if t * b == t * t or held == t * b:
        return None
    return Draft(
        f"Self-attention over {t:,} tokens holds {t * t:,} scores at once. FlashAttention with tiles of {b} × {b} "
        "keeps one tile and a running max and sum for each row. How many score numbers does it hold at once, and "
        "what output does it give?",
        (
            Option(f"{held:,}, {same}"),
            Option(f"{held:,}, a close approximation", "flash_approximates"),
            Option(f"{t * t:,}, {same}", "no_memory_saved"),
            Option(f"{t * b:,}, {same}", "a_row_of_tiles"),
        ),
        (
            Option(
                "The online softmax rescales its sums whenever a larger max arrives, so the result is exact; "
                "only one tile is held at a time"
            ),  # fmt: skip
            Option("It skips the small scores to save memory", "flash_approximates"),
            Option("It still builds the whole matrix, only in pieces", "no_memory_saved"),
        ),
        held,
        f"{b}² + 2 × {t:,} = {held:,} numbers instead of {t * t:,}, and the same output.",
    )


ITEMS = (
    Item("shift", "The softmax ignores a shift of the whole row", {
        "shift_moves_weights": "adding to every score moves the weights",
        "shift_sharpens": "adding to every score sharpens the row",
        "softmax_divides_scores": "the softmax divides the scores by their sum"}, _shift),
    Item("spread", "The spread of q·k is √d_k", {
        "dot_keeps_unit_spread": "q·k keeps the spread 1 of its entries",
        "spread_is_variance": "the spread of q·k is d_k (the variance, not its root)",
        "spread_squares": "the spread grows as d_k²"}, _spread),
    Item("scaling", "Dividing by √d_k keeps the scores' spread at 1", {
        "scaling_does_not_fix": "the divided scores still widen with d_k",
        "divide_by_dk": "the division is by d_k, so the scores shrink"}, _scaling),
    Item("causal", "A causal mask lets a token see itself and what came before", {
        "mask_hides_nothing": "the causal mask leaves every key visible",
        "no_self_attention": "a token cannot attend to itself",
        "sees_the_future": "a token sees the tokens after it"}, _causal),
    Item("order", "Without positions, attention cannot tell the order", {
        "attention_knows_order": "attention alone knows the word order",
        "rows_stay_in_place": "an output row belongs to a place, not a word"}, _order),
    Item("heads", "Heads split the width between them", {
        "each_head_full_width": "each head is d_model wide",
        "heads_multiply_width": "every head adds a d_model-wide projection"}, _heads),
    Item("sink", "A large weight on a sink moves the output little", {
        "weight_is_importance": "the largest weight is the largest effect",
        "values_without_weights": "the longest value wins whatever its weight",
        "latest_token_matters_most": "the latest token matters most"}, _sink),
    Item("writes", "Where a head looks is not what it writes", {
        "hard_attention": "attention copies the one token it looks at most",
        "weights_ignored": "every attended token counts the same",
        "sum_not_average": "the values are added up, not averaged"}, _writes),
    Item("cache", "Grouped-query heads shrink the KV cache", {
        "cache_per_query_head": "every query head keeps its own keys and values",
        "keys_only": "the cache keeps keys only",
        "one_layer_only": "the cache is one layer's"}, _cache),
    Item("induction", "An induction head reads the token after the earlier copy", {
        "looks_at_the_match": "an induction head looks at the earlier copy itself",
        "previous_token": "an induction head reads the previous token",
        "always_the_sink": "a head with a pattern parks on the first token"}, _induction),
    Item("flash", "FlashAttention changes the memory, not the result", {
        "flash_approximates": "FlashAttention approximates attention",
        "no_memory_saved": "FlashAttention holds the whole matrix",
        "a_row_of_tiles": "FlashAttention holds a whole row of tiles"}, _flash),
)  # fmt: skip
