"""Lessons 1 to 9: the toy computation's questions, each answered by the package on the learner's own inputs.

Each question lists next to it the common wrong answers (`misconceptions`: the value each gives on the inputs) and
refuses, in one sentence, the inputs it cannot be asked on (`refuse`); question.py says what a question promises.
"""

from __future__ import annotations

import math

import torch

from ...basics import config
from ...llm import flash, kv_memory
from .. import permutation, scaling, soft_lookup
from .question import (
    Inputs,
    Question,
    Truth,
    followed_word,
    numbered,
    query_token,
    quoted,
    sentence_problem,
    top_keys,
    toy_problem,
    toy_result,
    weights_words,
    words_of,
)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# 1. Soft lookup ---------------------------------------------------------------------------------------------------
def _lookup(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    i = query_token(inputs)
    look = soft_lookup.soft_lookup(result, 0, i)
    keys = numbered(result.key_tokens)
    best = top_keys(look.weights)
    j = min(best)
    weight = float(look.weights[j])
    own = " Here that is the query's own word: it happens this time, not by design." if j == i else ""
    rest = "the rest a blend of the others" if len(keys) > 1 else "there is no other key to blend"
    return Truth(j, f"{keys[j]} (weight {weight:.2f})",
                 f"Its key has the largest dot product with the query, so the softmax gives it the most weight; "
                 f"the context is {weight:.0%} its value and {rest}.{own}", best)  # fmt: skip


SOFT_LOOKUP = Question(
    "soft_lookup",
    "cell",
    ("sentence", "seed", "d_k", "token"),
    lambda i: (
        f"With {weights_words(i)}: which key will the query {followed_word(i)} put the most weight on? Pick the "
        "cell of its row."
    ),
    _lookup,
    options=lambda i: numbered(words_of(i)),
    misconceptions=lambda i: {"itself: the query's own word (self-attention favours the diagonal)": query_token(i)},
    refuse=toy_problem,
)


# 2. Scores and softmax ---------------------------------------------------------------------------------------------
SOFTMAX_CHOICES = ("It rises", "It falls", "It stays the same")


def _double(inputs: Inputs) -> Truth:
    i = query_token(inputs)
    base = toy_result(inputs, mask="none")
    row = base.scaled[0, i].double()  # omega / √d_k, in float64 so that a near one-hot row still shows its rise
    before, after = float(torch.softmax(row, -1).max()), float(torch.softmax(2 * row, -1).max())
    change = 0 if after > before + 1e-12 else 1 if after < before - 1e-12 else 2
    if change == 0:
        why = ("Doubling every score doubles the gaps between them, and the softmax turns gaps into ratios of e^gap: "
               "the winner takes more.")  # fmt: skip
        if after - before < 5e-4:
            why += f" Here it was already almost 1, so it rises by only {after - before:.1e}."
    elif len(base.key_tokens) == 1:
        why = "With one key there is nothing to take weight from: the only weight is 1 whatever the score."
    else:
        why = "The scores of this row are all equal: doubled, they are still equal, and so are the weights."
    return Truth(change, f"{SOFTMAX_CHOICES[change].lower()}: {before:.3f} → {after:.3f}", why)


SOFTMAX = Question(
    "softmax",
    "choice",
    ("sentence", "seed", "d_k", "token"),
    lambda i: (
        f"With {weights_words(i)}, no mask: double every score (omega × 2) before the softmax. Does the largest "
        f"weight of {followed_word(i)}'s row rise or fall?"
    ),
    _double,
    options=lambda i: SOFTMAX_CHOICES,
    misconceptions=lambda i: {"it stays the same: the weights are normalised anyway": 2},
    refuse=lambda i: toy_problem(i, mask="none"),
)


# 3. Why divide by √d_k --------------------------------------------------------------------------------------------
# The law is graded, not a sample: q·k of d_k products of N(0, 1) numbers has variance d_k, so its spread is √d_k. The
# sweep on screen is one sample of it (SWEEP_SEEDS seeds of the sentence's length), quoted at the reveal.
SWEEP_SEEDS = 8


def sweep_length(inputs: Inputs) -> int:
    """The Scaling page's sweep length for this sentence: its tokens, 2 to 32."""
    return min(max(len(words_of(inputs)), 2), 32)


def _spread(inputs: Inputs) -> Truth:
    d_k = int(inputs["d_k"])
    t, seed = sweep_length(inputs), int(inputs["seed"])
    sweep = scaling.scaling_sweep((d_k,), seeds=range(seed, seed + SWEEP_SEEDS), tokens=t)
    sample = float(sweep.band("spread", "unscaled")[0])
    law = math.sqrt(d_k)
    return Truth(law, f"√{d_k} = {law:.2f}",
                 f"q·k adds up {_plural(d_k, 'product')} of variance 1, so its variance is {d_k} and its spread "
                 f"√{d_k} = {law:.2f}. The scores on screen, {SWEEP_SEEDS} seeds of {t} tokens, are one sample of "
                 f"it: their spread came out {sample:.2f}. Dividing by √d_k brings it back to about 1.")  # fmt: skip


SCALING = Question(
    "scaling",
    "number",
    ("sentence", "seed", "d_k"),
    lambda i: (
        f"q and k have d_k = {_plural(int(i['d_k']), 'number')} each, every one drawn independently from N(0, 1). "
        "Before any scaling, what is the spread (standard deviation) of q·k? Give the law's value, not a sample: the "
        "scores the lab draws for your sentence at the reveal wobble around it."
    ),
    _spread,
    lo=0,
    hi=1000,
    tolerance=0.1,  # every wrong answer below is at least 29% away from √d_k (d_k = 2: 1 against 1.41)
    relative=True,
    misconceptions=lambda i: {
        "d_k: the variance, not the spread": int(i["d_k"]),
        "1: the spread after the scaling, or of one number": 1,
        "1/√d_k: the scale factor itself": 1 / math.sqrt(int(i["d_k"])),
    },
)


# 4. Masks ---------------------------------------------------------------------------------------------------------
COUNTED_MASKS = tuple(m for m in config.MASKS if m != "custom")


def _mask_words(inputs: Inputs) -> str:
    kind = str(inputs["mask"])
    if kind == "none":
        return "With no mask"
    if kind == "causal":
        return "Under the causal mask (each token sees itself and the tokens before it)"
    if kind == "padding":
        p = int(inputs["padding"])
        keys = "no key" if p == 0 else f"the last {_plural(p, 'key')}"
        if p >= len(words_of(inputs)) > 0:
            keys += f" (the sentence has {_plural(len(words_of(inputs)), 'token')}: every key)"
        return f"Under the padding mask with {keys} marked as padding (padding = {p}: no query sees a padding key)"
    w = int(inputs["window"])
    seen = "only itself" if w == 1 else f"itself and at most the {_plural(w - 1, 'token')} before it"
    return f"Under a sliding window of {w} (each token sees {seen})"


def _mask_problem(inputs: Inputs) -> str | None:
    if str(inputs["mask"]) not in COUNTED_MASKS:
        return ("This lesson counts the zeros of the none, causal, padding and window masks; a custom mask's zeros "
                "are the cells you switch off yourself on the Masks page: pick one of the four.")  # fmt: skip
    return toy_problem(inputs)


def _zeros(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    t = len(result.tokens)
    blocked = int((~result.mask).sum())
    return Truth(blocked, f"{blocked:,} of {t * t:,}",
                 f"Each blocked score is −∞ before the softmax, and e^−∞ = 0 exactly: {_mask_words(inputs).lower()}, "
                 f"{blocked:,} of the {t} × {t} weights are zero.")  # fmt: skip


def _mask_misconceptions(inputs: Inputs) -> dict[str, float]:
    t = len(words_of(inputs))
    right = _zeros(inputs).value
    wrong = {"none: a mask makes weights small, not zero": 0, "the weights the mask keeps, not the ones it blocks":
             t * t - right}  # fmt: skip
    kind = str(inputs["mask"])
    if kind == "causal":
        wrong["half of the cells, T²/2: the diagonal forgotten"] = t * t / 2
        wrong["T(T + 1)/2: the diagonal blocked too"] = t * (t + 1) // 2
    elif kind == "window":
        wrong["the causal count: the window's own limit forgotten"] = t * (t - 1) // 2
    elif kind == "padding":
        wrong["one a padding key, not one a query and padding key"] = min(int(inputs["padding"]), t)
    return wrong


MASKS = Question(
    "masks",
    "number",
    ("sentence", "mask", "window", "padding"),
    lambda i: (
        f"{_mask_words(i)}, how many of the {len(words_of(i))} × {len(words_of(i))} softmax weights of your "
        f"{len(words_of(i))}-token sentence are exactly zero?"
    ),
    _zeros,
    lo=0,
    hi=512 * 512,
    defaults={"mask": "causal"},
    bounds=lambda i: (0, len(words_of(i)) ** 2),
    misconceptions=_mask_misconceptions,
    refuse=_mask_problem,
)


# 5. Several heads -------------------------------------------------------------------------------------------------
def _favourites(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    i = query_token(inputs)
    keys = numbered(result.key_tokens)
    tops = [min(top_keys(result.weights[h, i])) for h in range(result.heads)]
    n = len(set(tops))
    listed = ", ".join(f"head {h + 1}: {keys[j]}" for h, j in enumerate(tops))
    return Truth(n, str(n), f"Each head has its own W_q and W_k, so its own idea of a match ({listed}).")


MULTI_HEAD = Question(
    "multi_head",
    "number",
    ("sentence", "seed", "d_k", "heads", "token"),
    lambda i: (
        f"{_plural(int(i['heads']), 'head')} with {weights_words(i)}, each head its own W_q and W_k: each picks the "
        f"key it weighs most for the query {followed_word(i)}. How many different keys are picked?"
    ),
    _favourites,
    lo=1,
    hi=16,
    defaults={"heads": 4},
    bounds=lambda i: (1, int(i["heads"])),
    misconceptions=lambda i: {
        "one: they all see the same sentence": 1,
        "as many as heads: each head a key of its own": int(i["heads"]),
    },
    refuse=toy_problem,
)


# 6. Where words are -----------------------------------------------------------------------------------------------
POSITION_CHOICES = ("The same rows, only reordered", "Different numbers")


def _shuffled(inputs: Inputs) -> tuple[tuple[str, ...], torch.Tensor, tuple[str, ...]]:
    tokens = words_of(inputs)
    perm = permutation.shuffled_order(tokens, seed=0)
    return tokens, perm, tuple(permutation.apply_order(tokens, perm))


def _shuffle(inputs: Inputs) -> Truth:
    tokens, perm, shuffled_tokens = _shuffled(inputs)
    pinned = {"mask": "none"}
    context = toy_result(inputs, **pinned).context
    shuffled = toy_result(inputs, sentence=" ".join(shuffled_tokens), **pinned).context
    check = permutation.permutation_check(context, shuffled, perm)
    k = 0 if check.equivariant else 1
    kind = str(inputs["position"])
    if shuffled_tokens == tokens:
        alone = "it is one word" if len(tokens) == 1 else "its words are all the same"
        why = f"This sentence has no other order ({alone}), so nothing can move."
    elif k == 0 and kind == "none":
        why = ("Without positions attention sees a bag of words: each word's context is the same, wherever it "
               f"stands (largest difference {check.max_difference:.1g}).")  # fmt: skip
    elif k == 0:
        why = (f"The {kind} encoding reads only how far apart two words are, and this shuffle keeps every distance "
               f"between them: each context is unchanged (largest difference {check.max_difference:.1g}).")  # fmt: skip
    elif kind == "none":
        why = f"Even without positions the contexts moved here (largest difference {check.max_difference:.2g})."
    else:
        why = (f"The {kind} encoding tells the words apart by where they stand, so a word's context changes with "
               f"the order (largest difference {check.max_difference:.2g}).")  # fmt: skip
    return Truth(k, POSITION_CHOICES[k].lower(), why)


def _position_words(inputs: Inputs) -> str:
    tokens, _, shuffled = _shuffled(inputs)
    order = (f"Shuffle the words of {quoted(' '.join(tokens))} to {quoted(' '.join(shuffled))}" if shuffled != tokens
             else f"Shuffle the words of {quoted(' '.join(tokens))}: it has no other order")  # fmt: skip
    return (
        f"{order} (position encoding: {inputs['position']}; {weights_words(inputs)}; no mask). Each word's context "
        "vector: the same numbers, only in another row, or different numbers?"
    )


POSITION = Question(
    "position",
    "choice",
    ("sentence", "seed", "d_k", "position"),
    _position_words,
    _shuffle,
    options=lambda i: POSITION_CHOICES,
    defaults={"position": "rope"},
    misconceptions=lambda i: (
        {"different: the shuffled sentence means something else": 1}
        if i["position"] == "none"
        else {"the same: a word is the same word wherever it stands": 0}
    ),
    refuse=lambda i: toy_problem(i, mask="none"),
)


# 7. Cross-attention -----------------------------------------------------------------------------------------------
def _second(inputs: Inputs) -> str:
    return str(inputs.get("cross_sentence") or "")


def _columns(inputs: Inputs) -> Truth:
    result = toy_result(inputs, cross_sentence=_second(inputs))
    t_q, t_k = result.weights.shape[-2:]
    return Truth(int(t_k), str(int(t_k)),
                 f"Queries come from the first sentence ({t_q} rows), keys and values from the second: one column "
                 f"per key, {t_k}, whatever the length of the first.")  # fmt: skip


CROSS = Question(
    "cross_attention",
    "number",
    ("sentence", "cross_sentence", "seed", "d_k"),
    lambda i: (
        f"Queries from {quoted(str(i['sentence']))}, keys and values from {quoted(_second(i), limit=10**6)}. How "
        "many columns does the weight matrix have? (The lab's tokens: one a word, punctuation at word ends dropped.)"
    ),
    _columns,
    lo=1,
    hi=512,
    misconceptions=lambda i: {
        "the first sentence's length: a square matrix, as in self-attention": len(words_of(i)),
        "both lengths added: one matrix over both sentences": len(words_of(i)) + len(words_of(i, "cross_sentence")),
    },
    refuse=lambda i: toy_problem(i, cross_sentence=_second(i)),
)


# 8. Grouped-query heads and the KV cache ---------------------------------------------------------------------------
def _model(inputs: Inputs) -> kv_memory.ModelShape:
    return kv_memory.MODELS[str(inputs["kv_model"])]


def _cache(inputs: Inputs) -> Truth:
    model = _model(inputs)
    numbers = model.cache_bytes(1, bytes_per_number=1)
    full = model.cache_bytes(1, bytes_per_number=1, kv_heads=model.heads)
    shared = (f"its {model.heads} query heads share {model.kv_heads} K/V heads, {model.heads // model.kv_heads}× "
              f"fewer than the {full:,} of one K/V head a query head" if model.kv_heads < model.heads
              else "every query head keeps its own K/V head")  # fmt: skip
    return Truth(numbers, f"{numbers:,}",
                 f"{model.layers} layers × {model.kv_heads} K/V heads × {model.d_head} numbers × 2 (a key and a "
                 f"value): {shared}.")  # fmt: skip


def _cache_words(inputs: Inputs) -> str:
    m = _model(inputs)
    heads = (f"{m.heads} query heads sharing {m.kv_heads} K/V {'head' if m.kv_heads == 1 else 'heads'}"
             if m.kv_heads < m.heads else f"{m.heads} query heads, each with its own K/V head")  # fmt: skip
    return (
        f"{m.name} has {m.layers} layers, {heads}, and heads of {m.d_head} numbers. How many numbers does its KV "
        "cache hold for each token of the context (every layer, keys and values)?"
    )


def _cache_misconceptions(inputs: Inputs) -> dict[str, float]:
    m = _model(inputs)
    return {
        "counting the query heads, not the K/V heads": m.layers * m.heads * m.d_head * 2,
        "keys only: the values forgotten": m.layers * m.kv_heads * m.d_head,
        "one layer only": m.kv_heads * m.d_head * 2,
        "bytes at 2 a number, not numbers": m.layers * m.kv_heads * m.d_head * 2 * 2,
    }


def _pick_model() -> str:
    return f"Pick one of the models offered: {', '.join(kv_memory.MODELS)}."


KV_CACHE = Question(
    "kv_cache",
    "number",
    ("kv_model",),
    _cache_words,
    _cache,
    lo=1,
    hi=1e9,
    tolerance=0.05,  # every wrong answer below is at least twice or half the right one
    relative=True,
    misconceptions=_cache_misconceptions,
    refuse=lambda i: None if str(i["kv_model"]) in kv_memory.MODELS else _pick_model(),
)


# 9. FlashAttention's tiles ----------------------------------------------------------------------------------------
# One head, pinned (the lesson offers no heads control): a tile of B × B scores and m and l for each of the T rows.
def _tile(inputs: Inputs) -> tuple[int, int, int]:
    """(T, the block size asked, the tile's side: the block size clipped to the sentence)."""
    n = len(words_of(inputs))
    asked = max(int(inputs["block_size"]), 1)
    return n, asked, min(asked, n)


def _tiles(inputs: Inputs) -> Truth:
    n, _, size = _tile(inputs)
    memory = flash.memory_numbers(n, n, size, 1)
    held = memory.tile_scores + memory.statistics
    return Truth(held, f"{held:,} (the ordinary form: {memory.full_scores:,})",
                 f"One tile of {size} × {size} scores and two numbers (m and l) for each of the {n} rows: "
                 f"{memory.tile_scores:,} + {memory.statistics:,}.")  # fmt: skip


def _tiles_words(inputs: Inputs) -> str:
    n, asked, size = _tile(inputs)
    tiles = (
        f"tiles of {size} × {size} scores over {n} tokens"
        if asked <= n
        else f"a block size of {asked} over {n} tokens: wider than the sentence, so one tile is {size} × {size}"
    )
    return (
        f"One head, {tiles}. How many numbers does the tiled form hold at once: one tile of scores, plus the running "
        "max m and sum l of every query row?"
    )


FLASH = Question(
    "flash_attention",
    "number",
    ("sentence", "block_size"),
    _tiles_words,
    _tiles,
    lo=0,
    hi=1e9,
    misconceptions=lambda i: {
        "T²: the ordinary form's whole score matrix": _tile(i)[0] ** 2,
        "the tile alone: m and l forgotten": _tile(i)[2] ** 2,
        "one m and one l, not one a row": _tile(i)[2] ** 2 + 2,
        "m and l for the tile's rows only": _tile(i)[2] ** 2 + 2 * _tile(i)[2],
    },
    refuse=sentence_problem,
)
