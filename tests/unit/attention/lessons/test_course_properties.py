"""Property tests of the course's questions (issue 43), one a lesson, over the values its page's controls can take.

For each lesson the test draws inputs (hypothesis) and works the answer out itself from the prompt's own words: the
counts, shapes, √d_k, cache sizes and tile sizes by hand, the toy weights' choices from attention.compute's queries and
keys (torch directly, not the lesson's code), the models' from their own forward pass. Then: the right answer is
marked right, each misconception the question lists is marked wrong unless it gives the right answer, the
misconceptions the issue names are listed, and a malformed answer is asked again (ok None). Inputs a question cannot
be asked on get one sentence, never an exception. The models' lessons (SmolLM2, a tiny training) are `thorough`.
"""

from __future__ import annotations

import functools
import math
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention import compute
from attention.basics.config import SETTINGS, Config
from attention.lessons import course
from attention.llm import kv_memory
from attention.models import minilm, smollm2, tiny

Q = course.QUESTIONS
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -------------------------------------------------------------------------------------------- the controls' values
WORDS = ("the", "cat", "sat", "on", "a", "mat", "it", "was", "tired", "dog", "bites", "man", "Life", "is", "short")
word = st.tuples(st.sampled_from(WORDS), st.sampled_from(("", "", "", ",", ".", "!"))).map("".join)
sentence = st.lists(word, min_size=1, max_size=14).map(" ".join)
unaskable = st.sampled_from(
    ("", "   ", "... !!", ", . ;", " ".join(["w"] * 513), " ".join(f"w{k}" for k in range(600)))
)
seed = st.integers(0, 9999)
d_k = st.integers(1, 256)
token = st.integers(0, 511)
POSITIONS = SETTINGS["position"].choices


def tokens_of(text: str) -> list[str]:
    """The prompt's own rule: one token a word, punctuation at word ends dropped."""
    return [w for w in (w.strip(",.;:!?") for w in text.split()) if w]


def toy(**fields) -> Config:
    """The dashboard's starting values (SETTINGS' own), with these fields: the weights the prompt names."""
    start = {n: p.start for n, p in SETTINGS.items() if p.dashboard is not None and p.kind in ("int", "float", "bool",
             "choice")}  # fmt: skip
    start.pop("kv_heads", None)
    return Config(**{**start, "dropout": 0.0, **fields})


def omega64(config: Config) -> torch.Tensor:
    """Q Kᵀ of every head in float64, from the computation's own queries and keys: (h, T, T)."""
    r = compute(config)
    return r.queries.double() @ r.keys.double().transpose(-1, -2)


# -------------------------------------------------------------------------------------------- the checks
def verdict(q, inputs, raw):
    v = q.check(inputs, raw)
    assert v.ok is not None or v.message, v
    return v


def graded(q, inputs, right, accepted=None):
    """The right answer right; each listed misconception wrong unless it gives the right answer; malformed asked
    again. `accepted`: every answer that counts (a choice's ties), by default the right one alone."""
    assert q.problem(inputs) is None, q.problem(inputs)
    accepted = {right} if accepted is None else set(accepted)
    raw = f"{right:.10g}" if q.kind == "number" else right
    v = verdict(q, inputs, raw)
    assert v.ok is True, v.message
    assert v.message.startswith("Right")
    for name, value in q.wrong_answers(inputs).items():
        if q.kind == "number":
            coincides = any(abs(float(value) - float(a)) <= 1e-9 for a in accepted)
            lo, hi = q.range(inputs)
            if not lo <= value <= hi:
                assert verdict(q, inputs, f"{value:.10g}").ok is None
                continue
            got = verdict(q, inputs, f"{value:.10g}").ok
        else:
            coincides = value in accepted
            got = verdict(q, inputs, int(value)).ok
        assert got is coincides, (name, value, right, q.prompt(inputs))
    malformed(q, inputs)


def malformed(q, inputs):
    if q.kind == "number":
        lo, hi = q.range(inputs)
        for raw in ("", "  ", "twelve", "nan", "inf", f"{hi * 2 + 1:g}", f"{lo - 1:g}"):
            v = q.check(inputs, raw)
            assert v.ok is None and v.message and "a number from" in v.message, (raw, v)
    else:
        for raw in (None, "", -1, len(q.choices(inputs)), "no such answer"):
            v = q.check(inputs, raw)
            assert v.ok is None and "Pick one" in v.message, (raw, v)


def refused(q, inputs):
    """One sentence, never an exception: the prompt says it, the check asks again, the answer grades nothing."""
    problem = q.problem(inputs)
    assert problem and problem.endswith(".") and len(problem) < 300
    assert q.prompt(inputs) == problem
    assert q.answer(inputs).value is None and q.answer(inputs).why == problem
    v = q.check(inputs, "1" if q.kind == "number" else 0)
    assert v.ok is None and v.message == problem


