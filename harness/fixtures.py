"""Fixtures several test modules share; a module uses one by importing it (`from harness.fixtures import offline`).

- `one_thread` (autouse where imported): one intra-op torch thread for the module, as the server runs
  (deploy: OMP_NUM_THREADS=1); two threads on a busy two-core machine wait on each other at every operation.
- `offline`: the Hugging Face libraries offline, caching (if at all) in a temporary folder, never the home folder.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        yield
