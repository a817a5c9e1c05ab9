"""How much memory an LLM's KV cache takes, and the published shapes of a few open models.

Generating with a cache keeps, for every layer, every K/V head and every token so far, one key and
one value of d_head numbers:

    bytes = 2 * layers * kv_heads * d_head * tokens * bytes_per_number      (one sequence)

(layers * kv_heads * (d_k + d_v) * tokens * bytes_per_number when keys and values differ in width, as the toy
pages' d_k = 24 and d_v = 28 do.)

Multi-head attention has kv_heads = heads; grouped-query attention (GQA) shares each K/V head among
heads / kv_heads query heads; multi-query attention (MQA) keeps one. The model shapes below are the
numbers in each model's config.json on the Hugging Face Hub (num_hidden_layers, num_attention_heads,
num_key_value_heads, hidden_size; d_head = hidden_size / num_attention_heads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..basics.params import Param
from .gqa import check_kv_heads

# bytes one number takes in the formats caches are kept in
BYTES_PER_NUMBER = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1}
# context lengths for a chart: 512, 1k, 2k, ..., 128k tokens
CONTEXTS = tuple(2**k for k in range(9, 18))


def kv_cache_bytes(
    layers: int, kv_heads: int, d_head: int, tokens: int, bytes_per_number: int = 2, *, d_v: int | None = None
) -> int:
    """layers * kv_heads * (d_k + d_v) * tokens * bytes_per_number, for one sequence: a key of d_k = d_head
    numbers and a value of d_v numbers (d_head unless given: 2 * d_head, as in every published model).

    bytes_per_number 2 is float16/bfloat16, the usual format for serving.
    """
    d_v = d_head if d_v is None else d_v
    sizes = {"layers": layers, "kv_heads": kv_heads, "d_head": d_head, "d_v": d_v, "bytes_per_number": bytes_per_number}
    for name, n in sizes.items():
        if n < 1:
            raise ValueError(f"{name} must be at least 1, got {n}")
    if tokens < 0:
        raise ValueError(f"tokens must be 0 or more, got {tokens}")
    return layers * kv_heads * (d_head + d_v) * tokens * bytes_per_number


@dataclass(frozen=True)
class ModelShape:
    """The attention shape of a published model, as its config.json gives it, with where it came from."""

    name: str
    layers: int  # num_hidden_layers
    heads: int  # num_attention_heads (query heads)
    kv_heads: int  # num_key_value_heads: heads for MHA, fewer for GQA, 1 for MQA
    d_model: int  # hidden_size
    context: int  # the context length the model was trained with, in tokens
    source: str  # URL of the config.json the numbers are read from
    paper: str  # URL of the paper or report that describes the model
    sliding_window: int | None = None  # sliding-window attention width, when the model uses one
    note: str = ""

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"{self.name}: hidden_size {self.d_model} is not a multiple of {self.heads} heads")
        check_kv_heads(self.heads, self.kv_heads)

    @property
    def d_head(self) -> int:
        """hidden_size / num_attention_heads: the width of each query, key and value head."""
        return self.d_model // self.heads

    @property
    def attention(self) -> str:
        """'MHA', 'GQA' or 'MQA', from the number of K/V heads."""
        return layout(self.heads, self.kv_heads)

    def cache_bytes(self, tokens: int, bytes_per_number: int = 2, *, kv_heads: int | None = None) -> int:
        """KV-cache bytes for `tokens` tokens of one sequence (with kv_heads K/V heads: the model's own if None)."""
        kv = self.kv_heads if kv_heads is None else kv_heads
        check_kv_heads(self.heads, kv)
        return kv_cache_bytes(self.layers, kv, self.d_head, tokens, bytes_per_number)


MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape(
            name="Llama 2 7B",
            layers=32,
            heads=32,
            kv_heads=32,
            d_model=4096,
            context=4096,
            source="https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
            paper="https://arxiv.org/abs/2307.09288",
            note="multi-head attention: one K/V head per query head",
        ),
        ModelShape(
            name="Llama 2 70B",
            layers=80,
            heads=64,
            kv_heads=8,
            d_model=8192,
            context=4096,
            source="https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json",
            paper="https://arxiv.org/abs/2307.09288",
            note="grouped-query attention: 8 query heads a K/V head",
        ),
        ModelShape(
            name="Llama 3 8B",
            layers=32,
            heads=32,
            kv_heads=8,
            d_model=4096,
            context=8192,
            source="https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
            paper="https://arxiv.org/abs/2407.21783",
            note="grouped-query attention: 4 query heads a K/V head",
        ),
        ModelShape(
            name="Mistral 7B",
            layers=32,
            heads=32,
            kv_heads=8,
            d_model=4096,
            context=8192,
            source="https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
            paper="https://arxiv.org/abs/2310.06825",
            sliding_window=4096,
            note="v0.1; grouped-query attention with a 4096-token sliding window, so a rolling cache never "
            "holds more than 4096 tokens (config.json's max_position_embeddings says 32768; the paper "
            "trained with 8192)",
        ),
        ModelShape(
            name="Falcon 7B",
            layers=32,
            heads=71,
            kv_heads=1,
            d_model=4544,
            context=2048,
            source="https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json",
            paper="https://arxiv.org/abs/2311.16867",
            note="multi-query attention: config.json sets multi_query true (its num_kv_heads field is ignored "
            "then); 71 query heads of 64 share one K/V head, and 71 is prime, so no grouping lies between",
        ),
    )
}


