"""The course's lessons in order: which page, why it matters, the question, the figure that answers it (figures.py),
one change to try next, and for the instructor what to say at the reveal and a common wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attention.lessons import course
from attention.lessons.course import Question
from attention.llm import kv_memory

from . import figures, runs
from .figures import n_tokens
from .outline import ENTRY


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    page: str  # the page whose computation the lesson uses
    page_title: str
    minutes: int
    why: str  # two or three sentences: why it matters
    question: Question
    figure: Callable[[dict[str, Any]], None]  # draws what answers the question, from the package's results
    now_try: Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]  # one change to try: its words and values
    controls: tuple[str, ...] = ()  # the inputs the lesson offers to change (the sentence first)
    # a lesson whose answer needs a run that takes a while (a training): None once it is ready, else what it waits
    # for in words (the reveal shows them and waits)
    ready: Callable[[dict[str, Any]], str | None] | None = None
    # what the wait shows, once the prediction is in, while the run trains (the loss so far)
    so_far: Callable[[dict[str, Any]], None] | None = None


def _next_token(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    t = (course.query_token(i) + 1) % max(n_tokens(i), 1)
    return f"Follow token {t + 1} instead", {"token": t}


def _repeat_word(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A second copy of the query's word: its key is the first copy's, so the two scores are equal, and they stay
    equal when doubled (e^0 = 1) while every gap to the others grows: only differences matter to the softmax."""
    tokens = course.tokenize(str(i["sentence"]))
    word = tokens[course.query_token(i)] if tokens else "the"
    return (f"Add a second “{word}”: do its two equal scores stay equal when doubled?",
            {"sentence": f"{str(i['sentence']).rstrip()} {word}"})  # fmt: skip


