"""Lessons 1 to 9: the toy computation's questions, each answered by the package on the learner's own inputs."""

from __future__ import annotations

import math

from ...basics.config import tokenize
from ...llm import flash, kv_memory
from .. import permutation, scaling, soft_lookup
from .question import (
    Inputs,
    Question,
    Truth,
    followed_word,
    numbered,
    query_token,
    top_keys,
    toy_result,
)


# 1. Soft lookup ---------------------------------------------------------------------------------------------------
def _lookup(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    look = soft_lookup.soft_lookup(result, 0, query_token(inputs))
    keys = numbered(result.key_tokens)
    best = top_keys(look.weights)
    j = min(best)
    return Truth(j, f"{keys[j]} (weight {float(look.weights[j]):.2f})",
                 f"Its key has the largest dot product with the query, so the softmax gives it the most weight; "
                 f"the context is {float(look.weights[j]):.0%} its value and the rest a blend of the others.",
                 best)  # fmt: skip


SOFT_LOOKUP = Question(
    "soft_lookup",
    "cell",
    ("sentence", "seed", "d_k", "token"),
    lambda i: f"Which key will the query {followed_word(i)} put the most weight on? Pick the cell of its row.",
    _lookup,
    options=lambda i: numbered(tokenize(str(i["sentence"]))),
)


# 2. Scores and softmax ---------------------------------------------------------------------------------------------
SOFTMAX_CHOICES = ("It rises", "It falls", "It stays the same")


def _double(inputs: Inputs) -> Truth:
    i = query_token(inputs)
    base = toy_result(inputs, mask="none")
    doubled = toy_result(inputs, mask="none", scale="temperature", temperature=base.scale / 2)  # omega·2/√d_k
    before, after = float(base.weights[0, i].max()), float(doubled.weights[0, i].max())
    change = 0 if after > before + 1e-6 else 1 if after < before - 1e-6 else 2
    why = (
        "Doubling every score doubles the gaps between them, and the softmax turns gaps into ratios of e^gap: the "
        "winner takes more."
        if change == 0
        else "With one key there is nothing to take weight from: the only weight is 1 whatever the score."
        if len(base.key_tokens) == 1
        else "The scores of this row are all equal: doubled, they are still equal, and so are the weights."
    )
    return Truth(change, f"{SOFTMAX_CHOICES[change].lower()}: {before:.3f} → {after:.3f}", why)


SOFTMAX = Question(
    "softmax",
    "choice",
    ("sentence", "seed", "d_k", "token"),
    lambda i: (
        f"Double every score (omega × 2) before the softmax: does the largest weight of {followed_word(i)}'s row "
        "rise or fall?"
    ),
    _double,
    options=lambda i: SOFTMAX_CHOICES,
)


# 3. Why divide by √d_k --------------------------------------------------------------------------------------------
SWEEP_SEEDS = 8


def _spread(inputs: Inputs) -> Truth:
    d_k = int(inputs["d_k"])
    t = min(max(len(tokenize(str(inputs["sentence"]))), 2), 32)  # the Scaling page's sweep length
    seed = int(inputs["seed"])
    sweep = scaling.scaling_sweep((d_k,), seeds=range(seed, seed + SWEEP_SEEDS), tokens=t)
    spread = float(sweep.band("spread", "unscaled")[0])
    return Truth(round(spread, 2), f"{spread:.2f}",
                 f"q·k adds up {d_k} products of variance 1, so its variance is {d_k} and its spread √{d_k} = "
                 f"{math.sqrt(d_k):.2f}; dividing by √d_k brings it back to about 1.")  # fmt: skip


SCALING = Question(
    "scaling",
    "number",
    ("sentence", "seed", "d_k"),
    lambda i: (
        f"q and k have d_k = {int(i['d_k'])} numbers, each drawn from N(0, 1). Before any scaling, what is the "
        "spread (standard deviation) of the scores q·k?"
    ),
    _spread,
    lo=0,
    hi=1000,
    tolerance=0.2,
    relative=True,
)


# 4. Masks ---------------------------------------------------------------------------------------------------------
def _zeros(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    t = len(result.tokens)
    blocked = int((~result.mask).sum())
    return Truth(blocked, f"{blocked} of {t * t}",
                 f"Each blocked score is −∞ before the softmax, and e^−∞ = 0 exactly: under the {result.config.mask} "
                 f"mask {blocked} of the {t} × {t} weights are zero.")  # fmt: skip


MASKS = Question(
    "masks",
    "number",
    ("sentence", "mask", "window", "padding"),
    lambda i: (
        f"Under the {i['mask']} mask, how many of the {len(tokenize(str(i['sentence'])))} × "
        f"{len(tokenize(str(i['sentence'])))} softmax weights are exactly zero?"
    ),
    _zeros,
    lo=0,
    hi=512 * 512,
    defaults={"mask": "causal"},
    bounds=lambda i: (0, len(tokenize(str(i["sentence"]))) ** 2),
)


# 5. Several heads -------------------------------------------------------------------------------------------------
def _favourites(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    i = query_token(inputs)
    keys = numbered(result.key_tokens)
    tops = [int(result.weights[h, i].argmax()) for h in range(result.heads)]
    n = len(set(tops))
    listed = ", ".join(f"head {h + 1}: {keys[j]}" for h, j in enumerate(tops))
    return Truth(n, str(n), f"Each head has its own W_q and W_k, so its own idea of a match ({listed}).")


MULTI_HEAD = Question(
    "multi_head",
    "number",
    ("sentence", "seed", "d_k", "heads", "token"),
    lambda i: (
        f"{int(i['heads'])} heads each pick the key they weigh most for the query {followed_word(i)}. How many "
        "different keys are picked?"
    ),
    _favourites,
    lo=1,
    hi=16,
    defaults={"heads": 4},
    bounds=lambda i: (1, int(i["heads"])),
)


# 6. Where words are -----------------------------------------------------------------------------------------------
POSITION_CHOICES = ("The same rows, only reordered", "Different numbers")


def _shuffle(inputs: Inputs) -> Truth:
    tokens = tokenize(str(inputs["sentence"]))
    perm = permutation.shuffled_order(tokens, seed=0)
    pinned = {"mask": "none"}
    context = toy_result(inputs, **pinned).context
    shuffled = toy_result(inputs, sentence=" ".join(permutation.apply_order(tokens, perm)), **pinned).context
    check = permutation.permutation_check(context, shuffled, perm)
    k = 0 if check.equivariant else 1
    why = (
        "Without positions attention sees a bag of words: each word's context is the same, wherever it stands "
        f"(largest difference {check.max_difference:.1g})."
        if k == 0
        else f"The {inputs['position']} encoding tells the words apart by where they stand, so a word's context "
        f"changes with the order (largest difference {check.max_difference:.2g})."
    )
    return Truth(k, POSITION_CHOICES[k].lower(), why)


POSITION = Question(
    "position",
    "choice",
    ("sentence", "seed", "d_k", "position"),
    lambda i: (
        f"Shuffle the words of the sentence (position encoding: {i['position']}). Each word's context "
        "vector: the same numbers, only in another row, or different numbers?"
    ),
    _shuffle,
    options=lambda i: POSITION_CHOICES,
    defaults={"position": "rope"},
)


# 7. Cross-attention -----------------------------------------------------------------------------------------------
def _columns(inputs: Inputs) -> Truth:
    result = toy_result(inputs, cross_sentence=str(inputs["cross_sentence"]))
    t_q, t_k = result.weights.shape[-2:]
    return Truth(int(t_k), str(int(t_k)),
                 f"Queries come from the first sentence ({t_q} rows), keys and values from the second: one column "
                 f"per key, {t_k}, whatever the length of the first.")  # fmt: skip


CROSS = Question(
    "cross_attention",
    "number",
    ("sentence", "cross_sentence", "seed", "d_k"),
    lambda i: (
        f"Queries from “{str(i['sentence'])[:60]}”, keys and values from “{str(i['cross_sentence'])[:60]}”. "
        "How many columns does the weight matrix have?"
    ),
    _columns,
    lo=1,
    hi=512,
)


# 8. Grouped-query heads and the KV cache ---------------------------------------------------------------------------
def _cache(inputs: Inputs) -> Truth:
    model = kv_memory.MODELS[str(inputs["kv_model"])]
    numbers = model.cache_bytes(1, bytes_per_number=1)
    full = model.cache_bytes(1, bytes_per_number=1, kv_heads=model.heads)
    shared = (f"its {model.heads} query heads share {model.kv_heads} K/V heads, {model.heads // model.kv_heads}× "
              f"fewer than the {full:,} of one K/V head a query head" if model.kv_heads < model.heads
              else "every query head keeps its own K/V head")  # fmt: skip
    return Truth(numbers, f"{numbers:,}",
                 f"{model.layers} layers × {model.kv_heads} K/V heads × {model.d_head} numbers × 2 (a key and a "
                 f"value): {shared}.")  # fmt: skip


KV_CACHE = Question(
    "kv_cache",
    "number",
    ("kv_model",),
    lambda i: (
        f"How many numbers does {i['kv_model']}'s KV cache hold for each token of the context (every layer, "
        "keys and values)?"
    ),
    _cache,
    lo=1,
    hi=1e9,
    tolerance=0.05,
    relative=True,
)


# 9. FlashAttention's tiles ----------------------------------------------------------------------------------------
def _tiles(inputs: Inputs) -> Truth:
    n = len(tokenize(str(inputs["sentence"])))
    size = min(int(inputs["block_size"]), n)
    memory = flash.memory_numbers(n, n, size, int(inputs["heads"]))
    held = memory.tile_scores + memory.statistics
    return Truth(held, f"{held:,} (the ordinary form: {memory.full_scores:,})",
                 f"One tile of {size} × {size} scores and two numbers (m and l) for each of the {n} rows: "
                 f"{memory.tile_scores:,} + {memory.statistics:,}.")  # fmt: skip


FLASH = Question(
    "flash_attention",
    "number",
    ("sentence", "block_size", "heads"),
    lambda i: (
        f"Tiles of {int(i['block_size'])} × {int(i['block_size'])} over {len(tokenize(str(i['sentence'])))} "
        "tokens: how many score numbers does the tiled form hold at once, the running max m and sum l included?"
    ),
    _tiles,
    lo=0,
    hi=1e9,
    tolerance=0.1,
    relative=True,
)