def lists(q, inputs, value, why=""):
    """The question lists a misconception that gives `value` (the issue's named ones)."""
    assert any(abs(float(v) - float(value)) < 1e-9 for v in q.wrong_answers(inputs).values()), (why, value)


def inputs(qid, **given):
    return course.inputs_for(Q[qid], given)


# -------------------------------------------------------------------------------------------- 1. soft lookup
@FAST
@given(sentence, seed, d_k, token)
def test_soft_lookup(s, sd, dk, tk):
    i = inputs("soft_lookup", sentence=s, seed=sd, d_k=dk, token=tk)
    q = Q["soft_lookup"]
    t = min(tk, len(tokens_of(s)) - 1)
    prompt = q.prompt(i)
    assert f"seed {sd}" in prompt and f"d_k = {dk}" in prompt and f"(token {t + 1})" in prompt
    row = torch.softmax(omega64(toy(sentence=s, seed=sd, d_k=dk))[0, t] / math.sqrt(dk), -1)
    ties = {int(j) for j in torch.nonzero(row >= row.max() - 1e-6).flatten()}
    graded(q, i, int(row.argmax()), ties)
    lists(q, i, t, "the query's own word")


# -------------------------------------------------------------------------------------------- 2. softmax
@FAST
@given(sentence, seed, d_k, token)
def test_softmax(s, sd, dk, tk):
    i = inputs("softmax", sentence=s, seed=sd, d_k=dk, token=tk)
    q = Q["softmax"]
    t = min(tk, len(tokens_of(s)) - 1)
    row = omega64(toy(sentence=s, seed=sd, d_k=dk, mask="none"))[0, t] / math.sqrt(dk)
    before, after = float(torch.softmax(row, -1).max()), float(torch.softmax(2 * row, -1).max())
    right = 0 if after > before + 1e-12 else 1 if after < before - 1e-12 else 2
    assert right != 1  # doubling never lowers the largest weight
    graded(q, i, right)
    lists(q, i, 2, "it stays the same")


# -------------------------------------------------------------------------------------------- 3. scaling
@FAST
@given(st.one_of(sentence, unaskable), seed, d_k)
def test_scaling_grades_the_law(s, sd, dk):
    i = inputs("scaling", sentence=s, seed=sd, d_k=dk)
    q = Q["scaling"]
    prompt = q.prompt(i)
    assert f"d_k = {dk} number" in prompt and "law" in prompt  # the law is asked, and the prompt says so
    graded(q, i, math.sqrt(dk))
    lists(q, i, dk, "d_k for √d_k")
    assert q.check(i, str(dk)).ok is (dk == 1)  # d_k is right only where it is √d_k


# -------------------------------------------------------------------------------------------- 4. masks
masks = st.sampled_from(("none", "causal", "padding", "window"))


def blocked(n: int, kind: str, window: int, padding: int) -> int:
    if kind == "none":
        return 0
    if kind == "causal":
        return n * (n - 1) // 2
    if kind == "padding":
        return n * min(padding, n)
    return sum(n - min(i + 1, window) for i in range(n))  # query i sees keys i - w + 1 .. i


@FAST
@given(sentence, masks, st.integers(1, 512), st.integers(0, 512))
def test_masks(s, kind, w, p):
    i = inputs("masks", sentence=s, mask=kind, window=w, padding=p)
    q = Q["masks"]
    n = len(tokens_of(s))
    prompt = q.prompt(i)
    assert f"{n} × {n}" in prompt
    if kind == "window":
        assert f"window of {w}" in prompt
    if kind == "padding":
        assert f"padding = {p}" in prompt
    right = blocked(n, kind, w, p)
    graded(q, i, right)
    lists(q, i, n * n - right, "the unmasked count")


@FAST
@given(st.one_of(sentence, unaskable))
def test_a_custom_mask_with_no_cells_is_refused_in_one_sentence(s):
    refused(Q["masks"], inputs("masks", sentence=s, mask="custom"))


# -------------------------------------------------------------------------------------------- 5. several heads
@FAST
@given(sentence, seed, d_k, st.integers(1, 16), token)
def test_multi_head(s, sd, dk, h, tk):
    i = inputs("multi_head", sentence=s, seed=sd, d_k=dk, heads=h, token=tk)
    q = Q["multi_head"]
    t = min(tk, len(tokens_of(s)) - 1)
    assert q.prompt(i).startswith(f"{h} head")
    rows = omega64(toy(sentence=s, seed=sd, d_k=dk, heads=h))[:, t]  # (h, T)
    graded(q, i, len({int(r.argmax()) for r in rows}))
    lists(q, i, h, "the heads count")
    lists(q, i, 1, "one key")


