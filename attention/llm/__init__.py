"""How LLMs run attention: grouped-query heads, the KV cache's memory, FlashAttention's tiles.

Built on `attention.basics`; `decoding` is the step-by-step generation with a KV cache.
"""
