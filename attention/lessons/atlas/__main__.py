"""`python -m attention.lessons.atlas`: recompute the shipped atlases (shipped_atlases.pt) from both models.

Run it after changing a score, the corpus, the atlas's settings or a model: until then the atlases are computed on
each server's first visit, as the shipped key no longer matches (a thorough test in
tests/unit/attention/lessons/test_atlas_shipped.py says so too)."""

import time

import torch

from .runs import ship
from .shipped import SHIPPED

if __name__ == "__main__":
    torch.set_num_threads(1)  # as the server runs: the numbers the tests compare against
    start = time.perf_counter()
    written = ship()
    print(f"wrote {SHIPPED} ({SHIPPED.stat().st_size / 1000:.1f} kB): "
          f"{', '.join(f'{m} on {s}' for m, s in written)} in {time.perf_counter() - start:.0f} s")  # fmt: skip
