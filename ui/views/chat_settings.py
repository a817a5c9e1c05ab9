"""The "Inside a chat model" page's settings, registered with `ui.state` when `ui` is imported.

They are SmolLM2's page settings (attention/models/smollm2/settings.py, shared with `--model smollm2`) under the
chat_ prefix: its layer and head count 30 and 9, not the Real model page's 6 and 12.
"""

from __future__ import annotations

from attention.models import smollm2

from .. import state

PREFIX = "chat_"  # the page's parameters in the URL: chat_layer, chat_head, ...

state.register("chat", smollm2.SETTINGS, prefix=PREFIX, long={"prompt": "the prompt"})
