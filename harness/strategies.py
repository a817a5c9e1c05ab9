"""Hypothesis strategies for random, small, valid attention configs (shared by the package's tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from attention import Config
from attention.basics.config import EMBEDDING_INITS, HEAD_LAYOUTS, MASKS, SCALES

# repeated words, punctuation and formula-like text are all ordinary tokens
WORDS = ("the", "chef", "a", "meal", "=1+1", "é", "Life")
RANDOM_INITS = ("rand", "rand-transposed", "linear", "identity")


def matrix(rows: int, cols: int) -> st.SearchStrategy[list[list[float]]]:
    number = st.floats(-3, 3, allow_nan=False, width=32)
    return st.lists(st.lists(number, min_size=cols, max_size=cols), min_size=rows, max_size=rows)


def sentence(n: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), min_size=n, max_size=n).map(" ".join)


@st.composite
def configs(
    draw: st.DrawFn,
    *,
    layouts: tuple[str, ...] = HEAD_LAYOUTS,
    inits: tuple[str, ...] = RANDOM_INITS,
    masks: tuple[str, ...] = MASKS,
    scales: tuple[str, ...] = SCALES,
    cross: bool | None = None,
    out_proj: bool | None = None,
    dropout: bool = True,
    d_out: bool = True,
    given_weights: bool = False,
) -> Config:
    """A valid Config: T up to 8, d_model up to 16, heads up to 4, every input source, mask and scale."""
    h = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(layouts))
    d_model = h * draw(st.integers(1, 16 // h)) if layout == "split" else draw(st.integers(1, 16))
    t_q = draw(st.integers(1, 8))
    kw: dict = {
        "heads": h,
        "head_layout": layout,
        "init": draw(st.sampled_from(inits)),
        "bias": draw(st.booleans()),
        "out_proj": draw(st.booleans()) if out_proj is None else out_proj,
        "out_bias": draw(st.booleans()),
        "seed": draw(st.integers(-(2**63), 2**64 - 1)),
    }
    source = draw(st.sampled_from((*EMBEDDING_INITS, "given")))
    if source == "given":
        kw.update(sentence=None, d_model=None, embeddings=draw(matrix(t_q, d_model)))
    else:
        kw.update(sentence=draw(sentence(t_q)), d_model=d_model, embedding_init=source)
    if layout == "independent":
        kw.update(d_k=draw(st.integers(1, 8)), d_v=draw(st.integers(1, 8)))
    elif d_out and draw(st.booleans()):
        kw["d_out"] = h * draw(st.integers(1, 4))
    t_k = t_q
    if draw(st.booleans()) if cross is None else cross:
        t_k = draw(st.integers(1, 8))
        if draw(st.booleans()):
            kw["cross_embeddings"] = draw(matrix(t_k, d_model))
        else:
            kw["cross_sentence"] = draw(sentence(t_k))
            kw["cross_embedding_init"] = draw(st.sampled_from((None, *EMBEDDING_INITS)))
    kw["mask"] = draw(st.sampled_from(masks))
    kw["padding"] = draw(st.integers(0, t_k + 1))
    kw["window"] = draw(st.integers(1, t_k + 1))
    if kw["mask"] == "custom":
        kw["custom_mask"] = draw(
            st.lists(st.lists(st.booleans(), min_size=t_k, max_size=t_k), min_size=t_q, max_size=t_q)
        )
    kw["scale"] = draw(st.sampled_from(scales))
    kw["temperature"] = draw(st.floats(0.25, 8))
    kw["dropout"] = draw(st.sampled_from((0.0, 0.0, 0.1, 0.5, 0.9))) if dropout else 0.0
    if given_weights and draw(st.booleans()):
        shape = Config(**{**kw, "init": "rand"})  # sizes as used, before the weights exist
        d_k, d_v = shape.head_dims
        width, hd_k, hd_v = shape.width, h * d_k, h * d_v
        kw.update(init="given", w_query=draw(matrix(width, hd_k)), w_key=draw(matrix(width, hd_k)))
        kw["w_value"] = draw(matrix(width, hd_v))
        if kw["out_proj"]:
            kw["w_out"] = draw(matrix(hd_v, shape.out_width))
    return Config(**kw)
