"""The LLM pages' settings (KV cache, FlashAttention), registered with `ui.state` when `ui` is imported.

Apart from ui/views/llm.py, which imports pandas and altair: `import ui` reads these declarations, and only the LLM
pages import their helper.
"""

from __future__ import annotations

from attention.basics.config import MAX_TOKENS
from attention.basics.params import Param
from attention.llm import kv_memory

from .. import state

SETTINGS: dict[str, Param] = {
    "decode_step": Param("int", "Decoding step t (token t + 1 arrives)", "Step t appends token t's key and value "
                         "to the cache and computes its one row of weights; the cache then holds t + 1 tokens.",
                         default=0, lo=0, hi=MAX_TOKENS - 1),
    "block_size": Param("int", "Block size", "How many keys FlashAttention reads at a time: one tile of scores is "
                        "all it ever stores.", default=2, lo=1, hi=MAX_TOKENS),
    "tile": Param("int", "Key block", "Which key block the tiled softmax has reached.", default=0, lo=0,
                  hi=MAX_TOKENS - 1),
    **kv_memory.SETTINGS,  # the KV cache page's, declared with the models it sizes
}  # fmt: skip

state.register("llm", SETTINGS)