def layout(heads: int, kv_heads: int) -> str:
    """'MHA' when every query head has its own K/V head, 'MQA' when all share one, else 'GQA'."""
    check_kv_heads(heads, kv_heads)
    if kv_heads == heads:
        return "MHA"
    return "MQA" if kv_heads == 1 else "GQA"


class CachePoint(NamedTuple):
    """One point of a cache-size chart (a list of these makes a long-format table)."""

    layout: str  # "MHA", "GQA" or "MQA"
    kv_heads: int
    tokens: int
    bytes: int


def gqa_choice(model: ModelShape) -> int | None:
    """The K/V heads to chart as GQA: the model's own if it is GQA, else 8 if 8 divides heads, else None."""
    if model.attention == "GQA":
        return model.kv_heads
    if model.heads > 8 and model.heads % 8 == 0:
        return 8  # Llama 2 70B's and Llama 3's choice
    return None


def cache_series(
    model: ModelShape,
    tokens: Sequence[int] = CONTEXTS,
    *,
    bytes_per_number: int = 2,
    gqa_kv_heads: int | None = None,
) -> list[CachePoint]:
    """Cache bytes against context length for the model's shape as MHA, GQA and MQA.

    MHA keeps `heads` K/V heads, MQA one, GQA `gqa_kv_heads` (default `gqa_choice(model)`; left out
    when no number of K/V heads lies strictly between, as for a prime number of heads).
    """
    gqa = gqa_choice(model) if gqa_kv_heads is None else gqa_kv_heads
    if gqa is not None and layout(model.heads, gqa) != "GQA":
        raise ValueError(
            f"gqa_kv_heads={gqa} is not grouped-query attention for {model.heads} heads: pick a divisor of "
            f"{model.heads} strictly between 1 and {model.heads}"
        )
    layouts = {"MHA": model.heads, "GQA": gqa, "MQA": 1}
    if model.heads == 1:
        layouts = {"MHA": 1}  # one head: MHA and MQA are the same thing
    return [
        CachePoint(name, kv, n, model.cache_bytes(n, bytes_per_number, kv_heads=kv))
        for name, kv in layouts.items()
        if kv is not None
        for n in tokens
    ]


def format_bytes(n: int) -> str:
    """Binary units with two decimals: 2147483648 -> '2.00 GiB', 1000 -> '1000 B'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    size, i = float(n), 0
    while size >= 1024 and i < len(units) - 1:
        size, i = size / 1024, i + 1
    return f"{n} B" if i == 0 else f"{size:.2f} {units[i]}"


# The KV cache page's settings (URL keys kv_dtype, kv_model): the number format and the published model it sizes
SETTINGS: dict[str, Param] = {
    "kv_dtype": Param("choice", "Number format", "How many bytes each cached number takes.", default="float16",
                      choices=tuple(BYTES_PER_NUMBER)),
    "kv_model": Param("choice", "A published model", "Whose KV cache the chart sizes.",
                      default=next(iter(MODELS)), choices=tuple(MODELS)),
}  # fmt: skip
