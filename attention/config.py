"""The one configuration of an attention computation, validated on construction.

Field names are the command-line flags with dashes for underscores (`--d-k` is
`d_k`), so a notebook, the dashboard and the command line share one vocabulary.
Matrices are stored as tuples of tuples so a Config is hashable (and cacheable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

Matrix = tuple[tuple[float, ...], ...]
BoolMatrix = tuple[tuple[bool, ...], ...]

RASCHKA_SENTENCE = "Life is short, eat dessert first"
MAX_TOKENS = 512
MAX_DIM = 4096
MAX_HEADS = 64
# Bounds that keep every intermediate finite in float32 (|omega| < 1e35 even at the largest sizes)
MAX_ABS = 1e6
TEMPERATURE_RANGE = (1e-3, 1e3)

EMBEDDING_INITS = ("embedding", "rand", "randn")
HEAD_LAYOUTS = ("independent", "split")
INITS = ("rand", "rand-transposed", "linear", "identity", "given")
SCALES = ("sqrt", "none", "temperature")
MASKS = ("none", "causal", "padding", "window", "custom")

# Sentence punctuation that sticks to a word ("short," -> "short"), as the
# Raschka tutorial strips its comma; everything else stays part of the token.
_STRIP = ",.;:!?"


def tokenize(sentence: str) -> tuple[str, ...]:
    """Word-level tokens: split on white space, strip sentence punctuation at word ends."""
    words = (w.strip(_STRIP) for w in sentence.split())
    return tuple(w for w in words if w)


def _matrix(value: Any, name: str, *, kind: type = float) -> tuple | None:
    """Turn a list, tuple, tensor or array into a rectangular tuple of tuples."""
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    try:
        rows = tuple(tuple(kind(x) for x in row) for row in value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be a matrix (a list of rows of numbers): {exc}") from None
    if not rows or not rows[0]:
        raise ValueError(f"{name} is empty: give at least one row with one number")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"{name} is not rectangular: row 0 has {width} entries, row {i} has {len(row)}")
    if kind is float and not all(math.isfinite(x) for row in rows for x in row):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if kind is float and any(abs(x) > MAX_ABS for row in rows for x in row):
        raise ValueError(f"{name} has entries beyond ±{MAX_ABS:g}; keep numbers within that range")
    return rows


@dataclass(frozen=True)
class Config:
    """Everything that decides an attention computation; defaults are the Raschka tutorial."""

    # input
    sentence: str | None = RASCHKA_SENTENCE  # word-level tokens; labels when embeddings are given
    embeddings: Matrix | None = None  # explicit (T, d_model) inputs; overrides embedding_init
    cross_sentence: str | None = None  # keys/values sentence for cross-attention
    cross_embeddings: Matrix | None = None  # explicit (T_k, d_model) keys/values inputs
    embedding_init: str = "embedding"  # embedding: seeded nn.Embedding over the sorted vocabulary; rand; randn
    # None: as embedding_init (one shared table); rand/randn: drawn after the projections
    cross_embedding_init: str | None = None
    # sizes
    d_model: int | None = 16  # embedding width; None: the width of the given embeddings
    d_k: int = 24  # query/key width per head (split layout: d_model // heads)
    d_v: int = 28  # value width per head (split layout: d_model // heads)
    d_out: int | None = None  # split layout: total projection width (LLMs-from-scratch's d_out); None: d_model
    heads: int = 1
    head_layout: str = "independent"  # independent: own projections per head; split: nn.MultiheadAttention
    # projections
    init: str = "rand-transposed"  # rand | rand-transposed | linear | identity | given
    w_query: Matrix | None = None  # given (d_model, heads*d_k), used as x @ W
    w_key: Matrix | None = None  # given (d_model, heads*d_k)
    w_value: Matrix | None = None  # given (d_model, heads*d_v)
    w_out: Matrix | None = None  # given (heads*d_v, d_model) when out_proj
    bias: bool = False  # q/k/v bias (drawn by the init; zero for identity and given)
    out_proj: bool = False  # project the concatenated heads back to d_model
    out_bias: bool = True  # bias of the output projection (nn.Linear's default)
    # scores
    scale: str = "sqrt"  # sqrt: 1/sqrt(d_k); none; temperature: 1/temperature
    temperature: float = 1.0
    mask: str = "none"  # none | causal | padding | window | custom
    padding: int = 0  # padding mask: block the last n keys
    window: int = 3  # window mask: query i sees keys i-window+1 .. i
    custom_mask: BoolMatrix | None = None  # (T_q, T_k), True where a query may attend
    dropout: float = 0.0  # on the attention weights, inverted-scaled as nn.Dropout does
    seed: int = 123  # seeds a private torch.Generator, same numbers as torch.manual_seed(seed)

    def __post_init__(self) -> None:
        set_ = object.__setattr__.__get__(self)
        for name in ("embeddings", "cross_embeddings", "w_query", "w_key", "w_value", "w_out"):
            set_(name, _matrix(getattr(self, name), name))
        set_("custom_mask", _matrix(self.custom_mask, "custom_mask", kind=_strict_bool))
        if self.sentence is not None and not isinstance(self.sentence, str):
            raise ValueError("sentence must be text")
        if self.cross_sentence is not None and not isinstance(self.cross_sentence, str):
            raise ValueError("cross_sentence must be text")
        self._validate()

    # derived -------------------------------------------------------------

    @property
    def tokens(self) -> tuple[str, ...]:
        """Query tokens: the sentence's words, or x1..xT for bare embeddings."""
        return _labels(self.sentence, self.embeddings, "x")

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """Key/value tokens: the cross sentence's, or the query tokens for self-attention."""
        if not self.is_cross:
            return self.tokens
        return _labels(self.cross_sentence, self.cross_embeddings, "y")

    @classmethod
    def from_embeddings(cls, embeddings: Matrix, cross_embeddings: Matrix | None = None, **fields: Any) -> Config:
        """Inputs given as matrices, e.g. `Config.from_embeddings([[1, 0, 1], [0, 2, 0]], d_k=2)`.

        Unless given, there is no sentence (the rows are x1, x2, ... and y1, y2, ...) and d_model is
        the matrices' width; every other field is as in `Config(...)`.
        """
        fields.setdefault("sentence", None)
        fields.setdefault("d_model", None)
        return cls(embeddings=embeddings, cross_embeddings=cross_embeddings, **fields)

    @property
    def is_cross(self) -> bool:
        return self.cross_sentence is not None or self.cross_embeddings is not None

    @property
    def width(self) -> int:
        """d_model as used: the given embeddings' width or the d_model field."""
        if self.embeddings is not None:
            return len(self.embeddings[0])
        return 16 if self.d_model is None else self.d_model

    @property
    def split_width(self) -> int:
        """Split layout: the width one projection produces before it is cut into heads."""
        return self.width if self.d_out is None else self.d_out

    @property
    def head_dims(self) -> tuple[int, int]:
        """(d_k, d_v) per head as used: the split layout divides d_out (d_model) by heads."""
        if self.head_layout == "split":
            return self.split_width // self.heads, self.split_width // self.heads
        return self.d_k, self.d_v

    @property
    def out_width(self) -> int:
        """Width of the output projection: d_model, or d_out in the split layout."""
        return self.split_width if self.head_layout == "split" else self.width

    def replace(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain fields, matrices as lists of rows: JSON-ready."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = [list(r) for r in v] if isinstance(v, tuple) else v
        return out

    # validation ------------------------------------------------------------

    def _validate(self) -> None:
        _one_of("embedding_init", self.embedding_init, EMBEDDING_INITS)
        if self.cross_embedding_init is not None:
            _one_of("cross_embedding_init", self.cross_embedding_init, EMBEDDING_INITS)
        _one_of("head_layout", self.head_layout, HEAD_LAYOUTS)
        _one_of("init", self.init, INITS)
        _one_of("scale", self.scale, SCALES)
        _one_of("mask", self.mask, MASKS)
        for name in ("bias", "out_proj", "out_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("d_k", "d_v", "heads", "padding", "window", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be a whole number, got {v!r}")
        if self.d_model is not None and (isinstance(self.d_model, bool) or not isinstance(self.d_model, int)):
            raise ValueError(f"d_model must be a whole number, got {self.d_model!r}")
        for name, hi in (("d_k", MAX_DIM), ("d_v", MAX_DIM), ("heads", MAX_HEADS)):
            v = getattr(self, name)
            if not 1 <= v <= hi:
                raise ValueError(f"{name} must be between 1 and {hi}, got {v}")
        if self.embeddings is not None:
            if self.d_model is not None and self.d_model != len(self.embeddings[0]):
                raise ValueError(
                    f"d_model is {self.d_model} but the given embeddings are "
                    f"{len(self.embeddings[0])} wide: make them agree, or leave d_model unset (None) to take "
                    "the embeddings' width"
                )
        elif not 1 <= self.width <= MAX_DIM:
            raise ValueError(f"d_model must be between 1 and {MAX_DIM}, got {self.width}")
        if self.d_out is not None and (
            isinstance(self.d_out, bool) or not isinstance(self.d_out, int) or not 1 <= self.d_out <= MAX_DIM
        ):
            raise ValueError(f"d_out must be a whole number between 1 and {MAX_DIM}, got {self.d_out!r}")
        if self.head_layout == "split" and self.split_width % self.heads:
            what = "d_model" if self.d_out is None else "d_out"
            raise ValueError(
                f"split layout divides {what}={self.split_width} into {self.heads} heads, "
                f"but {self.heads} does not divide {self.split_width}: pick heads from "
                f"{_divisors(self.split_width)} or use the independent layout"
            )
        if self.heads * max(self.head_dims) > 4 * MAX_DIM:
            raise ValueError(f"heads x d_k (or d_v) must stay under {4 * MAX_DIM}")
        if not -(2**63) <= self.seed < 2**64:
            raise ValueError(f"seed must be between -2**63 and 2**64 - 1, got {self.seed}")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {self.dropout!r}")
        lo, hi = TEMPERATURE_RANGE
        if self.scale == "temperature" and not (
            isinstance(self.temperature, (int, float))
            and not isinstance(self.temperature, bool)
            and lo <= self.temperature <= hi
        ):
            raise ValueError(f"temperature must be a number from {lo:g} to {hi:g}, got {self.temperature!r}")
        self._validate_inputs()
        self._validate_weights()
        self._validate_mask()

    def _validate_inputs(self) -> None:
        for sentence, matrix, what in (
            (self.sentence, self.embeddings, "the sentence"),
            (self.cross_sentence, self.cross_embeddings, "the cross sentence"),
        ):
            if what == "the cross sentence" and not self.is_cross:
                continue
            if matrix is None:
                if sentence is None or not tokenize(sentence):
                    raise ValueError(f"{what} is empty: type at least one word")
                n = len(tokenize(sentence))
            else:
                n = len(matrix)
                if sentence is not None and tokenize(sentence) and len(tokenize(sentence)) != n:
                    rows = f"{n} row{'s' * (n != 1)}"
                    raise ValueError(
                        f"{what} has {len(tokenize(sentence))} words but its embeddings have {rows}: give one word "
                        "a row, or no sentence (None) to label the rows by position"
                    )
            if n > MAX_TOKENS:
                raise ValueError(f"{what} has {n} tokens; at most {MAX_TOKENS} are allowed")
        if self.cross_embeddings is not None and len(self.cross_embeddings[0]) != self.width:
            raise ValueError(
                f"cross embeddings are {len(self.cross_embeddings[0])} wide but d_model is "
                f"{self.width}: both inputs need the same width"
            )

    def _validate_weights(self) -> None:
        given = {n: getattr(self, n) for n in ("w_query", "w_key", "w_value", "w_out")}
        if self.init != "given":
            if any(v is not None for v in given.values()):
                raise ValueError("weight matrices were given but init is not 'given'")
            return
        d_k, d_v = self.head_dims
        h, d = self.heads, self.width
        want = {"w_query": (d, h * d_k), "w_key": (d, h * d_k), "w_value": (d, h * d_v)}  # x @ W
        if self.out_proj:
            want["w_out"] = (h * d_v, self.out_width)
        for name, shape in want.items():
            m = given[name]
            if m is None:
                raise ValueError(f"init 'given' needs {name} of shape {shape[0]}x{shape[1]}")
            if (len(m), len(m[0])) != shape:
                raise ValueError(
                    f"{name} is {len(m)}x{len(m[0])} but must be {shape[0]}x{shape[1]} "
                    f"(d_model x heads*d_k, used as x @ W)"
                )

    def _validate_mask(self) -> None:
        t_q, t_k = len(self.tokens), len(self.key_tokens)
        if self.mask == "custom":
            if self.custom_mask is None:
                raise ValueError("mask 'custom' needs custom_mask: a T_q x T_k matrix of true/false")
            shape = (len(self.custom_mask), len(self.custom_mask[0]))
            if shape != (t_q, t_k):
                raise ValueError(
                    f"custom_mask is {shape[0]}x{shape[1]} but the input needs {t_q}x{t_k} "
                    "(one row per query token, one column per key token)"
                )
        if self.padding < 0:
            raise ValueError(f"padding must be 0 or more, got {self.padding}")
        if self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window}")


def _strict_bool(x: Any) -> bool:
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) and x in (0, 1):
        return bool(x)
    raise ValueError(f"{x!r} is not true/false or 1/0")


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _labels(sentence: str | None, matrix: Matrix | None, prefix: str) -> tuple[str, ...]:
    words = tokenize(sentence) if sentence else ()
    if matrix is not None and len(words) != len(matrix):
        return tuple(f"{prefix}{i + 1}" for i in range(len(matrix)))
    return words


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, min(n, 64) + 1) if n % d == 0)


# keeps the field list importable for the command line and the URL state
FIELD_NAMES = tuple(f.name for f in fields(Config))
