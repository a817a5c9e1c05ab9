"""The one configuration of an attention computation, validated on construction.

Field names are the command-line flags with dashes for underscores (`--d-k` is
`d_k`), so a notebook, the dashboard and the command line share one vocabulary.
Matrices are stored as tuples of tuples so a Config is hashable (and cacheable): `attention.basics.matrices`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .matrices import BoolMatrix, Matrix, Vector, as_matrix, as_vector, strict_bool
from .params import Param, declarations, setting

RASCHKA_SENTENCE = "Life is short, eat dessert first"
MAX_TOKENS = 512
MAX_DIM = 4096
MAX_HEADS = 64
# d_k and d_v of the independent layout when left out (the split layout derives them from d_model / heads)
INDEPENDENT_D_K, INDEPENDENT_D_V = 24, 28
TEMPERATURE_RANGE = (1e-3, 1e3)

EMBEDDING_INITS = ("embedding", "rand", "randn")
HEAD_LAYOUTS = ("independent", "split")
INITS = ("rand", "rand-transposed", "linear", "identity", "normal", "given")
DRAWS = ("tutorial", "stable")
SCALES = ("sqrt", "none", "temperature")
MASKS = ("none", "causal", "padding", "window", "custom")
CAUSAL_ALIGNS = ("top-left", "bottom-right")
POSITIONS = ("none", "sinusoidal", "learned", "rope", "alibi")  # attention.basics.position.KINDS

# Sentence punctuation that sticks to a word ("short," -> "short"), as the
# Raschka tutorial strips its comma; everything else stays part of the token.
_STRIP = ",.;:!?"


def tokenize(sentence: str) -> tuple[str, ...]:
    """Word-level tokens: split on white space, strip sentence punctuation at word ends."""
    words = (w.strip(_STRIP) for w in sentence.split())
    return tuple(w for w in words if w)


@dataclass(frozen=True)
class Config:
    """Everything that decides an attention computation; defaults are the Raschka tutorial.

    Each field is declared once with `setting(default, kind, label, help, ...)`: the command line, the
    dashboard's URL and widgets, the validation messages and the "Code" export read these declarations.
    """

    # fmt: off
    # input
    sentence: str | None = setting(
        RASCHKA_SENTENCE, "text", "Sentence", "The words attention runs over: one token a word, punctuation at "
        "word ends dropped. Left out (None) when embeddings are given: the rows are then x1, x2, ...",
        optional=True, dashboard=True, metavar="TEXT",
    )
    embeddings: Matrix | None = setting(
        None, "matrix", "Embeddings", "(T, d_model) query inputs, one row a token, instead of drawn ones.",
        metavar="FILE.json",
    )
    cross_sentence: str | None = setting(
        None, "text", "Key/value sentence (cross-attention)", "A second sentence whose words are the keys and "
        "values: the queries of the first sentence attend to it (cross-attention).",
        optional=True, dashboard=True, metavar="TEXT",
        # longer than the default sentence, so cross-attention opens on a rectangular omega (6 queries x 9 keys)
        dashboard_default="and it was served with a glass of wine",
    )
    cross_embeddings: Matrix | None = setting(
        None, "matrix", "Key/value embeddings", "(T_k, d_model) key/value inputs, one row a token.",
        metavar="FILE.json",
    )
    embedding_init: str = setting(
        "embedding", "choice", "Input embeddings", "How the inputs are drawn: embedding, a seeded nn.Embedding "
        "over the sorted vocabulary (Self-Attention from Scratch); rand; randn.", choices=EMBEDDING_INITS,
    )
    cross_embedding_init: str | None = setting(
        None, "choice", "Key/value input embeddings", "How the key/value inputs are drawn; left out: as the "
        "queries' (one shared table), rand/randn: drawn after the projections.", choices=EMBEDDING_INITS,
        optional=True,
    )
    # position
    position: str = setting(
        "none", "choice", "Positional encoding", "How word order gets in: none (attention alone cannot tell order), "
        "sinusoidal (the table of Attention Is All You Need, added to the embeddings), learned (a table added to the "
        "embeddings, as BERT and GPT-2 have; random here), rope (queries and keys rotated by their position, as "
        "Llama does), alibi (a penalty growing with distance added to the scores).", choices=POSITIONS,
        dashboard=True,
    )
    rope_base: float = setting(
        10000.0, "float", "RoPE base", "The base of RoPE's rotation frequencies: larger, slower rotations, and "
        "positions far apart stay distinguishable.", lo=1.0, hi=1e7, when=("position", "rope"),
        dashboard=(100.0, 100000.0), metavar="B",
    )
    # sizes
    d_model: int | None = setting(
        16, "int", "d_model (embedding width)", "Width of every token's input vector.", lo=1, hi=MAX_DIM,
        optional=True, dashboard=(2, 256), metavar="N",
    )
    d_k: int | None = setting(
        None, "int", "d_k (query/key width per head)", "Width of each query and key vector. The scores are divided "
        "by sqrt(d_k). Left out: 24, or in the split layout d_out (d_model) / heads.", lo=1, hi=MAX_DIM,
        optional=True, dashboard=(1, 256), dashboard_default=INDEPENDENT_D_K, metavar="N",
    )
    d_v: int | None = setting(
        None, "int", "d_v (value width per head)", "Width of each value vector, and so of each head's context vector. "
        "Left out: 28, or in the split layout d_k.", lo=1, hi=MAX_DIM, optional=True, dashboard=(1, 256),
        dashboard_default=INDEPENDENT_D_V, metavar="N",
    )
    d_out: int | None = setting(
        None, "int", "d_out (split layout: projection width)", "Split layout: the width of the one projection "
        "that is cut into heads (LLMs from scratch's d_out); left out: d_model.", lo=1, hi=MAX_DIM, optional=True,
        metavar="N",
    )
    heads: int = setting(
        1, "int", "heads", "Independent attention heads; their context vectors are concatenated.", lo=1,
        hi=MAX_HEADS, dashboard=(1, 16), metavar="N",
    )
    kv_heads: int | None = setting(
        None, "int", "kv_heads (key/value heads)", "Key/value heads, each shared by a group of query heads: as many "
        "as heads is multi-head attention, 1 is multi-query, in between grouped-query (Llama 2 70B, Mistral 7B); "
        "left out: as many as heads.", lo=1, hi=MAX_HEADS, optional=True, dashboard=(1, 16), metavar="N",
    )
    head_layout: str = setting(
        "independent", "choice", "Head layout", "independent: every head has its own d_k/d_v projections "
        "(Self-Attention from Scratch, Self Attention Spelled Out). split: one projection of width heads x d_k is "
        "cut into heads, as nn.MultiheadAttention does (d_k = d_v = d_model / heads unless d_k, d_v or d_out are "
        "given).", choices=HEAD_LAYOUTS, dashboard=True,
    )
    # projections
    init: str = setting(
        "rand-transposed", "choice", "Weight init", "How W_query, W_key, W_value are drawn: torch.rand "
        "(Self-Attention from Scratch), nn.Linear's default, identity, or normal: N(0, sigma^2) with sigma fitted "
        "to the inputs so that the scaled scores q.k/sqrt(d_k) have unit variance (the dashboard's default: "
        "torch.rand's all-positive weights make nearly one-hot rows); given: your own matrices.",
        choices=INITS, dashboard=("normal", "rand-transposed", "rand", "linear", "identity"),
        dashboard_default="normal",
    )
    draws: str = setting(
        "tutorial", "choice", "Order of the random draws", "tutorial: one generator, every head of W_query, then "
        "W_key, W_value, W_out, as the tutorials draw them (their printed numbers), so a change of heads or d_k "
        "redraws the later matrices; stable: each column of each head's matrix from a generator of its own, so "
        "adding heads adds heads and a wider d_k adds columns (the dashboard's default; always for normal).",
        choices=DRAWS, dashboard=True, dashboard_default="stable",
    )
    w_query: Matrix | None = setting(
        None, "matrix", "W_query", "Given (d_model, heads*d_k) query weights, used as x @ W.",
        when=("init", "given"), metavar="FILE.json",
    )
    w_key: Matrix | None = setting(
        None, "matrix", "W_key", "Given (d_model, heads*d_k) key weights, used as x @ W.",
        when=("init", "given"), metavar="FILE.json",
    )
    w_value: Matrix | None = setting(
        None, "matrix", "W_value", "Given (d_model, heads*d_v) value weights, used as x @ W.",
        when=("init", "given"), metavar="FILE.json",
    )
    w_out: Matrix | None = setting(
        None, "matrix", "W_out", "Given (heads*d_v, d_model) output projection weights, used as x @ W.",
        when=("init", "given"), metavar="FILE.json",
    )
    b_query: Vector | None = setting(
        None, "vector", "b_query", "Given (heads*d_k) query bias; left out with bias on: zeros.",
        when=("init", "given"), metavar="FILE.json",
    )
    b_key: Vector | None = setting(
        None, "vector", "b_key", "Given (heads*d_k) key bias; left out with bias on: zeros.",
        when=("init", "given"), metavar="FILE.json",
    )
    b_value: Vector | None = setting(
        None, "vector", "b_value", "Given (heads*d_v) value bias; left out with bias on: zeros.",
        when=("init", "given"), metavar="FILE.json",
    )
    b_out: Vector | None = setting(
        None, "vector", "b_out", "Given bias of the output projection; left out with out_bias on: zeros.",
        when=("init", "given"), metavar="FILE.json",
    )
    bias: bool = setting(
        False, "bool", "q/k/v bias", "Add a bias to every query, key and value (drawn by the init; zero for "
        "identity, or given).", dashboard=True,
    )
    out_proj: bool = setting(
        False, "bool", "Output projection", "Project the concatenated heads back to d_model with W_out.",
        dashboard=True,
    )
    out_bias: bool = setting(True, "bool", "Output bias", "Add a bias in the output projection (nn.Linear's default).")
    # scores
    scale: str = setting(
        "sqrt", "choice", "Scaling of omega", "What the scores are divided by before the softmax: sqrt(d_k), "
        "nothing, or a temperature.", choices=SCALES, dashboard=True,
    )
    temperature: float = setting(
        1.0, "float", "Temperature", "Divide the scores by this: above 1 the weights even out, below 1 they sharpen.",
        lo=TEMPERATURE_RANGE[0], hi=TEMPERATURE_RANGE[1], when=("scale", "temperature"), dashboard=(0.05, 50.0),
        metavar="T",
    )
    mask: str = setting(
        "none", "choice", "Mask type", "Which keys each query may see: causal hides the future, padding the last "
        "n keys, window all but the last w keys up to the query, custom your own grid.", choices=MASKS,
        dashboard=True,
    )
    padding: int = setting(
        0, "int", "Padding: block the last n keys", "Padding mask: the last n keys are padding, and no query sees "
        "them.", lo=0, when=("mask", "padding"), dashboard=(0, MAX_TOKENS), dashboard_default=1, metavar="N",
    )
    window: int = setting(
        3, "int", "Sliding window width w", "Window mask: query i sees keys i-w+1 .. i.", lo=1,
        when=("mask", "window"), dashboard=(1, MAX_TOKENS), metavar="W",
    )
    custom_mask: BoolMatrix | None = setting(
        None, "mask", "Custom mask", "(T_q, T_k) true where a query may attend, false where it may not.",
        when=("mask", "custom"), dashboard=True, metavar="FILE.json",
    )
    score_bias: Matrix | None = setting(
        None, "matrix", "Score bias", "(T_q, T_k) numbers added to the scaled scores before the softmax, as Hugging "
        "Face's extended attention masks and ALiBi are; -inf blocks a key. Beside the mask, not instead of it.",
        metavar="FILE.json",
    )
    causal_align: str = setting(
        "top-left", "choice", "Causal alignment", "With fewer queries than keys: top-left, query i sees keys 0..i "
        "(SDPA's is_causal); bottom-right, the last query sees every key, as a decoding step with a cache does, "
        "and the queries sit at positions T_k - T_q onward (RoPE, ALiBi, position tables). For the causal and window "
        "masks.", choices=CAUSAL_ALIGNS,
    )
    dropout: float = setting(
        0.0, "float", "Dropout on the weights", "Zero each weight with this probability and scale up the rest, as "
        "nn.Dropout does in training.", lo=0.0, hi=1.0, below_hi=True, rule="a probability in [0, 1)",
        dashboard=(0.0, 0.99), metavar="P",
    )
    seed: int = setting(
        123, "int", "seed", "Seeds the embeddings and the projection matrices (the numbers torch.manual_seed gives).",
        lo=-(2**63), hi=2**64 - 1, dashboard=(0, 9999), metavar="N",
    )
    # fmt: on

    def __post_init__(self) -> None:
        set_ = object.__setattr__.__get__(self)
        for name, p in SETTINGS.items():
            if p.kind == "matrix":
                set_(name, as_matrix(getattr(self, name), name, blocking=name == "score_bias"))
            elif p.kind == "vector":
                set_(name, as_vector(getattr(self, name), name))
            elif p.kind == "mask":
                set_(name, as_matrix(getattr(self, name), name, kind=strict_bool))
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
    def key_width(self) -> int:
        """Width of the key/value inputs: the given cross embeddings' (kdim = vdim in nn.MultiheadAttention), else
        d_model."""
        return len(self.cross_embeddings[0]) if self.cross_embeddings is not None else self.width

    @property
    def split_width(self) -> int:
        """Split layout: the width cut into heads when d_k is left out (d_out, else d_model), and the output
        projection's width."""
        return self.width if self.d_out is None else self.d_out

    @property
    def head_dims(self) -> tuple[int, int]:
        """(d_k, d_v) per head as used. Given ones are used as they are, in both layouts. Left out: 24 and 28 in
        the independent layout; in the split layout d_k = d_out (d_model) / heads and d_v = d_k."""
        if self.head_layout == "split":
            d_k = self.split_width // self.heads if self.d_k is None else self.d_k
            return d_k, d_k if self.d_v is None else self.d_v
        d_k = INDEPENDENT_D_K if self.d_k is None else self.d_k
        return d_k, INDEPENDENT_D_V if self.d_v is None else self.d_v

    @property
    def key_value_heads(self) -> int:
        """K/V heads as used: kv_heads, or one per query head."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def group(self) -> int:
        """Query heads that share one K/V head (1: multi-head attention)."""
        return self.heads // self.key_value_heads

    @property
    def out_width(self) -> int:
        """Width of the output projection: d_model, or d_out in the split layout."""
        return self.split_width if self.head_layout == "split" else self.width

    def replace(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def changes(self) -> dict[str, Any]:
        """The fields that differ from the defaults and matter: `Config(**config.changes())` computes exactly what
        this config does. A setting not in use (a padding without the padding mask) is left out, and so is a given
        d_k or d_v that is what leaving it out derives."""
        default = Config()
        out = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) != getattr(default, f.name)}
        for name, p in SETTINGS.items():
            if p.when is not None and getattr(self, p.when[0]) != p.when[1]:
                out.pop(name, None)
        for name in ("d_v", "d_k"):  # d_v first: in the split layout a left-out d_v follows d_k
            if name in out and self._derives(name):
                del out[name]
        return out

    def _derives(self, name: str) -> bool:
        """Whether leaving d_k (or d_v) out gives the widths this config has."""
        try:
            return self.replace(**{name: None}).head_dims == self.head_dims
        except ValueError:  # e.g. a split layout whose heads need the given d_k
            return False

    def to_dict(self) -> dict[str, Any]:
        """Plain fields, matrices as lists of rows and vectors (the biases) as lists: JSON-ready."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = [list(r) if isinstance(r, tuple) else r for r in v] if isinstance(v, tuple) else v
        return out

    # validation ------------------------------------------------------------

    def _validate(self) -> None:
        for name, p in SETTINGS.items():
            if p.when is None or getattr(self, p.when[0]) == p.when[1]:  # a setting not in use is not checked
                p.check(name, getattr(self, name))
        if self.embeddings is not None and self.d_model is not None and self.d_model != len(self.embeddings[0]):
            raise ValueError(
                f"d_model is {self.d_model} but the given embeddings are "
                f"{len(self.embeddings[0])} wide: make them agree, or leave d_model unset (None) to take "
                "the embeddings' width"
            )
        if self.head_layout == "split" and self.d_k is None and self.split_width % self.heads:
            what = "d_model" if self.d_out is None else "d_out"
            raise ValueError(
                f"split layout divides {what}={self.split_width} into {self.heads} heads, "
                f"but {self.heads} does not divide {self.split_width}: pick heads from "
                f"{_divisors(self.split_width)}, give d_k (each head's width), or use the independent layout"
            )
        if self.head_layout == "split" and None not in (self.d_k, self.d_out) and self.heads * self.d_k != self.d_out:
            raise ValueError(
                f"d_out={self.d_out} is the split projection's width but heads x d_k = {self.heads} x {self.d_k} = "
                f"{self.heads * self.d_k}: give d_k or d_out, or make them agree"
            )
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(
                f"kv_heads={self.kv_heads} must divide heads={self.heads} (each K/V head serves an equal group of "
                f"query heads): pick kv_heads from {_divisors(self.heads)}"
            )
        if self.position == "rope" and self.head_dims[0] % 2:
            raise ValueError(f"RoPE rotates pairs of numbers, so d_k must be even; got d_k={self.head_dims[0]}")
        if self.heads * max(self.head_dims) > 4 * MAX_DIM:
            raise ValueError(f"heads x d_k (or d_v) must stay under {4 * MAX_DIM}")
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
        if self.key_width != self.width and self.position in ("sinusoidal", "learned"):
            raise ValueError(
                f"cross embeddings are {self.key_width} wide but d_model is {self.width}: one position table "
                "cannot be added to both; use rope, alibi or none, or inputs of one width"
            )
        if self.key_width > MAX_DIM:
            raise ValueError(f"cross embeddings are {self.key_width} wide; at most {MAX_DIM} are allowed")

    def _validate_weights(self) -> None:
        given = {n: getattr(self, n) for n in ("w_query", "w_key", "w_value", "w_out")}
        biases = {n: getattr(self, n) for n in ("b_query", "b_key", "b_value", "b_out")}
        if self.init != "given":
            if any(v is not None for v in given.values()):
                raise ValueError("weight matrices were given but init is not 'given'")
            if any(v is not None for v in biases.values()):
                raise ValueError("bias vectors were given but init is not 'given'")
            return
        d_k, d_v = self.head_dims
        h, d = self.heads, self.width
        hk = self.key_value_heads
        d_kv = self.key_width
        want = {"w_query": (d, h * d_k), "w_key": (d_kv, hk * d_k), "w_value": (d_kv, hk * d_v)}  # x @ W
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
        lengths = {"b_query": h * d_k, "b_key": hk * d_k, "b_value": hk * d_v, "b_out": self.out_width}
        for name, n in lengths.items():
            b = biases[name]
            if b is None:
                continue
            switch = "out_proj and out_bias" if name == "b_out" else "bias"
            if not (self.out_proj and self.out_bias if name == "b_out" else self.bias):
                raise ValueError(f"{name} was given but {switch} is off: turn {switch} on, or leave {name} out")
            if len(b) != n:
                raise ValueError(f"{name} has {len(b)} numbers but must have {n}")

    def _validate_mask(self) -> None:
        t_q, t_k = len(self.tokens), len(self.key_tokens)
        if self.score_bias is not None and (len(self.score_bias), len(self.score_bias[0])) != (t_q, t_k):
            rows, cols = len(self.score_bias), len(self.score_bias[0])
            raise ValueError(f"score_bias is {rows}x{cols} but the input needs {t_q}x{t_k} (queries x keys)")
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


def _labels(sentence: str | None, matrix: Matrix | None, prefix: str) -> tuple[str, ...]:
    words = tokenize(sentence) if sentence else ()
    if matrix is not None and len(words) != len(matrix):
        return tuple(f"{prefix}{i + 1}" for i in range(len(matrix)))
    return words


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, min(n, 64) + 1) if n % d == 0)


# every setting's declaration, in field order: the command line, the URL and the widgets read these
SETTINGS: dict[str, Param] = declarations(Config)
FIELD_NAMES = tuple(f.name for f in fields(Config))
