"""The tiers, and what a bare `pytest` runs.

A bare `pytest` (no path named, from the checkout's root) runs the fast tier a developer runs every few minutes:
tests/unit and tests/app, less the thorough group (`@pytest.mark.thorough`: transformers' own models as oracles,
exhaustive inputs, fresh interpreters, model runs). `pytest --all`, or any run with CI set in the environment
(`.ci/run`, `python3 scripts/lab.py test`), runs every tier: unit, app, browser, system and the thorough group.
Naming paths or test ids runs exactly those (`pytest tests/browser/test_pages.py`), and `-m` chooses by marker among
every tier, as usual.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FAST = ("unit", "app")  # the fast tier's folders; browser/ and system/ start servers and browsers


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        dest="all_tiers",
        help="every tier (unit, app, browser, system and the thorough group), as CI runs; "
        "a bare pytest runs the fast tier (unit and app, less the thorough group)",
    )


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def fast_tier(config: pytest.Config) -> bool:
    """Whether this run is the fast tier: a bare `pytest` (its paths from testpaths), without --all, -m or CI."""
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not config.getoption("all_tiers")
        and not config.getoption("markexpr")
        and not in_ci()
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast tier, tests/browser and tests/system are not even imported."""
    if fast_tier(config) and collection_path.parent == TESTS and collection_path.is_dir():
        return True if collection_path.name not in FAST else None
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not fast_tier(config):
        return
    thorough = [item for item in items if item.get_closest_marker("thorough")]
    if thorough:
        config.hook.pytest_deselected(items=thorough)
        items[:] = [item for item in items if not item.get_closest_marker("thorough")]


def pytest_report_header(config: pytest.Config) -> str | None:
    if fast_tier(config):
        return "the fast tier: tests/unit and tests/app, less the thorough group (pytest --all runs every tier)"
    return None


@pytest.fixture(autouse=True, scope="session")
def _ui_loaded() -> None:
    """The tests that run the dashboard in this process (AppTest) find `ui` loaded, as every run on a server after
    its warm-up: whether a session's first run draws the first screen (dashboard.first_screen) then does not depend
    on which test ran first. tests/app/test_first_screen.py tests that screen on its own."""
    import ui

    ui.load()
