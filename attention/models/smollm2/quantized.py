"""SmolLM2's matrices as the GGUF stores them: blocks of 32 weights (Q4_1 or Q8_0), dequantized in torch when used.

llama.cpp's converter permutes the rows of W_q and W_k within each head; `rope_row_order` puts them back in Llama's
rotate-half order at load time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..package import ModelFileError

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

    def dequantize(self, rows: slice | torch.Tensor | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
        """w = d * q + m per block of 32 (Q4_1; q the 4-bit integers 0..15, low nibbles first), w = d * q (Q8_0;
        q int8): float32 (out, in), or only the given rows. The same arithmetic as gguf's numpy dequantize.

        out: a flat float32 buffer with room for the result, which is written at its start and returned as a view
        of it. A run that dequantizes matrix after matrix reuses one buffer: where glibc maps every block of 1 MiB
        or more afresh (the server's allocator setting, `server._return_freed_memory`), a new 14 MB a layer was 14
        MB of fresh pages to fault in, more time than the dequantizing (benchmarks/results/)."""
        b = self.blocks if rows is None else self.blocks[rows]
        n = b.shape[0]
        b = b.view(n, -1, _BLOCK_BYTES[self.kind])  # (n, in/32, block bytes)
        size = n * self.shape[1]
        if out is not None and (out.dtype != torch.float32 or out.dim() != 1 or out.numel() < size):
            raise ValueError(f"out must be a flat float32 buffer of at least {size} numbers")
        w = (torch.empty(size) if out is None else out[:size]).view(n, -1, 32)  # (n, in/32, 32)
        d = _half(b, 0)  # (n, in/32, 1) float16
        if self.kind == "Q4_1":
            m = _half(b, 1)  # (n, in/32, 1)
            # weight j is the low nibble of byte j, weight j + 16 its high nibble: unpacked 8 bytes at a time,
            # each half converted to float32 as it is written
            packed = b[..., 4:].contiguous().view(torch.int64)  # (n, in/32, 2)
            w[..., :16] = (packed & _NIBBLES).view(torch.uint8)  # the integers 0..15
            w[..., 16:] = ((packed >> 4) & _NIBBLES).view(torch.uint8)
            w.mul_(d).add_(m)  # d * q + m, multiplied then added (not fused): gguf's float32 numbers exactly
        else:
            w.copy_(b[..., 2:].view(torch.int8))  # (n, in/32, 32)
            w.mul_(d)
        return w.view(n, self.shape[1])  # (n, in)


def _half(b: torch.Tensor, k: int) -> torch.Tensor:
    """The k-th float16 number of every block of (n, blocks, block bytes) uint8 (Q4_1's d is 0 and m 1, Q8_0's d
    0): (n, blocks, 1), read as 2-byte numbers (copied out byte by byte it was a third of the unembedding's time)."""
    if b.storage_offset() % 2 or b.stride(1) % 2:  # pragma: no cover - GGUF aligns tensors to 32 bytes
        return b[..., 2 * k : 2 * k + 2].contiguous().view(torch.float16)
    return b.view(torch.int16)[..., k : k + 1].contiguous().view(torch.float16)


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


def integers(w: Quantized) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The stored integers and block numbers of a matrix: q (out, in) int32 (0..15 for Q4_1, -128..127 for Q8_0),
    d (out, in/32) float32 and m (out, in/32) float32 (None for Q8_0), so that w = d q + m per block."""
    n = w.shape[0]
    b = w.blocks.view(n, -1, _BLOCK_BYTES[w.kind])  # (n, in/32, block bytes)
    d = b[..., 0:2].contiguous().view(torch.float16).float()[..., 0]  # (n, in/32)
    if w.kind == "Q4_1":
        m = b[..., 2:4].contiguous().view(torch.float16).float()[..., 0]
        packed = b[..., 4:].contiguous().view(torch.int64)  # (n, in/32, 2)
        low = (packed & _NIBBLES).view(torch.uint8)
        high = ((packed >> 4) & _NIBBLES).view(torch.uint8)
        q = torch.cat((low, high), dim=-1)  # (n, in/32, 32) 0..15
        return q.reshape(n, w.shape[1]).to(torch.int32), d, m
    q = b[..., 2:].contiguous().view(torch.int8)  # (n, in/32, 32)
    return q.reshape(n, w.shape[1]).to(torch.int32), d, None
