"""A quantized matrix kept packed (4-bit integers) and multiplied packed by torch's CPU int4 kernel, to float32's
precision: a generation step reads each weight as 4 bits, never expanding the layer to float32.

torch's fast kernel, `_weight_int4pack_mm_for_cpu`, takes bfloat16 inputs, scales and zeros (weight =
(q - 8) * scale + zero per group of 32 inputs) and rounds its output to bfloat16 (8 significant bits); inside,
it dequantizes and accumulates in float32. Float32 results are recovered from it exactly enough for the oracle
tests (1e-4 on logits of 20) by splitting numbers into bfloat16 pieces, as double-double arithmetic does:

    x = x1 + x2 + x3               three bfloat16 pieces of a float32 input (8 + 8 + 8 of its 24 bits)
    d = d1 + d2                    each block's scale (float16, 11 bits) as two bfloat16 pieces
    w = d (q - 8) + (m + 8 d)      the block's integers q (0..15), centred, times d; the offset applied apart:
    x . w = sum_pieces (d_i (q - 8)) . x_j  +  (m + 8 d) . (sum of the block's inputs)   (float64, 1/32 the size)

A product rounded to bfloat16 on the way out is corrected by calling the kernel again with the rounded value
subtracted inside it, in float32, before the rounding: two extra groups of weights, all 8 (the kernel's zero),
whose "zero" is minus the rounded output, switched on for a row by a 1 among that row's extra inputs.

The layers' Q4_1 matrices pack as stored. The tied embedding (Q8_0, 8-bit) is not packed: the unembedding reads it
dequantized a chunk at a time (`decoder.unembed`)."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from .quantized import Quantized, integers
from .reader import Layer, Model

BLOCK = 32  # weights a scale covers, in the GGUF and in the kernel
_EXTRA = 2  # extra groups: a row's corrections (x1's and x2's; x1's second, in a call of its own)
_TILES = 8  # the kernel's inner K tiles (how it lays out the packed integers)
_BF16 = torch.bfloat16


@dataclass(frozen=True, eq=False)
class Packed:
    """A (out, in) matrix packed for `_weight_int4pack_mm_for_cpu`: its 4-bit integers (with `_EXTRA` groups of 8
    after them), the bfloat16 pieces of every group's scale and the float32 offset of every block."""

    weight: torch.Tensor  # the kernel's packed layout of (out, in + _EXTRA * 32) integers 0..15
    scale_zeros: tuple[torch.Tensor, torch.Tensor]  # d1's, d2's: (groups + _EXTRA, out, 2) bfloat16, zero 8 d_i
    offset: torch.Tensor  # (out, in / 32) float32: m + 8 d, the block's weight at q = 8, times its input sum
    shape: tuple[int, int]  # (out, in)
    # held while a call's corrections are written into the extra groups' zeros (in place, then cleared): a copy
    # of the table a call was 40 us each, 15 ms of a 110 ms step
    writing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.weight, *self.scale_zeros, self.offset))


def available() -> bool:
    """Whether this torch has the CPU int4 kernels (2.6 and later; the lock pins 2.13)."""
    ops = torch.ops.aten
    return hasattr(ops, "_weight_int4pack_mm_for_cpu") and hasattr(ops, "_convert_weight_to_int4pack_for_cpu")


def pack(w: Quantized) -> Packed:
    """A Q4_1 matrix as the kernel reads it; its numbers exactly (the pieces of d sum to d)."""
    if w.kind != "Q4_1":
        raise ValueError(f"only Q4_1 matrices pack; this one is {w.kind}")
    n, k = w.shape
    q, d, m = integers(w)  # (n, k) 0..15 as int32; (n, k/32) float32 d and m
    m = m + 8 * d  # the block's weight at q = 8, the kernel's zero point (two float16: exact in float32)
    q = torch.cat((q, torch.full((n, _EXTRA * BLOCK), 8, dtype=torch.int32)), dim=1)
    weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), _TILES)
    d1 = d.to(_BF16)
    d2 = (d - d1.float()).to(_BF16)
    if not torch.equal(d1.float() + d2.float(), d):  # pragma: no cover - float16 scales always split in two
        raise ValueError("a scale does not split into two bfloat16 numbers")
    return Packed(weight, (_scale_zeros(d1), _scale_zeros(d2)), m.contiguous(), (n, k))


def _scale_zeros(s: torch.Tensor) -> torch.Tensor:
    """(n, groups) bfloat16 scales -> the kernel's (groups + _EXTRA, n, 2): each group's scale and zero 0 (weights
    (q - 8) s, centred: exact in float32), then the extra groups' scale 0 and zero 0 (set per call)."""
    out = torch.zeros(s.shape[1] + _EXTRA, s.shape[0], 2, dtype=_BF16)
    out[: s.shape[1], :, 0] = s.T
    return out


