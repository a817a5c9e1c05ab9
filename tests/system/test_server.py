"""The real server: it needs no network (nothing fetched from outside loopback), and a restart loses no view.

`streamlit run dashboard.py` on a free loopback port. The browser tests drive it in headless Chromium with
every request to a host other than 127.0.0.1 aborted and recorded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

import dashboard
import ui
from attention import Config, compute
from harness import live_server

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = live_server.LOOPBACK
MARKUP = ("<img src=x onerror=alert(1)>", "**x**", "$\\frac{1}{0}$", '=HYPERLINK("http://x")', "www.x.org", "a@x.org")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = live_server.free_port()
    proc = live_server.start(port, tmp_path_factory.mktemp("server") / "streamlit.log")
    yield f"http://{LOOPBACK}:{port}"
    live_server.stop(proc)


def test_the_first_page_references_no_outside_host(server: str) -> None:
    with urllib.request.urlopen(server + "/", timeout=10) as r:
        html = r.read().decode()
    assert "<script" in html
    outside = [u for u in re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html) if re.match(r"(https?:)?//", u)]
    assert outside == []
    for sheet in re.findall(r"""href\s*=\s*["']([^"']+\.css)""", html):  # fonts come from the bundle
        with urllib.request.urlopen(server + "/" + sheet.lstrip("./"), timeout=10) as r:
            css = r.read().decode()
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", css), sheet
        assert "@import" not in css


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
        yield b
        b.close()


def offline_page(browser, outside: list[str]):
    """A page whose every request off loopback is aborted and recorded in `outside`."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})

    def route(r) -> None:
        if re.match(rf"(https?|wss?)://{re.escape(LOOPBACK)}[:/]", r.request.url) or r.request.url.startswith(
            ("data:", "blob:")
        ):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return context, context.new_page()


def settled(page, timeout: float = 60_000) -> None:
    """Wait until the app is connected and its script has finished running."""
    page.wait_for_selector("[data-testid=stApp][data-test-connection-state=CONNECTED]", timeout=timeout)
    page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]", timeout=timeout)
    page.wait_for_function("!document.querySelector('[data-stale=true]')", timeout=timeout)


def equations(page) -> list[str]:
    return page.eval_on_selector_all(".katex-mathml annotation", "els => els.map(e => e.textContent)")


@pytest.mark.browser
def test_every_page_loads_with_no_network(server: str, browser) -> None:
    outside: list[str] = []
    context, page = offline_page(browser, outside)
    try:
        page.goto(server + "/")
        settled(page)
        for section in dashboard.PAGES.values():
            for entry in section:  # through the sidebar, as a person moves between pages
                title = entry[1]
                link = page.get_by_test_id("stSidebarNav").locator("a").filter(has=page.get_by_text(title, exact=True))
                link.click()
                link.and_(page.locator("[aria-current=page]")).wait_for(timeout=30_000)
                settled(page)
                page.wait_for_selector("[data-testid=stMain] h1", timeout=30_000)
                assert page.locator("[data-testid=stException]").count() == 0, title
        page.goto(server + "/self_attention?seed=7")
        settled(page)
        page.wait_for_selector(".katex", timeout=60_000)
        page.wait_for_function("document.querySelectorAll('.al-heatmap[data-drawn]').length === 4")
        sizes = page.eval_on_selector_all(".al-heatmap", "els => els.map(e => e.alHeatmap.values.length)")
        assert sizes == [6 * 16, 36, 36, 6 * 28]  # the four heatmaps drew, every cell
    finally:
        context.close()
    assert outside == []


@pytest.mark.browser
def test_markup_tokens_show_as_plain_text(server: str, browser) -> None:
    outside: list[str] = []
    context, page = offline_page(browser, outside)
    try:
        sentence = urllib.parse.quote(" ".join(MARKUP))
        page.goto(f"{server}/self_attention?sentence={sentence}&token=0")
        settled(page)
        page.wait_for_selector(".katex", timeout=60_000)
        heading = page.locator("[data-testid=stMain] [data-testid=stMarkdownContainer] strong").first.inner_text()
        assert heading == "Following token 1: <img"
        assert page.locator("[data-testid=stMain] [data-testid=stMarkdownContainer] img").count() == 0
        page.wait_for_function("document.querySelectorAll('.al-heatmap[data-drawn]').length === 4")
        tokens = ["<img", "src=x", "onerror=alert(1)>", *MARKUP[1:]]
        labels = [f"{i + 1} {token}" for i, token in enumerate(tokens)]
        drawn = page.eval_on_selector_all(".al-heatmap", "els => els.map(e => e.alHeatmap.header.rows)")
        assert all(rows == labels for rows in drawn), drawn  # the canvas draws the labels as text, whole
        # the hover readout of a cell in every row names its token literally (textContent, never markup)
        omega = page.locator(".al-heatmap[data-title^=Omega] .al-heatmap-overlay")
        layout = page.eval_on_selector(".al-heatmap[data-title^=Omega]", "e => e.alState.layout")
        for i, label in enumerate(labels):
            omega.hover(
                position={"x": layout["left"] + layout["cellW"] / 2, "y": layout["top"] + (i + 0.5) * layout["cellH"]}
            )
            tip = page.locator(".al-heatmap[data-title^=Omega] .al-heatmap-tip")
            assert tip.is_visible() and f"row {label}" in tip.inner_text(), (label, tip.inner_text())
        assert page.locator(".al-heatmap img, .al-heatmap a").count() == 0
        picker = page.get_by_test_id("stSelectbox").filter(has_text="Token to follow").locator("input")
        for i, token in enumerate(tokens[2:], start=2):  # '>' at the end of a token, '$', '**', a URL, an e-mail
            picker.click()
            picker.fill(f"{i + 1} {token}")  # the combobox filters its options as one types
            page.get_by_role("option").filter(has_text=f"{i + 1} {token}").first.click()
            strong = page.locator("[data-testid=stMain] [data-testid=stMarkdownContainer] strong").first
            page.wait_for_function(
                "n => document.querySelector('[data-testid=stMain] [data-testid=stMarkdownContainer] strong')"
                ".innerText.startsWith(`Following token ${n}:`)",
                arg=i + 1,
            )
            assert strong.inner_text().replace("\u2060", "") == f"Following token {i + 1}: {token}"
            assert strong.locator("a, img, em, code, .katex").count() == 0  # no link, image, emphasis or math
    finally:
        context.close()
    assert outside == []


@pytest.mark.browser
def test_the_page_reconnects_to_the_same_view_after_a_restart(browser, tmp_path: Path) -> None:
    port = live_server.free_port()
    log = tmp_path / "streamlit.log"
    proc = live_server.start(port, log, append=True)
    outside: list[str] = []
    context, page = offline_page(browser, outside)
    try:
        page.goto(f"http://{LOOPBACK}:{port}/self_attention?seed=7&mask=causal&d_k=8")
        settled(page)
        page.wait_for_selector(".katex", timeout=60_000)
        before = equations(page)
        # the page's default weights; the walkthrough follows "2 is"
        weights = compute(Config(seed=7, mask="causal", d_k=8, init="normal", draws="stable")).weights[0, 1]
        num = ui.walkthroughs._num
        shown = rf"\alpha_{{2,1}} = {num(float(weights[0]))}, \alpha_{{2,2}} = {num(float(weights[1]))}"
        assert any(shown in e for e in before), before
        live_server.stop(proc)
        page.wait_for_selector("[data-testid=stApp][data-test-connection-state=PINGING_SERVER]", timeout=30_000)
        assert "CONNECTING" in page.locator("[data-testid=stStatusWidget]").inner_text().upper()
        proc = live_server.start(port, log, append=True)
        settled(page, timeout=90_000)
        page.wait_for_selector(".katex", timeout=60_000)
        page.wait_for_function("!document.querySelector('[role=dialog]')", timeout=30_000)  # "Connection error"
        page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')", timeout=30_000)
        seed = page.get_by_role("spinbutton", name="seed")  # a seed is a number box (ui.widgets.is_seed)
        expect(seed).to_have_value("7", timeout=30_000)
        assert "seed=7" in page.url and "mask=causal" in page.url
        assert equations(page) == before  # the same view, recomputed by the new server
        assert page.locator("[data-testid=stException]").count() == 0
    finally:
        context.close()
        live_server.stop(proc)
    assert outside == []


def test_the_server_imports_torch_before_its_first_visitor(tmp_path: Path) -> None:
    """dashboard.py imports `ui` (torch) as the server starts, so the first visitor's script run does not wait for
    it; nothing connects here, and torch's library appears in the process anyway."""
    port = live_server.free_port()
    log = tmp_path / "streamlit.log"
    proc = live_server.start(port, log)
    try:
        maps = Path(f"/proc/{proc.pid}/maps")
        if not maps.exists():
            pytest.skip("reads /proc (Linux)")
        live_server.wait_for("torch in the server", lambda: "libtorch_cpu" in maps.read_text(), timeout=90)
        time.sleep(2)  # the warm-up's first computation
        assert "Traceback" not in log.read_text(), live_server.log_tail(log)
        assert "missing ScriptRunContext" not in log.read_text()  # nothing of the warm-up speaks in the log
    finally:
        live_server.stop(proc)


@pytest.mark.parametrize("as_script", [True, False])
def test_the_warm_up_starts_with_the_server_not_with_the_import(as_script: bool) -> None:
    """Importing dashboard.py starts no thread, as `streamlit run dashboard.py` does (sys.argv set to the script) or
    as a test does for its PAGES; the server's start-up hook (`lifespan`) starts the warm-up. Started at the import,
    torch's import slowed the server's own start and the first screen, which needs no torch."""
    argv = f"sys.argv = [{str(ROOT / 'dashboard.py')!r}]; " if as_script else ""
    code = (f"import asyncio, sys, threading; {argv}import dashboard\n"
            "print(sorted(t.name for t in threading.enumerate()))\n"
            "async def serve():\n    async with dashboard.lifespan(None):\n"
            "        print(sorted(t.name for t in threading.enumerate()))\n"
            "asyncio.run(serve())")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    imported, served = out.stdout.splitlines()[:2]
    assert "warm-up" not in imported and "warm-up" in served, out.stdout