# -------------------------------------------------------------------------------------------- 6. position
@FAST
@given(sentence, seed, d_k, st.sampled_from(POSITIONS))
def test_position(s, sd, dk, kind):
    i = inputs("position", sentence=s, seed=sd, d_k=dk, position=kind)
    q = Q["position"]
    prompt = q.prompt(i)
    assert f"position encoding: {kind}" in prompt
    width = dk + 1 if kind == "rope" and dk % 2 else dk  # RoPE's pairs: the prompt says the width it runs at
    assert (f"run as {width}" in prompt) is (width != dk)
    quotes = re.findall(r"“([^”]*)”", prompt)
    words, shuffled = tokens_of(quotes[0]), tokens_of(quotes[-1])
    assert sorted(words) == sorted(shuffled)
    from attention.lessons.permutation import shuffled_order  # which shuffle: the one the prompt shows

    perm = shuffled_order(words, seed=0)
    assert [words[k] for k in perm.tolist()] == shuffled
    fields = {"seed": sd, "d_k": width, "position": kind, "mask": "none"}
    a = compute(toy(sentence=" ".join(words), **fields)).context.double()
    b = compute(toy(sentence=" ".join(shuffled), **fields)).context.double()
    difference = float((b - a[:, perm]).abs().max())
    same = difference <= 1e-5 * max(float(a.abs().max()), 1.0)
    if kind == "none":
        assert same
    graded(q, i, 0 if same else 1)


@FAST
@given(st.integers(0, 127).map(lambda k: 2 * k + 1), sentence)
def test_rope_with_an_odd_d_k_runs_one_wider_and_says_so(dk, s):
    q = Q["position"]
    i = inputs("position", sentence=s, d_k=dk, position="rope")
    assert q.problem(i) is None
    assert f"d_k = {dk}, run as {dk + 1}" in q.prompt(i)
    assert course.toy_config(i).d_k == dk + 1
    assert q.answer(i).value in (0, 1)


# -------------------------------------------------------------------------------------------- 7. cross-attention
@FAST
@given(sentence, st.lists(word, min_size=1, max_size=60).map(" ".join), seed, d_k)
def test_cross_attention(s, second, sd, dk):
    i = inputs("cross_attention", sentence=s, cross_sentence=second, seed=sd, d_k=dk)
    q = Q["cross_attention"]
    prompt = q.prompt(i)
    assert f"“{' '.join(second.split())}”" in prompt  # the whole second sentence, however long
    graded(q, i, len(tokens_of(second)))
    lists(q, i, len(tokens_of(s)), "the first sentence's length")


@FAST
@given(sentence, unaskable)
def test_a_second_sentence_with_no_words_is_refused(s, second):
    refused(Q["cross_attention"], inputs("cross_attention", sentence=s, cross_sentence=second))


# -------------------------------------------------------------------------------------------- 8. the KV cache
@FAST
@given(st.sampled_from(tuple(kv_memory.MODELS)))
def test_kv_cache(name):
    i = inputs("kv_cache", kv_model=name)
    q = Q["kv_cache"]
    m = kv_memory.MODELS[name]
    d_head = m.d_model // m.heads
    prompt = q.prompt(i)
    for number in (m.layers, m.kv_heads, d_head):  # the screen shows none of them before the answer
        assert re.search(rf"\b{number}\b", prompt), (number, prompt)
    right = m.layers * m.kv_heads * d_head * 2
    graded(q, i, right)
    lists(q, i, m.layers * m.heads * d_head * 2, "the query heads")


# -------------------------------------------------------------------------------------------- 9. FlashAttention
@FAST
@given(sentence, st.integers(1, 512))
def test_flash_attention(s, b):
    i = inputs("flash_attention", sentence=s, block_size=b)
    q = Q["flash_attention"]
    n = len(tokens_of(s))
    side = min(b, n)
    prompt = q.prompt(i)
    assert "One head" in prompt and f"{side} × {side}" in prompt and f"{n} tokens" in prompt
    if b > n:
        assert "wider than the sentence" in prompt
    graded(q, i, side * side + 2 * n)
    lists(q, i, n * n, "T² for tiles")


# -------------------------------------------------------------------------------------------- no question raises
TOY = ("soft_lookup", "softmax", "scaling", "masks", "multi_head", "position", "cross_attention", "flash_attention")


@FAST
@given(st.sampled_from(TOY), unaskable, seed, d_k, token, st.sampled_from(POSITIONS), st.integers(1, 512))
def test_a_sentence_with_no_words_or_too_many_gets_one_sentence(qid, s, sd, dk, tk, kind, b):
    q = Q[qid]
    i = course.inputs_for(q, {"sentence": s, "seed": sd, "d_k": dk, "token": tk, "position": kind,
                              "block_size": b})  # fmt: skip
    if qid == "scaling":  # the law needs no sentence
        assert q.problem(i) is None and q.check(i, str(math.sqrt(dk))).ok is True
    else:
        refused(q, i)


