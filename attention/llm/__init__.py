"""How LLMs run attention: grouped-query heads, the KV cache's memory, FlashAttention's tiles.

Built on `attention.basics`; the step-by-step generation with a KV cache is `attention.decoding` (it joins this
folder once the work on the chat model's generation has landed).
"""