def _times_four(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    d = int(i["d_k"])
    new = d * 4 if d * 4 <= 256 else max(d // 4, 1)
    return f"Set d_k = {new}: what spread does the law give now?", {"d_k": new}


def _window(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if i["mask"] == "window":
        return "Try the causal mask", {"mask": "causal"}
    return "Try a sliding window of 2", {"mask": "window", "window": 2}


def _more_heads(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = 8 if int(i["heads"]) < 8 else 2
    return f"Try {new} heads", {"heads": new}


def _other_position(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = "none" if i["position"] != "none" else "rope"
    return f"Try position = {new}", {"position": new}


def _swap(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "Swap the two sentences", {"sentence": i["cross_sentence"], "cross_sentence": i["sentence"]}


def _other_model(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    names = list(kv_memory.MODELS)
    new = names[(names.index(i["kv_model"]) + 1) % len(names)]
    return f"Try {new}", {"kv_model": new}


def _bigger_block(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = min(int(i["block_size"]) * 2, max(n_tokens(i), 1))
    new = new if new != int(i["block_size"]) else 1
    return f"Try a block size of {new}", {"block_size": new}


def _other_layer(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = (int(i["layer"]) + 2) % 6
    return f"Try layer {new + 1}, the same head", {"layer": new}


def _next_copy(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    n = course.INDUCTION_LENGTH
    t = course.induction_query(i)
    new = t - n if t >= n else t + n
    where = "first" if new < n else "second"
    return f"Follow token {new + 1}, the same token in the {where} copy", {"token": new}


def _next_seed(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = int(i["train_seed"]) + 1
    return f"Train with seed {new}: near which step does the loss fall fastest now?", {"train_seed": new}


def _seed_for_heads(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = int(i["train_seed"]) + 1
    return f"Train with seed {new}: which head of layer 1 do the keys read now?", {"train_seed": new}


Q = course.QUESTIONS
LESSONS: tuple[Lesson, ...] = (
    Lesson(*ENTRY["soft_lookup"],
           "A dictionary returns the value of the one key that matches; attention returns every value at once, each "
           "scaled by how well its key matches. Every later lesson is this weighted average with another twist.",
           Q["soft_lookup"], figures.lookup, _next_token, ("sentence", "seed")),
    Lesson(*ENTRY["softmax"],
           "The softmax turns any row of scores into weights that are positive and sum to 1. How sharp they come out "
           "depends on the size of the gaps between the scores, not on the scores themselves.",
           Q["softmax"], figures.doubled, _repeat_word, ("sentence", "seed")),
    Lesson(*ENTRY["scaling"],
           "Wider queries and keys give bigger dot products. Unscaled, the softmax of a wide model turns into a hard "
           "max and stops learning; the √d_k in every transformer is what keeps it soft.",
           Q["scaling"], figures.scaling, _times_four, ("sentence", "d_k", "seed")),
    Lesson(*ENTRY["masks"],
           "A mask decides what each token may look at: a chat model must not read the future, a padded batch must "
           "not read its padding. It acts on the scores, so the weights it blocks are exactly zero.",
           Q["masks"], figures.masks, _window, ("sentence", "mask")),
    Lesson(*ENTRY["multi_head"],
           "One head computes one weighted average; a model runs many side by side, each with its own projections, "
           "so each can look for something else.",
           Q["multi_head"], figures.heads, _more_heads, ("sentence", "heads", "seed")),
    Lesson(*ENTRY["position"],
           "Attention by itself sees a bag of words: shuffle them and each word gets the same context. Positions "
           "are what let a model tell 'dog bites man' from 'man bites dog'.",
           Q["position"], figures.position, _other_position, ("sentence", "position")),
    Lesson(*ENTRY["cross_attention"],
           "A translator's decoder asks questions of another sentence: queries from one, keys and values from the "
           "other. It is the general case; self-attention passes the same sentence twice.",
           Q["cross_attention"], figures.cross, _swap, ("sentence", "cross_sentence")),
    Lesson(*ENTRY["kv_cache"],
           "A chat model keeps every earlier token's keys and values so it computes one new row a step; that cache, "
           "not the weights, fills a GPU on long chats. Grouped-query heads share keys and values to shrink it.",
           Q["kv_cache"], figures.cache, _other_model, ("kv_model",)),
    Lesson(*ENTRY["flash_attention"],
           "The T × T scores of a long context do not fit in fast memory. FlashAttention visits them a tile at a time "
           "with a running max and sum, and still gets exactly the softmax.",
           Q["flash_attention"], figures.tiles, _bigger_block, ("sentence", "block_size")),
    Lesson(*ENTRY["real_model"],
           "A trained model computes exactly what the toy pages compute, with learned weights. Its heads are not "
           "all reading: many park their weight on the special tokens, and a weight is not the same as an effect.",
           Q["real_model"], figures.encoder, _other_layer, ("sentence", "layer", "head")),
    Lesson(*ENTRY["chat_model"],
           "A chat model that has read a phrase once can continue it the second time: an induction head finds the "
           "earlier copy of the current token and reads what followed. Heads with nothing to read park their weight "
           "on the first token, which is why a cache that drops old tokens keeps the first.",
           Q["chat_model"], figures.induction, _next_copy, ("seed", "token")),
    Lesson(*ENTRY["watch_it_learn"],
           "Training does not improve a model evenly: for many steps the loss barely moves, then a head finds the "
           "pattern and it falls off a cliff. The induction head of lesson 11 forms this way, in a model small "
           "enough to train while you watch.",
           Q["watch_it_learn"], figures.fall, _next_seed, ("train_seed",), ready=runs.training_wait,
           so_far=figures.fall_so_far),
    Lesson(*ENTRY["two_layers"],
           "An induction head cannot work alone. To find the token after the earlier copy, its keys must know which "
           "token came before each of them, and a token's stream holds only its own token until a head of an "
           "earlier layer writes the one before into it. Two heads in two layers make one circuit: that is why the "
           "model of lesson 12 needs two layers.",
           Q["two_layers"], figures.composition, _seed_for_heads, ("train_seed",), ready=runs.training_wait,
           so_far=figures.fall_so_far),
)  # fmt: skip
# For the instructor: what to say at the reveal, and a common wrong answer with why people give it (the lesson plans
# in docs/course/ are written from these by scripts/lesson_plans.py; presenter mode shows "Say" at the reveal).
PLANS: dict[str, tuple[str, str]] = {
    "soft_lookup": (
        "The query did not pick one key: every key got some weight, and the context is their blend. The biggest "
        "bar is the key whose vector points most the way the query does.",
        "“Itself” (the query's own word). Self-attention does not favour the diagonal: with random projections "
        "q·k of a word with itself is no larger than with any other.",
    ),
    "softmax": (
        "The softmax only sees differences between scores. Doubling them doubles every gap, and a gap becomes a "
        "ratio e^gap between weights: the largest weight grows, the others shrink.",
        "“It stays the same: the weights are normalised anyway.” Normalising divides by the sum, but the sum of "
        "exponentials does not scale like the scores; only adding a constant leaves the weights alone.",
    ),
    "scaling": (
        "A dot product of d_k random products has variance d_k, so its spread is √d_k. That is exactly the "
        "number every transformer divides by, to bring the spread back to 1 whatever the width.",
        "d_k itself (the variance, not the spread), or 1 (the spread after the scaling). Ask which of the two "
        "the softmax would see without the √d_k.",
    ),
    "masks": (
        "Blocked scores become −∞, and e^−∞ is exactly 0: these weights are not small, they are zero. A causal "
        "mask blocks the triangle above the diagonal: T(T − 1)/2 cells.",
        "Half of the cells, T²/2: the diagonal stays open (a token may read itself), so it is T(T − 1)/2.",
    ),
    "multi_head": (
        "Each head has its own W_q and W_k, so each has its own idea of a match. Several heads can look for "
        "several things at once; a trained model makes them specialise.",
        "“One: they all see the same sentence.” They see the same tokens through different projections, so their "
        "favourite keys usually differ.",
    ),
    "position": (
        "Without positions attention is a function of a set: shuffle the words and every word's context moves "
        "with it, unchanged. A position encoding is what makes order matter.",
        "“Different: the sentence means something else.” Not to attention without positions: it cannot see the "
        "order, only which words are there.",
    ),
    "cross_attention": (
        "A row per query, a column per key: the queries come from one sentence, the keys and values from the "
        "other, and the two lengths need not match.",
        "The length of the query sentence (a square matrix, as in self-attention).",
    ),
    "kv_cache": (
        "Every token keeps a key and a value of d_head numbers per K/V head per layer. Grouped-query attention "
        "shares K/V heads between query heads, which divides the cache by the group size.",
        "Counting the query heads instead of the K/V heads (too big for a GQA model), or forgetting the values "
        "(half the answer).",
    ),
    "real_model": (
        "Trained heads do not spread their weight evenly: many send most of it to [CLS] and [SEP] whatever the "
        "sentence. Those tokens act as a place to park attention; their values barely move the output.",
        "“Under a quarter: two tokens out of a dozen get their fair share.” A trained head is not uniform; the "
        "special tokens are sinks, not just two more words.",
    ),
    "chat_model": (
        "The induction head does not look at the earlier copy of the token: it looks one further, at what came "
        "next, and that is the token the model will predict. The bright first column is the sink: heads park "
        "weight there when they have nothing to read.",
        "The earlier copy of the same token (one cell to the left of the right answer): finding it is half the "
        "circuit; the head reads the token after it, which a previous-token head below has marked.",
    ),
    "watch_it_learn": (
        "For many steps the loss sits near chance while the heads look at nothing useful; then, in a few dozen "
        "steps, a head in layer 1 learns to read the token after the earlier copy and the loss drops: a phase "
        "change, not a slow slope.",
        "“Slowly, a little every step” (as a learning curve in a textbook). Here the model cannot predict the "
        "repeat until two heads in two layers work together, so nothing pays off until both have formed.",
    ),
    "two_layers": (
        "The induction head's keys read what the previous-token head of layer 1 wrote: each token's stream now "
        "also says which token came before it, so the query ‘I am a B’ finds the key ‘a B came before me’. The K "
        "column is bright for that head alone.",
        "The head its queries read (Q): the query does carry the current token, but the match needs the token "
        "before each key, and that lives in the keys. Or its values (V): the head copies the key's own token, "
        "which the stream held from the start.",
    ),
    "flash_attention": (
        "The tiled form holds one tile of scores and two numbers per row (the running max and sum); the "
        "ordinary form holds the whole T × T. The longer the text, the bigger the saving.",
        "The whole T × T: “it must compute every score, so it must hold every score”. It computes them all, "
        "a tile at a time, and forgets each tile once it is folded into the running output.",
    ),
}
BY_ID = {lesson.id: lesson for lesson in LESSONS}
BY_PAGE = {lesson.page: lesson for lesson in reversed(LESSONS)}  # a page's first lesson (Watch it learn: lesson 12)
