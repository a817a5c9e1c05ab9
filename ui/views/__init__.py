"""What one page (or one family of pages) draws and nothing else uses: a module a page, named after it.

    atlas.py     Head atlas: every head of a real model as a point, its table and what the scores say
    chat.py      Inside a chat model: the model's run, generation a token a step, the head view
    course/      the course: its lessons in order (lessons.py, figures.py) and the question → reveal flow (flow.py)
    llm.py       the LLM pages (KV cache, FlashAttention, grouped-query heads): their shared controls and charts
    model.py     Real model: MiniLM's reading of a sentence and one head at a time
    inventory.py "Check what you know": the attention inventory's two tries, a learner's gain, and a room's
    poll.py      the class poll's views: a learner's question and answers, the projector's split and reveal
    poll_questions.py  what a poll room can be asked: the demo's questions and the course's
    position.py  Position: the shuffle of a sentence
    watch_it_learn.py  Watch it learn: the training pool's run of a setting, its curves and its timeline
    growth.py    Watch it learn: how much the induction head reads from the previous-token head, snapshot by snapshot

They draw with `ui`'s shared helpers (charts, heatmaps, widgets, state, results) and never the other way round.

Each page declares its URL settings beside its helper and registers them with `ui.state` when imported: in the
helper itself (course/, inventory.py, poll.py, position.py), or in a settings module beside it (atlas_settings.py,
chat_settings.py, llm_settings.py, model_settings.py, watch_it_learn_settings.py): declarations only, so that the
registry fills without importing a helper that other pages must not import (model.py's readers) or that imports
altair (llm.py). `declare()` imports them all, and `ui.load()` (the first use of any `ui` name) calls it, so the
registry is whole before a session reads its link. Importing this package imports none of them: the course map's
module (course/outline.py) imports no torch, and draws a fresh server's first screen while torch is imported.
"""

import importlib
import importlib.util
from types import ModuleType

# the modules that declare the pages' settings (the course's in its package's settings module)
# (in the order in which they have always registered: a link's parameters are written in it)
DECLARING = ("atlas_settings", "chat_settings", "inventory", "poll", "watch_it_learn_settings", "course.settings",
             "llm_settings", "model_settings", "position")  # fmt: skip


def declare() -> None:
    """Import every page's declarations: `ui.load()` calls it before a session reads its link."""
    for name in DECLARING:
        importlib.import_module("." + name, __name__)


def __getattr__(name: str) -> ModuleType:
    """`from ui.views import poll`: the page's helper, with every page's declarations (as `import ui` gave it)."""
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    declare()
    return importlib.import_module("." + name, __name__)
