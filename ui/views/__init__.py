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
altair (llm.py). They are all imported here, and `import ui` imports this package, so the registry is whole before a
session reads its link.
"""

from . import (
    atlas_settings,
    chat_settings,
    course,
    inventory,
    llm_settings,
    model_settings,
    poll,
    position,
    watch_it_learn_settings,
)

__all__ = ["atlas_settings", "chat_settings", "course", "inventory", "llm_settings", "model_settings", "poll",
           "position", "watch_it_learn_settings"]  # fmt: skip
