"""A QR code for a link, made here (no network, no package): byte mode, error correction level M, versions 1-10
(up to 213 bytes: any room link), drawn as SVG. The steps are ISO/IEC 18004's, in the order a reader of the standard
meets them: the data bits, Reed-Solomon codewords per block, the interleaved codewords, the fixed patterns, the
zigzag placement, the mask with the lowest penalty, and the format and version bits.
"""

from __future__ import annotations

import functools
import itertools

# Level M, per version: (EC codewords per block, [(blocks, data codewords per block), ...])
_BLOCKS = {
    1: (10, [(1, 16)]),
    2: (16, [(1, 28)]),
    3: (26, [(1, 44)]),
    4: (18, [(2, 32)]),
    5: (24, [(2, 43)]),
    6: (16, [(4, 27)]),
    7: (18, [(4, 31)]),
    8: (22, [(2, 38), (2, 39)]),
    9: (22, [(3, 36), (2, 37)]),
    10: (26, [(4, 43), (1, 44)]),
}
_ALIGN = {1: [], 2: [6, 18], 3: [6, 22], 4: [6, 26], 5: [6, 30], 6: [6, 34], 7: [6, 22, 38], 8: [6, 24, 42],
          9: [6, 26, 46], 10: [6, 28, 50]}  # fmt: skip
