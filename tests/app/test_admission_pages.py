"""Every page gives back what it was admitted for: once a page's run is over, no run of it is still counted as
computing against the server's memory (server/admission.py), whatever it keeps in its caches. A run counted as
computing after it ended makes every later run under the memory ceiling wait for it (issue 37's soak: 114 s)."""

from __future__ import annotations

import pytest

import dashboard
from harness.charts import open_page
from server import budget

PAGES = [path.removeprefix("pages/").removesuffix(".py") for pages in dashboard.PAGES.values() for path, *_ in pages]


@pytest.mark.thorough  # every page
@pytest.mark.parametrize("path", PAGES)
def test_a_pages_run_leaves_nothing_computing(path: str) -> None:
    before = (budget.SERVER.computing, budget.SERVER.passing)
    at = open_page(path, timeout_s=300)
    assert not at.exception
    assert (budget.SERVER.computing, budget.SERVER.passing) == before, path
