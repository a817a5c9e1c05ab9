"""One preset per tutorial step: its source, its config, and the numbers it printed.

The printed numbers are data (`Check`), so the tests assert them and the dashboard
shows them beside the computed ones. `verify(preset)` compares the two at the
tutorial's printed precision: half a unit of its last printed digit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .config import Config
from .core import Result, compute


@dataclass(frozen=True)
class Source:
    seed_file: str  # in ../shared/seeds/
    title: str
    link: str | None


@dataclass(frozen=True)
class Check:
    """A number, row or matrix a tutorial printed, and where it lives in the Result."""

    label: str  # the tutorial's own name for it
    tensor: str  # a Result field
    index: tuple[int | None, ...]  # indices into that field; None takes a whole axis
    expected: tuple  # nested numbers, or a shape when shape_only
    decimals: int | None = 4  # printed as fixed point with this many decimals
    significant: int | None = None  # printed in scientific notation with this many digits
    shape_only: bool = False  # the tutorial printed only a shape
    slack: float = 0.0  # added tolerance where the tutorial's inputs were themselves printed rounded


@dataclass(frozen=True)
class Outcome:
    check: Check
    computed: torch.Tensor | tuple[int, ...]
    max_error: float  # largest |computed - expected| (0 for a matching shape)
    tolerance: float
    ok: bool


@dataclass(frozen=True)
class Preset:
    name: str
    source: Source
    description: str  # what the tutorial step does
    config: Config
    checks: tuple[Check, ...]
    corrections: str = ""  # where the tutorial is wrong, and what the preset does instead


def _t(rows) -> tuple:
    return tuple(tuple(r) if isinstance(r, list) else r for r in rows)


RASCHKA = Source(
    "000_e34e1d210556ef69.txt",
    "Self-Attention from Scratch (Sebastian Raschka)",
    "https://sebastianraschka.com/blog/2023/self-attention-from-scratch.html",
)
SPELLED_OUT = Source(
    "001_4b58cee8e07266fa.txt",
    "Self Attention Spelled Out (Arjun Sohur)",
    "https://github.com/ArjunSohur/Self-Attention/blob/master/Self_Attention_Spelled_Out.ipynb",
)
MATH_NOTES = Source("002_8128e1afd2d6b217.txt", "Attention and Self-Attention: math notes", None)
CHEF = Source(
    "003_81240e5ed2e8fab3.txt",
    "Attention on Attention (Vipul Koti)",
    "https://github.com/vipulkoti/AttentionOnAttention",
)
INTEGER = Source(
    "004_b55adbb899cd8122.txt",
    "Self Attention - PyTorch: the integer hand example",
    "https://towardsdatascience.com/illustrated-self-attention-2d627e33b20a",
)

RASCHKA_EMBEDDINGS = _t([
    [0.3374, -0.1778, -0.3035, -0.5880, 0.3486, 0.6603, -0.2196, -0.3792, 0.7671, -1.1925, 0.6984, -1.4097, 0.1794, 1.8951, 0.4954, 0.2692],
    [0.5146, 0.9938, -0.2587, -1.0826, -0.0444, 1.6236, -2.3229, 1.0878, 0.6716, 0.6933, -0.9487, -0.0765, -0.1526, 0.1167, 0.4403, -1.4465],
    [0.2553, -0.5496, 1.0042, 0.8272, -0.3948, 0.4892, -0.2168, -1.7472, -1.6025, -1.0764, 0.9031, -0.7218, -0.5951, -0.7112, 0.6230, -1.3729],
    [-1.3250, 0.1784, -2.1338, 1.0524, -0.3885, -0.9343, -0.4991, -1.0867, 0.8805, 1.5542, 0.6266, -0.1755, 0.0983, -0.0935, 0.2662, -0.5850],
    [-0.0770, -1.0205, -0.1690, 0.9178, 1.5810, 1.3010, 1.2753, -0.2010, 0.4965, -1.5723, 0.9666, -1.1481, -1.1589, 0.3255, -0.6315, -2.8400],
    [0.8768, 1.6221, -1.4779, 1.1331, -1.2203, 1.3139, 1.0533, 0.1388, 2.2473, -0.8036, -0.2808, 0.7697, -0.6596, -0.7979, 0.1838, 0.2293],
])  # fmt: skip

RASCHKA_BASE = Config()  # the defaults are this tutorial: its sentence, d_model 16, d_k 24, d_v 28, seed 123

CHEF_SENTENCE = "The chef prepared a delicious meal, and it was served with wine."
CHEF_EMBEDDINGS = _t([
    [0.32, 0.68, 0.45], [0.71, 0.23, 0.89], [0.55, 0.92, 0.37], [0.18, 0.79, 0.60],
    [0.84, 0.41, 0.13], [0.29, 0.63, 0.76], [0.50, 0.15, 0.95], [0.67, 0.38, 0.82],
    [0.43, 0.91, 0.26], [0.75, 0.20, 0.58], [0.36, 0.72, 0.49], [0.88, 0.54, 0.11],
])  # fmt: skip
CHEF_BASE = Config(
    sentence=CHEF_SENTENCE, embeddings=CHEF_EMBEDDINGS, d_model=None,
    init="linear", d_k=2, d_v=2, seed=1240,
)  # fmt: skip
CHEF_CAUSAL_CONTEXT = _t([
    [0.0872, 0.2233], [0.1996, 0.0526], [0.1382, 0.1952], [0.1382, 0.1830], [0.1097, 0.2292], [0.1286, 0.1924],
    [0.1608, 0.1259], [0.1748, 0.1068], [0.1528, 0.1494], [0.1562, 0.1402], [0.1502, 0.1500], [0.1362, 0.1774],
])  # fmt: skip

INTEGER_INPUT = _t([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1], [3, 1, 1, 1]])

MATH_NOTES_X = _t([
    [1.1550e00, 1.3382e00, 1.6987e-03, -1.2204e00, 3.5535e-01],
    [-1.1931e00, 9.6666e-01, 3.7223e-01, 2.2102e-01, 1.0763e00],
    [9.9946e-02, -1.7015e-01, -1.2487e00, 7.5870e-01, -4.2486e-01],
    [1.1354e00, 1.1884e00, -1.7155e00, 5.7872e-01, 9.4685e-01],
])  # fmt: skip

_PRESETS = (
    Preset(
        "raschka-self-attention",
        RASCHKA,
        "Embed 'Life is short, eat dessert first' with a seeded nn.Embedding over the sorted words, "
        "project with torch.rand weights (d_k 24, d_v 28) and follow the second word, 'is', "
        "through omega, the scaled softmax and its context vector.",
        RASCHKA_BASE,
        (
            Check("embedded_sentence", "embeddings", (), RASCHKA_EMBEDDINGS),
            Check("omega_24 = query_2 . keys[4]", "omega", (0, 1, 4), 11.1466),
            Check("omega_2", "omega", (0, 1), (8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800)),
            Check("attention_weights_2", "weights", (0, 1), (0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458)),
            Check(
                "context_vector_2",
                "context",
                (0, 1),
                (-1.5993, 0.0156, 1.2670, 0.0032, -0.6460, -1.1407, -0.4908, -1.4632, 0.4747, 1.1926,
                 0.4506, -0.7110, 0.0602, 0.7125, -0.1628, -2.0184, 0.3838, -2.1188, -0.8136, -1.5694,
                 0.7934, -0.2911, -1.3640, -0.2366, -0.9564, -0.5265, 0.0624, 1.7084),
            ),  # fmt: skip
            Check("query_2.shape", "queries", (0, 1), (24,), shape_only=True),
            Check("values.shape", "values", (0,), (6, 28), shape_only=True),
        ),
    ),
    Preset(
        "raschka-multi-head",
        RASCHKA,
        "Three heads, each with its own torch.rand query, key and value matrices (3 x 24 x 16, "
        "3 x 24 x 16, 3 x 28 x 16), concatenated into a 3 x 28 = 84 wide context per token.",
        RASCHKA_BASE.replace(heads=3),
        (
            Check("stacked_inputs[:, 2]", "embeddings", (None, 2), (-0.3035, -0.2587, 1.0042, -2.1338, -0.1690, -1.4779)),
            Check("multihead_query_2.shape", "queries", (None, 1), (3, 24), shape_only=True),
            Check("multihead_keys.shape (heads, tokens, d_k)", "keys", (), (3, 6, 24), shape_only=True),
            Check("multihead_values.shape (heads, tokens, d_v)", "values", (), (3, 6, 28), shape_only=True),
        ),  # fmt: skip
        corrections=(
            "The tutorial's multi-head cells are wrong, so this preset computes correct multi-head "
            "attention instead: multihead_query_2.matmul(multihead_keys) multiplies every head's query "
            "with every head's keys (a 3 x 3 x 6 omega instead of 3 x 6), softmax runs over dim 0 "
            "(across heads, so rows do not sum to 1), and the final cell raises a RuntimeError. Its "
            "printed multi-head omega and weights cannot be reproduced from the code shown (the weights "
            "are drawn after the single-head ones, and no reseed reproduces them), so only its inputs "
            "and shapes are checked here; the heads draw fresh torch.rand(3, d, 16) weights from seed 123."
        ),
    ),
    Preset(
        "raschka-cross-attention",
        RASCHKA,
        "Queries from the six-word sentence, keys and values from a second sequence of 8 tokens "
        "drawn with torch.rand(8, 16) after the weights: omega and the weights become 6 x 8.",
        RASCHKA_BASE.replace(
            cross_sentence="a second input sequence of eight tokens here",
            cross_embedding_init="rand",
        ),
        (
            Check("query_2.shape", "queries", (0, 1), (24,), shape_only=True),
            Check("keys.shape", "keys", (0,), (8, 24), shape_only=True),
            Check("values.shape", "values", (0,), (8, 28), shape_only=True),
            Check("omega: 6 queries x 8 keys", "omega", (0,), (6, 8), shape_only=True),
        ),  # fmt: skip
        corrections="The tutorial prints only shapes here; the second sequence has no words, so it is labelled by eight placeholder words.",
    ),
    Preset(
        "spelled-out-multi-head",
        SPELLED_OUT,
        "Eight independent heads, each with its own nn.Linear query, key (1024 wide) and value "
        "(512 wide) layers with bias, concatenated (8 x 512 = 4096) and fed through one nn.Linear "
        "back to the 512-wide embedding.",
        Config(
            sentence=" ".join(f"t{i + 1}" for i in range(24)), embedding_init="rand", d_model=512,
            d_k=1024, d_v=512, heads=8, init="linear", bias=True, out_proj=True, seed=0,
        ),
        (
            Check("multi_head.forward(query, key, value).size() (one batch item)", "output", (), (24, 512), shape_only=True),
            Check("concatenated heads", "concat", (), (24, 4096), shape_only=True),
        ),  # fmt: skip
        corrections=(
            "The notebook draws separate random query, key and value inputs and a batch of 3 without a "
            "seed; this preset uses one 24-token input of torch.rand(24, 512) (self-attention) and seed 0. "
            "The notebook prints only the output's shape, which is checked."
        ),
    ),
    Preset(
        "math-notes",
        MATH_NOTES,
        "No projections: X (4 x 5) serves as queries, keys and values; the first token's scores "
        "K q / sqrt(5), its softmax weights and its output.",
        Config(sentence=None, embeddings=MATH_NOTES_X, d_model=None, init="identity", d_k=5, d_v=5),
        (
            Check("X", "embeddings", (), MATH_NOTES_X, decimals=None, significant=5),
            Check("weights (query X[0])", "weights", (0, 0), (0.6394, 0.0777, 0.0450, 0.2378)),
            # X is printed to 5 significant digits, so the output carries up to ~1e-4 of that rounding
            Check("output (query X[0])", "context", (0, 0), (0.9203, 1.2058, -0.4342, -0.5913, 0.5169), slack=5e-5),
            Check("self_attention(X) weights shape", "weights", (0,), (4, 4), shape_only=True),
            Check("self_attention(X) output shape", "context", (0,), (4, 5), shape_only=True),
        ),
        corrections=(
            "X comes from an unseeded torch.randn, so the preset takes X as printed. The later cells "
            "(SelfAttention, MultiHeadSelfAttention) use unseeded nn.Linear weights, so their printed "
            "numbers cannot be reproduced by anyone; the multi-head shape is shown by the split layout."
        ),
    ),
    Preset(
        "chef-unweighted",
        CHEF,
        "Level 1: no weights at all. Scores are dot products of the embeddings, unscaled, softmax "
        "over each row, and each context vector is a weighted sum of the embeddings.",
        CHEF_BASE.replace(init="identity", d_k=3, d_v=3, scale="none", seed=0),
        (
            Check("all_context_vecs", "context", (0,), _t([
                [0.5270, 0.5664, 0.5374], [0.5533, 0.5059, 0.5825], [0.5316, 0.5783, 0.5197],
                [0.5150, 0.5726, 0.5456], [0.5655, 0.5434, 0.5146], [0.5233, 0.5521, 0.5616],
                [0.5458, 0.5044, 0.5926], [0.5477, 0.5204, 0.5716], [0.5280, 0.5851, 0.5142],
                [0.5601, 0.5151, 0.5592], [0.5271, 0.5664, 0.5382], [0.5638, 0.5516, 0.5077],
            ])),
        ),  # fmt: skip
    ),
    Preset(
        "chef-self-attention",
        CHEF,
        "Level 2: trainable weights. Three nn.Linear(3, 2) layers without bias, seed 1240, scores "
        "scaled by sqrt(2).",
        CHEF_BASE,
        (
            Check("result", "context", (0,), _t([
                [0.1348, 0.1801], [0.1358, 0.1782], [0.1361, 0.1776], [0.1346, 0.1803],
                [0.1358, 0.1782], [0.1349, 0.1798], [0.1348, 0.1799], [0.1359, 0.1780],
                [0.1355, 0.1788], [0.1355, 0.1787], [0.1351, 0.1796], [0.1362, 0.1774],
            ])),
        ),  # fmt: skip
    ),
    Preset(
        "chef-causal",
        CHEF,
        "Level 3: the same weights with a causal mask: each word sees only itself and the words "
        "before it, so the last word's context equals the unmasked one.",
        CHEF_BASE.replace(mask="causal"),
        (Check("context_vectors[0]", "context", (0,), CHEF_CAUSAL_CONTEXT),),
        corrections=(
            "The listing builds the module twice and prints a 4-deep tensor; the printed numbers are "
            "the seed-1240 weights of Level 2 with the causal mask and dropout 0, which is what this computes."
        ),
    ),
    Preset(
        "chef-multi-head",
        CHEF,
        "Level 4: two heads cut from one nn.Linear(3, 2) per projection (head_dim 1, so no "
        "scaling), a causal mask, and an nn.Linear(2, 2) output projection with bias.",
        CHEF_BASE.replace(heads=2, head_layout="split", d_k=None, d_v=None, d_out=2, out_proj=True, mask="causal"),
        (
            Check("context_vecs[0]", "output", (), _t([
                [0.6238, -0.3816], [0.4784, -0.3510], [0.5800, -0.3691], [0.5747, -0.3686],
                [0.6151, -0.3764], [0.5870, -0.3709], [0.5370, -0.3618], [0.5201, -0.3580],
                [0.5527, -0.3642], [0.5459, -0.3633], [0.5536, -0.3648], [0.5761, -0.3689],
            ])),
        ),  # fmt: skip
        corrections="The listing calls MultiHeadAttention without its qkv_bias argument; the printed numbers come from qkv_bias=False, which this uses.",
    ),
    Preset(
        "chef-cross-attention",
        CHEF,
        "Bonus: the first six words query the last six. torch.rand(3, 4) query and key matrices "
        "and a torch.rand(3, 2) value matrix (x @ W), seed 42, scores scaled by sqrt(4).",
        Config(
            sentence="The chef prepared a delicious meal", embeddings=CHEF_EMBEDDINGS[:6],
            cross_sentence="and it was served with wine", cross_embeddings=CHEF_EMBEDDINGS[6:],
            d_model=None, init="rand", d_k=4, d_v=2, seed=42,
        ),
        (
            Check("result", "context", (0,), _t([
                [0.5326, 0.2634], [0.5321, 0.2654], [0.5345, 0.2637],
                [0.5325, 0.2636], [0.5334, 0.2634], [0.5322, 0.2642],
            ])),
            Check("The: result[0].tolist()", "context", (0, 0), (0.5325765609741211, 0.26338499784469604), decimals=6),
            Check("meal: result[5].tolist()", "context", (0, 5), (0.532193660736084, 0.26424530148506165), decimals=6),
        ),  # fmt: skip
        corrections=(
            "The cross-attention listing gives 'and' the embedding (0.59, 0.15, 0.95), but its first "
            "listing and its printed result use 0.50; this preset uses 0.50, which reproduces the result."
        ),
    ),
    Preset(
        "integer-example",
        INTEGER,
        "Four integer inputs and integer 4 x 5 weight matrices used as x @ W: queries, keys and "
        "values by hand, unscaled scores, softmax, and the weighted sum of the values.",
        Config(
            sentence=None, embeddings=INTEGER_INPUT, d_model=None, init="given", d_k=5, d_v=5, scale="none",
            w_key=_t([[0, 0, 1, 1, 1], [1, 1, 0, 0, 1], [0, 1, 0, 1, 1], [1, 1, 0, 0, 0]]),
            w_query=_t([[1, 0, 1, 0, 1], [1, 0, 0, 1, 1], [0, 0, 1, 0, 0], [0, 1, 1, 1, 0]]),
            w_value=_t([[0, 2, 0, 3, 1], [0, 3, 0, 1, 3], [1, 0, 3, 1, 1], [1, 1, 0, 2, 2]]),
        ),
        (
            Check("queries", "queries", (0,), _t([[1, 0, 2, 0, 1], [2, 2, 2, 4, 2], [2, 1, 3, 2, 2], [4, 1, 5, 2, 4]]), decimals=0),
            Check("keys", "keys", (0,), _t([[0, 1, 1, 2, 2], [4, 4, 0, 0, 2], [2, 3, 1, 2, 3], [2, 3, 3, 4, 5]]), decimals=0),
            Check("values", "values", (0,), _t([[1, 2, 3, 4, 2], [2, 8, 0, 6, 10], [2, 6, 3, 7, 7], [2, 10, 3, 13, 9]]), decimals=0),
            Check("attn_sc", "omega", (0,), _t([[4, 6, 7, 13], [16, 20, 26, 42], [12, 16, 20, 34], [18, 28, 32, 54]]), decimals=0),
            Check("attn_scores_softmax", "weights", (0,), _t([
                [1.2298e-04, 9.0869e-04, 2.4701e-03, 9.9650e-01],
                [5.1091e-12, 2.7895e-10, 1.1254e-07, 1.0000e00],
                [2.7895e-10, 1.5230e-08, 8.3153e-07, 1.0000e00],
                [2.3195e-16, 5.1091e-12, 2.7895e-10, 1.0000e00],
            ]), decimals=None, significant=5),
            Check("outputs", "context", (0,), _t([
                [1.9999, 9.9873, 2.9973, 12.9777, 8.9951], [2.0, 10.0, 3.0, 13.0, 9.0],
                [2.0, 10.0, 3.0, 13.0, 9.0], [2.0, 10.0, 3.0, 13.0, 9.0],
            ])),
        ),  # fmt: skip
    ),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}


def get(name: str) -> Preset:
    """The preset called name; a ValueError lists the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None