def _kernel(a: torch.Tensor, p: Packed, which: int, zeros: torch.Tensor | None = None) -> torch.Tensor:
    """The kernel on rows a (bfloat16) with scales d1 (which 0) or d2 (1); zeros (e, n) set the first e extra
    groups' zero (the values a row subtracts where its extra input is 1) for this call only: written into the
    shared table under the matrix's lock and cleared after, so that a step running beside it never sees them."""
    sz = p.scale_zeros[which]
    if zeros is None:  # rows whose extra inputs are all 0: another call's corrections, written meanwhile, add 0
        return torch.ops.aten._weight_int4pack_mm_for_cpu(a, p.weight, BLOCK, sz)
    groups = sz.shape[0] - _EXTRA
    with p.writing:
        sz[groups : groups + zeros.shape[0], :, 1] = zeros
        try:
            return torch.ops.aten._weight_int4pack_mm_for_cpu(a, p.weight, BLOCK, sz)
        finally:
            sz[groups:, :, 1] = 0


def _extra_inputs() -> torch.Tensor:
    """The extra inputs of matvec's six rows (x1, x2; x1 and x2 corrected; x1 corrected twice, x3): which of the
    extra groups each row switches on (a 1 at the group's first input)."""
    on = torch.zeros(6, _EXTRA * BLOCK, dtype=_BF16)
    for row, group in ((2, 0), (3, 1), (4, 0), (4, 1)):
        on[row, group * BLOCK] = 1.0
    return on


_ROWS = torch.tensor([0, 1, 0, 1, 0, 2])  # the pieces x1, x2, x3 of matvec's six rows
_ON = _extra_inputs()


