"""The chat model's runs as every visitor shares them: its prompts' runs, its generations and its heads' writes, kept
within byte bounds and held for the visitor stepping through them, and the fair queue of its model steps.

ui/views/chat.py and ui/views/llm.py make and draw them (the runs themselves are `attention.models.smollm2`'s).
"""

from __future__ import annotations

import os

from attention.basics.sizes import held_bytes
from attention.models import smollm2
from attention.models.smollm2 import packed

from . import budget, sessions
from .shared import Shared, Turns

# A kept run is about 12 MB at 64 tokens (`smollm2.slim`): a few prompts. A generation of 64 tokens after 64 holds
# about 13 MB (its cache of 128 tokens, 5.9 MB, and every step's row of attention): a few prompts and settings.
# What a visitor is stepping through (their prompt's run and their generation) is held for them (server/shared.py):
# a run elsewhere that waits for memory does not take it away, while they use it (HOLD_S since their last click)
# and within HOLD_MB for each of the two (three visitors at the largest prompt and generation). What these caches
# keep is bounded here and counted as the process's memory under its limit (the budget's ceiling), not in the
# budget's bytes: held there, with three visitors generating the budget showed 94-97 MB held, the heaviest toy links
# were refused after 120 s with 230 MB of real memory free under the 690 MiB limit, and chat steps waited up to 26 s
# (benchmarks/results/2026-11-28-chat-crowd.md).
KEPT_MB, HOLD_MB, HOLD_S = 24, float(os.environ.get("ATTENTION_LAB_CHAT_HOLD_MB", 40)), 300.0
STEP_TURNS = Turns(slots=int(os.environ.get("ATTENTION_LAB_CHAT_STEP_SLOTS", 1)))  # model steps at once, server-wide
RUNS = Shared(KEPT_MB * budget.MB, held_bytes, hold_bytes=int(HOLD_MB * budget.MB), hold_s=HOLD_S)
GENERATIONS = Shared(KEPT_MB * budget.MB, lambda g: g[0].nbytes, hold_bytes=int(HOLD_MB * budget.MB), hold_s=HOLD_S)

# The traces kept, as the chat page keeps its prompt runs (RUNS above): bounded here and counted as the
# process's memory, not in the budget's bytes, and held for the visitor whose page draws it, so that a run elsewhere
# waiting for memory does not throw it away while they click through the heads (issue 50: evicted on every wait, each
# visitor's next click re-ran the whole prompt). About 5 MB at 64 tokens.
WRITES = Shared(24 * budget.MB, held_bytes, hold_bytes=40 * budget.MB, hold_s=300.0)


# A generation step multiplies the layers' weights packed (attention/models/smollm2/packed.py): 96 MiB, made on the
# first step. Nobody generating for PACKED_IDLE_S, or a run short of memory, lets it go: the server's memory at
# rest is what it was before issue 45, and the next step packs again (0.6 s quiet).
PACKED_IDLE_S = float(os.environ.get("ATTENTION_LAB_PACKED_IDLE_S", 600))


@budget.chore
def release_idle_packing() -> None:
    packed.release(PACKED_IDLE_S)


# A run short of memory lets go of the packed copy only when nobody has stepped through it for PACKED_BUSY_S: while
# visitors generate it is what they are stepping through (issue 50: let go at every wait under a crowd, each next
# step packed it again, ~100 MB and 0.6 s more, and a step admitted before it was let go packed it unadmitted).
PACKED_BUSY_S = 30.0


@budget.evictor
def release_packing() -> None:
    packed.release(PACKED_BUSY_S)


# Every forward is admitted against the server's memory budget (server/budget.py) for its peak (`smollm2.run_bytes`)
# before it runs, and what the caches keep holds its bytes there: a chat visitor waits, as a large toy run does,
# rather than pass the server's memory limit.
def prompt_run(ids: tuple[int, ...]) -> smollm2.Run:
    """The prompt's run, shared by every session and held for the visitor whose page draws it."""

    def make() -> smollm2.Run:
        model = smollm2.load()
        with packed.pinned(model):  # a one-token prompt is a step: sized with the packing it may need
            return budget.admitted(
                smollm2.run_bytes(model, len(ids)), lambda: smollm2.slim(smollm2.run_ids(model, ids)), held=unheld
            )

    return RUNS.get(ids, make, "The chat model reads the prompt…", holder=sessions.current())


def unheld(_: object) -> int:
    """What the budget keeps of a run's bytes once it is done: nothing for what RUNS and GENERATIONS keep."""
    return 0