def select(result: Result, check: Check) -> torch.Tensor:
    """The part of a Result a check looks at."""
    t = getattr(result, check.tensor)
    index = tuple(slice(None) if i is None else i for i in check.index)
    return t[index] if index else t


def tolerance(check: Check, expected: torch.Tensor) -> torch.Tensor:
    """Half a unit of the last printed digit, elementwise (plus float32 slack)."""
    if check.significant is not None:
        mag = torch.where(expected == 0, torch.ones_like(expected), expected.abs())
        unit = 10.0 ** (torch.floor(torch.log10(mag)) - (check.significant - 1))
        return 0.5 * unit + 1e-7 * mag + check.slack
    return torch.full_like(expected, 0.5 * 10.0 ** -(check.decimals or 0) + 2e-7 + check.slack)


def verify_check(result: Result, check: Check) -> Outcome:
    computed = select(result, check)
    if check.shape_only:
        shape = tuple(computed.shape)
        ok = shape == tuple(check.expected)
        return Outcome(check, shape, 0.0, 0.0, ok)
    expected = torch.tensor(check.expected, dtype=torch.float64)
    got = computed.to(torch.float64)
    if got.shape != expected.shape:
        return Outcome(check, computed, math.inf, 0.0, False)
    err = (got - expected).abs()
    tol = tolerance(check, expected)
    return Outcome(check, computed, float(err.max()), float(tol.min()), bool((err <= tol).all()))


def verify(preset: Preset, result: Result | None = None) -> list[Outcome]:
    """Each printed number of a preset against the computed one."""
    result = compute(preset.config) if result is None else result
    return [verify_check(result, c) for c in preset.checks]