def matvec(x: torch.Tensor, p: Packed) -> torch.Tensor:
    """x @ W^T for one row x (1, in) float32 -> (1, out) float32, W packed: five kernel calls over the 4-bit
    weights (d1 three times: the product, its correction, the correction's; d2 twice), then the offsets."""
    n, k = p.shape
    x = x.reshape(1, k)
    x1 = x.to(_BF16)
    rest = x - x1.float()
    x2 = rest.to(_BF16)
    x3 = (rest - x2.float()).to(_BF16)
    a = torch.cat((torch.cat((x1, x2, x3))[_ROWS], _ON), dim=1)  # (6, in + extra): the rows the calls read
    y1 = _kernel(a[0:2], p, 0)  # (2, n): d1 x1, d1 x2, rounded to bfloat16
    y2 = _kernel(a[0:1], p, 1)  # (1, n): d2 x1
    r1 = _kernel(a[2:4], p, 0, -y1)  # (2, n): what rounding took from d1 x1 and d1 x2
    r2 = _kernel(a[2:4], p, 1, -y2)  # (2, n): what rounding took from d2 x1; d2 x2 (its own error is tiny)
    r3 = _kernel(a[4:6], p, 0, -torch.stack((y1[0], r1[0])))  # (2, n): what rounding took from d1 x1's
    # correction; d1 x3
    y = torch.cat((y1, y2, r1, r2, r3)).float().sum(0)  # (n,) the pieces, the large first
    return (y + torch.mv(p.offset, x.view(k // BLOCK, BLOCK).sum(-1)))[None]  # (1, n) with each block's offset


@dataclass(frozen=True, eq=False)
class PackedLayer:
    """One decoder layer's matrices packed: W_q, W_k and W_v stacked (one input, one call), W_o, W_gate and W_up
    stacked, W_down."""

    qkv: Packed  # (heads * d_head + 2 * kv_heads * d_head, d_model)
    out: Packed  # (d_model, heads * d_head)
    gate_up: Packed  # (2 * d_ff, d_model)
    down: Packed  # (d_model, d_ff)


def _stacked(*ws: Quantized) -> Quantized:
    """Matrices with the same input and kind stacked by rows (their outputs concatenated)."""
    return Quantized(torch.cat([w.blocks for w in ws]), ws[0].kind, (sum(w.shape[0] for w in ws), ws[0].shape[1]))


def pack_layer(layer: Layer) -> PackedLayer:
    return PackedLayer(
        qkv=pack(_stacked(layer.w_query, layer.w_key, layer.w_value)),
        out=pack(layer.w_out),
        gate_up=pack(_stacked(layer.w_gate, layer.w_up)),
        down=pack(layer.w_down),
    )


@dataclass(frozen=True, eq=False)
class PackedModel:
    """Every layer's matrices packed: what a generation step reads (with the embedding, as stored)."""

    layers: tuple[PackedLayer, ...]

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for layer in self.layers for m in (layer.qkv, layer.out, layer.gate_up, layer.down))


_PACKED: weakref.WeakKeyDictionary[Model, PackedModel | None] = weakref.WeakKeyDictionary()
_USED: weakref.WeakKeyDictionary[Model, float] = weakref.WeakKeyDictionary()  # when a step last asked for it
_PINS: weakref.WeakKeyDictionary[Model, int] = weakref.WeakKeyDictionary()  # steps sized or under way, per model
_LOCK = threading.Lock()


def exact_enough(p: Packed, w: Quantized, seed: int = 0) -> bool:
    """Whether the kernel gives float32's numbers on this machine: one seeded product of `w` packed within
    2e-7 |x| . |w| of the exact one (float64), as a float32 matmul is (tests/unit/attention/models/test_smollm2.py)."""
    x = torch.randn(1, w.shape[1], generator=torch.Generator().manual_seed(seed))
    dense = w.dequantize().double()
    exact = x.double() @ dense.T
    bound = 2e-7 * float((x.double().abs() @ dense.abs().T).max())
    return float((matvec(x, p).double() - exact).abs().max()) <= bound


def packed(model: Model) -> PackedModel | None:
    """The model's matrices packed, built once per model (a process's sessions share it) on the first step; None
    where this machine's int4 kernel does not give float32's numbers (checked once, on layer 0's W_gate and W_up,
    before packing the rest): there a step dequantizes every layer, as before."""
    with _LOCK:
        if model not in _PACKED:
            first = model.layers[0]
            check = _stacked(first.w_gate, first.w_up)
            ok = exact_enough(pack(check), check)
            _PACKED[model] = PackedModel(tuple(pack_layer(layer) for layer in model.layers)) if ok else None
        _USED[model] = time.monotonic()
        return _PACKED[model]


def packed_bytes(n: int, k: int) -> int:
    """What `pack` keeps of a (n, k) matrix: its integers (with the extra groups) at half a byte, two bfloat16
    scale-and-zero tables of (groups + _EXTRA, n, 2), the float32 offsets of its blocks: `Packed.nbytes`, from the
    shape alone."""
    groups = k // BLOCK
    return n * (k + _EXTRA * BLOCK) // 2 + 2 * (groups + _EXTRA) * n * 2 * 2 + n * groups * 4


def pack_bytes(model: Model) -> int:
    """An upper bound of the memory packing the model adds, before it is packed: the copy it keeps (`packed_bytes`
    of every matrix as `pack_layer` stacks them) and, while a matrix is packed, its unpacked integers and their
    copies (16 bytes a number, the largest matrix). 0 once packed, or where the kernel was found inexact: a
    generation step asks the server's budget for it beside its own run (server/chat.py)."""
    with _LOCK:
        if model in _PACKED:
            return 0
    kept, largest = 0, 0
    for layer in model.layers:
        d = layer.w_query.shape[1]
        qkv = layer.w_query.shape[0] + layer.w_key.shape[0] + layer.w_value.shape[0]
        shapes = [(qkv, d), layer.w_out.shape, (layer.w_gate.shape[0] + layer.w_up.shape[0], d), layer.w_down.shape]
        kept += sum(packed_bytes(n, k) for n, k in shapes)
        largest = max(largest, *(n * (k + _EXTRA * BLOCK) for n, k in shapes))
    return kept + 16 * largest


@contextlib.contextmanager
def pinned(model: Model) -> Iterator[None]:
    """Inside it the model's packed copy is not let go (`release`): a step sized while the copy was there (its
    admission counted no packing, `pack_bytes` 0) must find it there when it runs, or it would pack again beside
    what was admitted (issue 50: a crowd's waiting runs let go of it between a chat step's admission and its run,
    and the step packed ~100 MB more than the server had counted)."""
    with _LOCK:
        _PINS[model] = _PINS.get(model, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            _PINS[model] -= 1
            if not _PINS[model]:
                del _PINS[model]


def release(idle_s: float = 0.0, now: float | None = None) -> int:
    """Let go of the packed copies no step has asked for in `idle_s` seconds (every one with 0) and none is pinned
    for (`pinned`): the bytes freed. The next step packs again (0.6 s, quiet), inside its own admission. Where the
    kernel was found inexact (None) the finding stays: nothing to free."""
    now = time.monotonic() if now is None else now
    freed = 0
    with _LOCK:
        idle = [m for m, used in _USED.items() if now - used >= idle_s and _PACKED.get(m) is not None]
        for model in [m for m in idle if not _PINS.get(m)]:
            freed += _PACKED.pop(model).nbytes
            del _USED[model]
    return freed