_LEVEL_M = 0b00  # the format bits' error-correction level (L 01, M 00, Q 11, H 10)
_MASKS = [
    lambda r, c: (r + c) % 2 == 0,
    lambda r, c: r % 2 == 0,
    lambda r, c: c % 3 == 0,
    lambda r, c: (r + c) % 3 == 0,
    lambda r, c: (r // 2 + c // 3) % 2 == 0,
    lambda r, c: (r * c) % 2 + (r * c) % 3 == 0,
    lambda r, c: ((r * c) % 2 + (r * c) % 3) % 2 == 0,
    lambda r, c: ((r + c) % 2 + (r * c) % 3) % 2 == 0,
]


def _gf_mul(a: int, b: int) -> int:
    """Product in GF(256) modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11D)."""
    out = 0
    for i in range(7, -1, -1):
        out = (out << 1) ^ (0x11D if out & 0x80 else 0)
        if (b >> i) & 1:
            out ^= a
    return out & 0xFF


@functools.lru_cache(maxsize=16)
def _divisor(degree: int) -> tuple[int, ...]:
    """The generator polynomial (x - a^0)(x - a^1)...(x - a^(degree-1)), its leading 1 left out."""
    coeffs = [0] * (degree - 1) + [1]
    root = 1
    for _ in range(degree):
        for j in range(degree):
            coeffs[j] = _gf_mul(coeffs[j], root)
            if j + 1 < degree:
                coeffs[j] ^= coeffs[j + 1]
        root = _gf_mul(root, 2)
    return tuple(coeffs)


def _ec(data: list[int], degree: int) -> list[int]:
    """The Reed-Solomon codewords of one block: the remainder of data(x) x^degree divided by the generator."""
    divisor = _divisor(degree)
    rest = [0] * degree
    for byte in data:
        factor = byte ^ rest.pop(0)
        rest.append(0)
        for i, coef in enumerate(divisor):
            rest[i] ^= _gf_mul(coef, factor)
    return rest


def _codewords(data: bytes) -> tuple[int, list[int]]:
    """The smallest version that holds `data`, and its interleaved data and EC codewords."""
    for version, (_, groups) in _BLOCKS.items():
        capacity = sum(n * k for n, k in groups)
        count_bits = 8 if version < 10 else 16
        if 4 + count_bits + 8 * len(data) <= 8 * capacity:
            break
    else:
        raise ValueError(f"a link of {len(data)} bytes is too long for a QR code here (at most 213)")
    ec = _BLOCKS[version][0]
    bits = [0, 1, 0, 0] + [(len(data) >> i) & 1 for i in range(count_bits - 1, -1, -1)]
    bits += [(byte >> i) & 1 for byte in data for i in range(7, -1, -1)]
    bits += [0] * min(4, 8 * capacity - len(bits))  # the terminator
    bits += [0] * (-len(bits) % 8)
    words = [int("".join(map(str, bits[i : i + 8])), 2) for i in range(0, len(bits), 8)]
    words += list(itertools.islice(itertools.cycle([0xEC, 0x11]), capacity - len(words)))
    blocks, at = [], 0
    for n, k in groups:
        for _ in range(n):
            blocks.append(words[at : at + k])
            at += k
    out = [b[i] for i in range(max(map(len, blocks))) for b in blocks if i < len(b)]
    ecs = [_ec(b, ec) for b in blocks]
    out += [e[i] for i in range(ec) for e in ecs]
    return version, out


def _penalty(m: list[list[bool]]) -> int:
    """The standard's four penalties: runs of five or more, 2 x 2 blocks, finder-like rows, imbalance of dark."""
    size, score = len(m), 0
    lines = m + [list(col) for col in zip(*m, strict=True)]
    finder = ([True, False, True, True, True, False, True, False, False, False, False],)
    finder += (finder[0][::-1],)
    for line in lines:
        for _, run in itertools.groupby(line):
            n = len(list(run))
            if n >= 5:
                score += 3 + n - 5
        for i in range(size - 10):
            if line[i : i + 11] in finder:
                score += 40
    for r in range(size - 1):
        for c in range(size - 1):
            if m[r][c] == m[r][c + 1] == m[r + 1][c] == m[r + 1][c + 1]:
                score += 3
    dark = sum(map(sum, m))
    score += 10 * (abs(dark * 20 - size * size * 10) // (size * size))
    return score


def matrix(text: str) -> list[list[bool]]:
    """The QR code of `text` (UTF-8) as rows of modules, True dark, without the quiet zone."""
    version, words = _codewords(text.encode())
    size = 17 + 4 * version
    m = [[False] * size for _ in range(size)]
    fixed = [[False] * size for _ in range(size)]

    def put(r: int, c: int, dark: bool) -> None:
        m[r][c] = dark
        fixed[r][c] = True

    for i in range(size):  # timing patterns
        put(6, i, i % 2 == 0)
        put(i, 6, i % 2 == 0)
    for cr, cc in ((3, 3), (3, size - 4), (size - 4, 3)):  # finders and their separators
        for dr in range(-4, 5):
            for dc in range(-4, 5):
                if 0 <= cr + dr < size and 0 <= cc + dc < size:
                    put(cr + dr, cc + dc, max(abs(dr), abs(dc)) not in (2, 4))
    centres = _ALIGN[version]
    for r in centres:
        for c in centres:
            if (r, c) in ((6, 6), (6, centres[-1]), (centres[-1], 6)):
                continue
            for dr in range(-2, 3):
                for dc in range(-2, 3):
                    put(r + dr, c + dc, max(abs(dr), abs(dc)) != 1)
    _format(put, size, 0)  # reserved now, written with the chosen mask below
    if version >= 7:
        rest = version
        for _ in range(12):
            rest = (rest << 1) ^ ((rest >> 11) * 0x1F25)
        bits = version << 12 | rest
        for i in range(18):
            a, b = size - 11 + i % 3, i // 3
            put(b, a, bool((bits >> i) & 1))
            put(a, b, bool((bits >> i) & 1))
    i = 0  # the zigzag: two columns at a time from the right, up then down, skipping the timing column
    for right in range(size - 1, 0, -2):
        if right <= 6:
            right -= 1
        upward = (right + 1) & 2 == 0
        for vert in range(size):
            r = size - 1 - vert if upward else vert
            for c in (right, right - 1):
                if not fixed[r][c] and i < 8 * len(words):
                    m[r][c] = bool((words[i >> 3] >> (7 - (i & 7))) & 1)
                    i += 1
    best = None
    for k, mask in enumerate(_MASKS):
        trial = [[m[r][c] ^ (not fixed[r][c] and mask(r, c)) for c in range(size)] for r in range(size)]
        _format(lambda r, c, d, t=trial: t[r].__setitem__(c, d), size, k)
        score = _penalty(trial)
        if best is None or score < best[0]:
            best = (score, trial)
    return best[1]


def _format(put, size: int, mask: int) -> None:
    """The 15 format bits (level and mask, BCH-coded, XOR 0x5412), twice: around the top-left finder, and split
    between the other two; and the one module that is always dark."""
    data = _LEVEL_M << 3 | mask
    rest = data
    for _ in range(10):
        rest = (rest << 1) ^ ((rest >> 9) * 0x537)
    bits = (data << 10 | rest) ^ 0x5412

    def bit(i: int) -> bool:
        return bool((bits >> i) & 1)

    for i in range(6):
        put(i, 8, bit(i))
    put(7, 8, bit(6))
    put(8, 8, bit(7))
    put(8, 7, bit(8))
    for i in range(9, 15):
        put(8, 14 - i, bit(i))
    for i in range(8):
        put(8, size - 1 - i, bit(i))
    for i in range(8, 15):
        put(size - 15 + i, 8, bit(i))
    put(size - 8, 8, True)


def svg(text: str, module_px: int = 8, quiet: int = 4) -> str:
    """The QR code of `text` as an SVG image: black modules on white, with the standard's 4-module quiet zone."""
    m = matrix(text)
    n = len(m) + 2 * quiet
    path = "".join(f"M{c + quiet},{r + quiet}h1v1h-1z" for r, row in enumerate(m) for c, dark in enumerate(row) if dark)
    # named as an image (WCAG 1.1.1), wherever it is shown: inline, or as an <img> whose alt the caller gives
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {n} {n}" width="{n * module_px}" '
            f'height="{n * module_px}" shape-rendering="crispEdges" role="img" aria-label="QR code of the link">'
            f'<title>QR code of the link</title><rect width="{n}" height="{n}" fill="#fff"/>'
            f'<path d="{path}" fill="#000"/></svg>')  # fmt: skip
