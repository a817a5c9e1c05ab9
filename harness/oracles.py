"""transformers as the oracle for SmolLM2: its LlamaForCausalLM built from the same GGUF file with transformers' own
GGUF reading (dequantized to float32, W_q and W_k rows un-permuted). `from_pretrained(gguf_file=)` wants accelerate
only to place the weights, so the same loader, `load_gguf_checkpoint`, is called directly. Tests call it inside a
fixture or test that has `offline` (HF_HUB_OFFLINE=1): nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch


def llama_from_gguf(path: Path):
    """(transformers' LlamaForCausalLM in eval mode with eager attention, the keys the GGUF left missing)."""
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    config._attn_implementation = "eager"
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(config)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=skeleton)["tensors"]
    hf = LlamaForCausalLM(config)
    missing = hf.load_state_dict(tensors, strict=False).missing_keys
    hf.tie_weights()
    return hf.eval(), missing
