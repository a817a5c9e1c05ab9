"""What a computation will hold in memory, known from its Config before anything is computed.

A Result keeps every intermediate, so its size follows from the shapes alone (float32, 4 bytes a number):

    score matrices   omega, scaled, masked, weights, dropped weights, ALiBi's bias    h x T_q x T_k each
    vectors          queries, keys, values (twice with RoPE), context, concat         h x T x d_k or d_v each
    inputs, weights  x, W_query, W_key, W_value (W_out), the position table           d_model x ...

Tensors that are the same object in the Result (scaled is omega when nothing divides it, masked is scaled when
the mask blocks nothing, the dropped weights are the weights without dropout) are counted once, as their
storage is. `result_bytes` is an upper bound of the storages a Result holds (tests/unit/server/test_budget.py measures
them), and `compute_bytes` adds the largest temporary `compute` makes on the way (dropout's random draws,
RoPE's turned copies): the most the process gains while computing it.

What a page keeps of a Result (one head's matrices, a row) is `keep`: copies, so that the Result itself can be
let go of before the next one is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from .config import Config

if TYPE_CHECKING:
    from .core import Result

FLOAT = 4  # bytes of a float32
OVERHEAD = 16 << 10  # the Result's Python objects and the small tensors (slopes, positions): well under this


def _scaled_is_omega(config: Config) -> bool:
    """compute() returns omega itself as the scaled scores when nothing divides or shifts them."""
    from .core import scale_factor  # core imports this module's neighbours; a late import keeps the layers simple

    return scale_factor(config) == 1.0 and config.position != "alibi" and config.score_bias is None


def score_matrices(config: Config) -> int:
    """How many distinct (h, T_q, T_k) float matrices a Result of this config holds (2 to 6)."""
    count = 2  # omega and the softmax weights
    count += not _scaled_is_omega(config)
    count += config.mask != "none" or config.score_bias is not None  # masked: a copy unless nothing is blocked
    count += config.dropout > 0  # dropped weights: a copy
    count += config.position == "alibi"  # the bias
    return count


def result_bytes(config: Config) -> int:
    """Bytes of the tensors a Result of this config holds: an upper bound, within a few percent of the truth."""
    t_q, t_k = len(config.tokens), len(config.key_tokens)
    d_k, d_v = config.head_dims
    h, d, d_kv = config.heads, config.width, config.key_width
    rope = config.position == "rope"
    numbers = score_matrices(config) * h * t_q * t_k
    numbers += h * (t_q * d_k + t_k * (d_k + d_v))  # queries, keys, values
    numbers += h * (t_q + t_k) * d_k if rope else 0  # the queries and keys before RoPE turned them
    numbers += h * t_q * d_v * 2  # context, and the heads side by side (concat)
    numbers += t_q * config.out_width if config.out_proj else 0  # output (= concat without a projection)
    numbers += t_q * d + (t_k * d_kv if config.is_cross else 0)  # the inputs (+ the position table)
    numbers += max(t_q, t_k) * d if config.position in ("sinusoidal", "learned") else 0  # the table itself
    numbers += max(t_q, t_k) * d_k // 2 if rope else 0  # RoPE's angles
    numbers += d * h * d_k + d_kv * h * (d_k + d_v)  # W_query, and W_key, W_value as each query head reads them
    numbers += h * d_v * config.out_width + config.out_width if config.out_proj else 0
    numbers += 3 * h * max(d_k, d_v) if config.bias else 0
    masks = 2 * t_q * t_k + t_q  # the mask and a mask combined with a score bias (bool), the empty rows
    return FLOAT * numbers + masks + 8 * (t_q + t_k) + OVERHEAD


def _temporary_bytes(config: Config) -> int:
    """The largest temporary `compute` makes on the way (dropout's uniform draws and keep mask, a softmax redone
    for rows with every key blocked, or RoPE's turned copies of the queries and keys)."""
    t_q, t_k = len(config.tokens), len(config.key_tokens)
    d_k, _ = config.head_dims
    cells = config.heads * t_q * t_k
    scores = FLOAT * cells + (cells if config.dropout > 0 else 0)  # one matrix (+ dropout's bool keep mask)
    rope = 3 * FLOAT * config.heads * max(t_q, t_k) * d_k if config.position == "rope" else 0
    return max(scores, rope)


def compute_bytes(config: Config) -> int:
    """The most `compute` holds at once: the Result, and its largest temporary."""
    return size(config).peak


class Size(NamedTuple):
    """A run's memory, known from its Config: what its Result holds, and the most computing it holds at once."""

    held: int  # `result_bytes`
    peak: int  # `compute_bytes`: held plus the largest temporary


def size(config: Config) -> Size:
    """The run's `Size`, sized once: a caller that needs both numbers passes this along instead of sizing again."""
    held = result_bytes(config)
    return Size(held, held + _temporary_bytes(config))


def keep(value: Any) -> Any:
    """A copy of what a page keeps of a Result (tensors, and tuples, lists and dicts of them; anything else as
    it is), owning its own memory: a slice such as `result.weights[0, -1]` is a view that would otherwise keep
    the whole (h, T_q, T_k) matrix alive."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return type(value)(*(keep(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(keep(v) for v in value)
    if isinstance(value, dict):
        return {k: keep(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, eq=False)
class HeadView:
    """One head of a Result, copied: the matrices a page that draws several results keeps of each. The tensors
    keep a heads axis of length 1, so `view.weights[0]` is the head, and functions written for a Result that read
    only these fields (`lessons.compare.diff(a, b)`, `lessons.scaling.mean_row_stats`) take a view as well."""

    config: Config
    head: int  # which head of the Result this is
    heads: int  # how many the Result has
    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    scale: float
    mask: torch.Tensor  # (T_q, T_k) bool, True = may attend
    omega: torch.Tensor  # (1, T_q, T_k)
    weights: torch.Tensor  # (1, T_q, T_k)
    dropped_weights: torch.Tensor  # (1, T_q, T_k)
    context: torch.Tensor  # (1, T_q, d_v)

    @property
    def d_v(self) -> int:
        return self.context.shape[-1]


def one_head(result: Result, head: int) -> HeadView:
    """Head `head` of a Result as a HeadView: about 3 T_q T_k + T_q d_v numbers, where the Result holds h times that
    and every other intermediate."""
    one = slice(head, head + 1)
    return HeadView(
        result.config, head, result.heads, result.tokens, result.key_tokens, result.scale,
        result.mask.clone(), result.omega[one].clone(), result.weights[one].clone(),
        result.dropped_weights[one].clone(), result.context[one].clone(),
    )  # fmt: skip


def held_bytes(value: Any) -> int:
    """Bytes of the distinct tensor storages in a value (a Result, or what `keep` returned): what it holds."""
    storages: dict[int, int] = {}

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            s = v.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif hasattr(v, "__dataclass_fields__"):
            for name in v.__dataclass_fields__:
                walk(getattr(v, name))

    walk(value)
    return sum(storages.values())