@FAST
@given(st.integers(0, 15), st.integers(0, 15), st.one_of(sentence, unaskable))
def test_the_encoders_layer_and_head_out_of_its_shape_are_refused_before_the_model_runs(layer, head, s):
    q = Q["real_model"]
    i = inputs("real_model", layer=layer, head=head, sentence=s)
    if layer > 5 or head > 11 or not tokens_of(s) or len(tokens_of(s)) > 512:
        refused(q, i)
    else:
        assert f"layer {layer + 1} of 6, head {head + 1} of 12" in q.prompt(i)  # counted from 1


# -------------------------------------------------------------------------------------------- the models' lessons
@functools.lru_cache(maxsize=4)
def smollm2_run(ids):
    return smollm2.run_ids(smollm2.load(), ids)


@functools.lru_cache(maxsize=4)
def trained(settings_):
    return tiny.train(settings_)


RUNS = {course.RUNS: {"smollm2": smollm2_run, "tiny": trained}}


@pytest.mark.thorough
@SLOW
@given(st.sampled_from(("The cat sat on the mat.", "Life is short, eat dessert first", "a b c d")),
       st.integers(0, 5), st.integers(0, 11))  # fmt: skip
def test_real_model(s, layer, head):
    i = inputs("real_model", sentence=s, layer=layer, head=head)
    q = Q["real_model"]
    run = minilm.forward(minilm.load(), s)  # the model's full forward pass, not the page's reading
    special = [k for k, t in enumerate(run.tokens) if t in ("[CLS]", "[SEP]")]
    share = float(run.weights[layer, head][:, special].sum(-1).mean())
    near = {min(int(x * 4), 3) for x in (share - 0.02, share, share + 0.02) if 0 <= x <= 1}
    graded(q, i, min(int(share * 4), 3), near)


@pytest.mark.thorough
@SLOW
@given(seed, st.integers(0, 39))
def test_chat_model(sd, tk):
    i = {**inputs("chat_model", seed=sd, token=tk), **RUNS}
    q = Q["chat_model"]
    n = course.INDUCTION_LENGTH
    assert f"From token {tk + 1} " in q.prompt(i)  # counted from 1
    ids = smollm2.induction_ids(smollm2.load(), n, seed=sd)
    w = smollm2_run(ids).weights  # (L, h, T, T)
    # the strongest induction head: the most weight, over the second copy, on the token after the earlier copy
    second = torch.arange(n, 2 * n)
    score = w[:, :, second, second - n + 1].mean(-1)
    layer, head = divmod(int(score.argmax()), score.shape[1])
    row = w[layer, head, tk, : tk + 1]
    ties = {int(j) for j in torch.nonzero(row >= row.max() - 1e-6).flatten()}
    graded(q, i, int(row.argmax()), ties)
    assert f"Layer {layer + 1}, head {head + 1}" in q.answer(i).why  # counted from 1


@pytest.mark.thorough
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 9999))
def test_watch_it_learn(sd):
    i = {**inputs("watch_it_learn", train_seed=sd), **RUNS}
    q = Q["watch_it_learn"]
    prompt = q.prompt(i)
    assert f"seed {sd}" in prompt and "±80 steps" in prompt and prompt.count("?") == 1  # one question, one box
    run = trained(course.lesson_settings(i))
    loss = torch.tensor([s.task_loss for s in run.snapshots], dtype=torch.float64)
    steps = torch.tensor([s.step for s in run.snapshots], dtype=torch.float64)
    right = int(steps[int((-torch.diff(loss) / torch.diff(steps)).argmax()) + 1])
    graded(q, i, right)


@pytest.mark.thorough
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 9999))
def test_two_layers(sd):
    from attention.models import circuits

    i = {**inputs("two_layers", train_seed=sd), **RUNS}
    q = Q["two_layers"]
    prompt = q.prompt(i)
    assert f"seed {sd}" in prompt and "layer 2" in prompt and prompt.count("?") == 1  # counted from 1
    assert q.choices(i) == ("Layer 1, head 1", "Layer 1, head 2")
    run = trained(course.lesson_settings(i))
    last, s = run.snapshots[-1], run.settings
    reader = max(range(s.heads), key=last.scores["induction"][1].__getitem__)  # the induction head, layer 2
    layers = last.weights.layers
    first, second = (circuits.split_heads(w.w_query, w.w_key, w.w_value, w.w_out, s.heads, s.heads) for w in layers)
    k = torch.tensor([circuits.reference(first, h, second, reader)["k"] for h in range(s.heads)])
    ties = {int(h) for h in torch.nonzero(k >= k.max() - course.two_layers.EDGE).flatten()}
    graded(q, i, int(k.argmax()), ties)
    assert f"Layer 2's head {reader + 1}" in q.answer(i).why
