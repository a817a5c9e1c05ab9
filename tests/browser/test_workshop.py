"""A workshop a clicker can run, on a projector's 1024 x 768: the clicker's keys right after step mode is switched on,
every stage in view, numbers a room can read, a compact navigation in presenter mode, links without the presenter's
screen, figures that download for slides, and a very long word that does not freeze the tab.
"""

from __future__ import annotations

import base64
import io
import math
import re
import struct
import zipfile
from urllib.parse import parse_qs, urlparse

import pytest

from browser.test_pages import assert_clean, open_page, poll, settle, slider, stage_sequence, wait_for_charts

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
STAGE_BOX = '[data-testid="stMain"] .st-key-al-stage'
HEATMAPS_JS = """els => els.map(e => ({title: e.dataset.title, numbers: e.dataset.numberPx,
    measures: +e.dataset.measures, rows: +e.dataset.rows, cols: +e.dataset.cols}))"""


@pytest.fixture
def projector(page):
    page.set_viewport_size(PROJECTOR)
    return page


def heatmaps(page) -> list[dict]:
    return page.locator(".al-heatmap[data-drawn]").evaluate_all(HEATMAPS_JS)


def press_until(page, key: str, stage: int) -> None:
    page.keyboard.press(key)
    poll(lambda: stage_sequence(page), lambda seq: seq == [stage])
    settle(page)
    assert stage_sequence(page) == [stage], f"after {key}"


# Every text the sidebar's navigation shows, from the first frame on (the page's first script, before Streamlit's).
RECORD_NAV_JS = """
window.alNavTexts = [];
new MutationObserver(() => {
  const nav = document.querySelector('[data-testid="stSidebarNav"]');
  const text = nav ? nav.innerText : '';
  if (text && window.alNavTexts[window.alNavTexts.length - 1] !== text) window.alNavTexts.push(text);
}).observe(document, {childList: true, subtree: true, characterData: true});
"""


@pytest.mark.parametrize("path", ["", "masks"])
def test_the_first_frames_of_a_fresh_server_show_the_apps_navigation(browser, app_url, path):
    """The module's server is fresh for its first test: the sidebar never lists the pages/ folder's file names
    (dashboard, self attention, ...) while the app starts, at / or at a deep link."""
    context = browser.new_context(viewport=PROJECTOR)
    try:
        page = context.new_page()
        page.add_init_script(RECORD_NAV_JS)
        open_page(page, app_url, path, "seed=7")
        if path:
            wait_for_charts(page)
        else:  # the course's map: no chart
            page.get_by_role("heading", name=re.compile("predict, then see", re.I)).first.wait_for()
        texts = page.evaluate("window.alNavTexts")
        assert texts and "Self-attention" in texts[-1], texts
        assert not [t for t in texts if "dashboard" in t.lower() or "self attention" in t.lower()], texts
    finally:
        context.close()


def test_the_clicker_works_right_after_step_mode_is_switched_on_with_the_mouse(projector, app_url, page_errors):
    page = projector
    open_page(page, app_url, "self_attention")
    wait_for_charts(page)
    page.locator('[data-testid="stMain"] label').filter(has_text=re.compile("Step-by-step")).click()  # the mouse
    page.get_by_role("button", name=re.compile(r"^\s*Next")).wait_for()
    settle(page)
    focused = page.evaluate("document.activeElement && document.activeElement.getAttribute('role')")
    assert focused == "switch", focused  # the focus stayed on the switch, as after a click
    press_until(page, "PageDown", 1)
    press_until(page, "PageDown", 2)
    press_until(page, "PageUp", 1)
    assert_clean(page, page_errors)


def rect(page, selector: str) -> dict:
    """The first matching element's place in the window (px): top, bottom, height, width."""
    return page.locator(selector).first.evaluate(
        "e => { const r = e.getBoundingClientRect(); "
        "return {top: r.top, bottom: r.bottom, height: r.height, width: r.width}; }"
    )


def stage_box(page) -> dict:
    return rect(page, STAGE_BOX)


@pytest.mark.parametrize("present", [False, True])
def test_every_stage_is_in_view_on_a_projector(projector, app_url, page_errors, present):
    """The stage (its buttons, title, what to say and its figure) inside the 1024 x 768 window at every stage,
    with no scrolling by the presenter: the window scrolls to it when it shows and when it changes."""
    page = projector
    open_page(page, app_url, "self_attention", "stepmode=true" + ("&present=true" if present else ""))
    boxes = []
    for stage in range(7):
        if stage:
            press_until(page, "PageDown", stage)
        wait_for_charts(page)
        page.wait_for_timeout(300)  # the scroll happens on the next frame
        box = stage_box(page)
        boxes.append(box)
        assert box["top"] >= 0 and box["bottom"] <= PROJECTOR["height"], f"stage {stage + 1}: {box}"
    print("stage boxes", [(round(b["top"]), round(b["bottom"])) for b in boxes])
    assert_clean(page, page_errors)


@pytest.mark.parametrize("path", ["self_attention", "masks", "compare", "cross_attention"])
def test_presenter_pages_show_numbers_a_room_can_read(projector, app_url, page_errors, path):
    """In presenter mode every number drawn in a cell is at least 12 px, and the page's main matrices show them;
    the navigation is in the top bar and the class's sentence can be typed."""
    page = projector
    open_page(page, app_url, path, "present=true")
    wait_for_charts(page)
    page.wait_for_timeout(300)
    shown = heatmaps(page)
    sizes = [float(h["numbers"]) for h in shown if h["numbers"]]
    print(path, [(h["title"], h["numbers"]) for h in shown])
    assert sizes, f"no heatmap shows its numbers: {shown}"
    assert min(sizes) >= 12, shown
    assert not page.locator('[data-testid="stSidebar"]').is_visible()
    nav = page.locator('[data-testid="stHeader"]').inner_text()
    assert "Attention" in nav and "Experiments" in nav, nav  # the sections' menus, in the top bar
    assert page.get_by_role("button", name=re.compile("Sentence")).count() == 1
    assert_clean(page, page_errors)


def test_the_sentence_is_typed_in_presenter_mode(projector, app_url, page_errors):
    page = projector
    open_page(page, app_url, "self_attention", "present=true")
    wait_for_charts(page)
    page.get_by_role("button", name=re.compile("Sentence")).click()
    box = page.get_by_role("dialog").get_by_role("textbox")
    box.fill("the class types its own words")
    box.press("Control+Enter")
    poll(lambda: parse_qs(urlparse(page.url).query).get("sentence"), lambda v: v == ["the class types its own words"])
    settle(page)
    wait_for_charts(page)
    assert any(h["rows"] == 6 and "Softmax" in h["title"] for h in heatmaps(page))
    assert_clean(page, page_errors)


def test_the_presenter_types_the_key_sentence_of_cross_attention(projector, app_url, page_errors, shoot):
    """On the cross-attention page the presenter's "Sentence" box offers the key/value sentence too, and omega's
    columns (the keys) follow what is typed there."""
    page = projector
    open_page(page, app_url, "cross_attention", "present=true")
    wait_for_charts(page)
    shoot(page, "presenter_cross_attention")
    page.get_by_role("button", name=re.compile("Sentence")).click()
    dialog = page.get_by_role("dialog")
    assert dialog.get_by_role("textbox").count() == 2
    box = dialog.get_by_role("textbox", name="Key/value sentence (columns)")
    box.fill("and it was served")
    box.press("Control+Enter")
    poll(lambda: parse_qs(urlparse(page.url).query).get("cross_sentence"), lambda v: v == ["and it was served"])
    settle(page)
    wait_for_charts(page)
    omega = [h for h in heatmaps(page) if h["title"].startswith("Omega")]
    assert [(h["rows"], h["cols"]) for h in omega] == [(6, 4)], omega
    cols = page.locator(".al-heatmap[data-drawn]").evaluate_all(
        "els => els.filter(e => e.dataset.title.startsWith('Omega')).map(e => e.alState.header.cols)"
    )
    assert cols == [["1 and", "2 it", "3 was", "4 served"]], cols
    assert_clean(page, page_errors)


def in_window(page, selector: str) -> dict:
    """Where an element is in the window: its top, bottom, width (px) and whether it lies wholly inside, below the
    app's fixed top bar (which covers what scrolls under it)."""
    where = rect(page, selector)
    bar = rect(page, '[data-testid="stHeader"]')["bottom"]
    return {**where, "inside": where["top"] >= bar - 1 and where["bottom"] <= PROJECTOR["height"] + 1}


@pytest.mark.parametrize("present", [False, True])
def test_the_clicker_drives_the_kv_cache_and_flashattention(projector, app_url, page_errors, present):
    """PageDown/PageUp move the decoding step and the key block, and after every press the figures the press
    changed are in the 1024 x 768 window (the page opens on its title; a press scrolls its stage to the top)."""
    page = projector
    query = "present=true" if present else ""
    open_page(page, app_url, "kv_cache", query)
    wait_for_charts(page)
    assert in_window(page, '[data-testid="stMain"] h1')["inside"]  # it opens on its title, not scrolled
    page.locator('[data-testid="stMain"] h1').click()  # focus on the page, not on a control
    for step in (1, 2):
        page.keyboard.press("PageDown")
        poll(lambda: parse_qs(urlparse(page.url).query).get("decode_step"), lambda v, s=step: v == [str(s)])
        poll(lambda: slider(page, "Decoding step").input_value(), lambda v, s=step: v == str(s))
        settle(page)
        assert slider(page, "Decoding step").input_value() == str(step)
        page.wait_for_timeout(300)  # the scroll happens on the next frame
        for title in (f"Cached keys ({step + 1} ×", f"Step {step}: query"):
            box = in_window(page, f'.al-heatmap[data-title^="{title}"]')
            assert box["inside"], (step, title, box)
    page.keyboard.press("PageUp")
    poll(lambda: slider(page, "Decoding step").input_value(), lambda v: v == "1")
    settle(page)
    assert slider(page, "Decoding step").input_value() == "1"

    open_page(page, app_url, "flash_attention", query)
    wait_for_charts(page)
    page.locator('[data-testid="stMain"] h1').click()
    page.keyboard.press("PageDown")
    poll(lambda: slider(page, "Key block").input_value(), lambda v: v == "1")
    settle(page)
    assert slider(page, "Key block").input_value() == "1"
    assert page.get_by_role("heading", name=re.compile("After key block 1")).count() == 1
    page.wait_for_timeout(300)
    assert in_window(page, '.al-heatmap[data-title="Key block 1\'s scores"]')["inside"]
    for title in ("Running max m", "Running sum l"):  # in presenter mode, no chart narrower than 240 px (issue 34)
        width = in_window(page, f'.al-heatmap[data-title="{title}"]')["width"]
        assert width >= (240 if present else 120), (title, width)
    assert_clean(page, page_errors)


def shown_step(page) -> int | None:
    """The step of the snapshot Watch it learn shows ("Step 40: loss on the repeated half ..."), None before one."""
    said = page.locator('[data-testid="stMarkdown"]').filter(has_text=re.compile(r"^Step \d+:")).all_inner_texts()
    return int(re.match(r"Step (\d+)", said[0]).group(1)) if said else None


def test_the_clicker_drives_watch_it_learns_timeline(projector, app_url, page_errors):
    """PageDown shows the next snapshot of a trained run and PageUp the one before, right after a click on a button
    and with the timeline slider focused; Play still replays to the end afterwards."""
    page = projector
    open_page(page, app_url, "watch_it_learn", "train_steps=100&train_every=20")  # snapshots at 0, 20, ..., 100
    page.get_by_role("button", name=re.compile("Play")).click()
    play = page.get_by_role("button", name=re.compile("Play"))
    poll(lambda: (shown_step(page), play.is_enabled()), lambda v: v == (100, True), timeout_s=120)
    settle(page)
    assert shown_step(page) == 100 and page.get_by_text(re.compile("Trained: 100 steps")).count() == 1
    page.get_by_role("button", name=re.compile("Reset")).click()  # the mouse: the focus stays on the button
    poll(lambda: shown_step(page), lambda v: v == 0)
    settle(page)
    for key, step in (("PageDown", 20), ("PageDown", 40), ("ArrowRight", 60), ("PageUp", 40), ("ArrowLeft", 20)):
        page.keyboard.press(key)
        poll(lambda: shown_step(page), lambda v, s=step: v == s)
        settle(page)
        assert shown_step(page) == step, f"after {key}"
        timeline = page.get_by_role("slider", name=re.compile("Timeline"))
        assert timeline.get_attribute("aria-valuetext") == str(step), timeline.get_attribute("aria-valuetext")
    # with the timeline itself focused every key moves it as the clicker does (issue 32: PageDown, a range input's
    # "page down", moved it back while the clicker's moves it on)
    page.get_by_role("slider", name=re.compile("Timeline")).focus()
    for key, step in (("PageDown", 40), ("PageDown", 60), ("ArrowRight", 80), ("PageUp", 60), ("ArrowLeft", 40)):
        page.keyboard.press(key)
        poll(lambda: shown_step(page), lambda v, s=step: v == s)
        settle(page)
        assert shown_step(page) == step, f"after {key} on the focused timeline"
        timeline = page.get_by_role("slider", name=re.compile("Timeline"))
        assert timeline.get_attribute("aria-valuetext") == str(step), timeline.get_attribute("aria-valuetext")
        assert page.evaluate("document.activeElement.type") == "range"  # the focus stayed on the timeline
    play.click()  # Play replays from the snapshot shown to the end, and stops there
    poll(lambda: (shown_step(page), play.is_enabled()), lambda v: v == (100, True), timeout_s=60)
    assert shown_step(page) == 100 and play.is_enabled()
    assert_clean(page, page_errors)


def test_the_presenters_link_opens_the_ordinary_page_with_navigation(browser, projector, app_url, page_errors):
    """present=true and other pages' settings stay out of the link a page writes: a student who opens the presenter's
    link gets the page with its navigation and controls."""
    page = projector
    open_page(page, app_url, "compare", "b_heads=4")  # Compare's side B, then on to another page
    wait_for_charts(page)
    open_page(page, app_url, "masks", "present=true&seed=7&decode_step=3")
    wait_for_charts(page)
    query = parse_qs(urlparse(page.url).query)
    assert query.get("seed") == ["7"] and "present" not in query, query
    assert "decode_step" not in query and "b_heads" not in query, query
    other = browser.new_context(viewport=PROJECTOR)
    try:
        student = other.new_page()
        student.goto(page.url)
        settle(student)
        wait_for_charts(student)
        assert student.locator('[data-testid="stSidebarNav"]').is_visible()
        # read until it settles: in one CI run the box read "0" once, drawn while the sidebar was redrawn
        seed = poll(lambda: slider(student, "seed").input_value(), lambda v: v == "7", timeout_s=10.0)
        assert seed == "7"
    finally:
        other.close()
    assert_clean(page, page_errors)


def test_a_ten_thousand_character_word_is_drawn_with_a_bounded_number_of_measurements(projector, app_url, page_errors):
    """A prank link (?sentence=xxxx...) must not freeze the tab: label shortening measures a bounded prefix by
    halving, so a heatmap with a 10,000-character label takes as few text measurements as one with short labels."""
    page = projector
    word = "x" * 10_000
    open_page(page, app_url, "self_attention", f"sentence=short+{word}+words")
    wait_for_charts(page, timeout=60_000)
    shown = heatmaps(page)
    assert shown and all(h["rows"] == 3 for h in shown), shown
    open_page(page, app_url, "self_attention", "sentence=short+long+words")
    wait_for_charts(page)
    short = heatmaps(page)
    # the same figures; at most ~10 more measurements a label cut, against ~10,000 one character at a time before
    for long_one, short_one in zip(shown, short, strict=True):
        assert long_one["measures"] <= short_one["measures"] + 40, (long_one, short_one)
    page.goto(f"{app_url}/self_attention?sentence=short+{word}+words")
    settle(page)
    wait_for_charts(page)
    drawn = page.evaluate(
        "performance.getEntriesByType('measure').filter(m => m.name.startsWith('al-heatmap')).map(m => m.duration)"
    )
    print("heatmap draw times with a 10,000-character word (ms):", [round(d, 1) for d in drawn])
    assert drawn, "no heatmap reported its drawing time"
    assert_clean(page, page_errors)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    return struct.unpack(">II", data[16:24])


def svg_size(svg: str) -> tuple[int, int]:
    width, height = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg).groups()
    return int(width), int(height)


# An SVG file drawn in the page: its size and each text's box as it shows (after its transform: the slanted column
# labels), in the SVG's own pixels.
SVG_TEXTS_JS = """async svg => {
  const root = document.importNode(new DOMParser().parseFromString(svg, 'image/svg+xml').documentElement, true);
  const holder = document.createElement('div');
  holder.style.cssText = 'position: fixed; left: 0; top: 0';
  holder.append(root);
  document.body.append(holder);
  await document.fonts.ready;
  const origin = root.getBoundingClientRect();
  const texts = [...root.querySelectorAll('text')].map(t => {
    const b = t.getBoundingClientRect();
    return {text: t.textContent, left: b.left - origin.left, top: b.top - origin.top,
            right: b.right - origin.left, bottom: b.bottom - origin.top};
  });
  holder.remove();
  return {width: origin.width, height: origin.height, texts};
}"""
MARGIN = 8  # px: the least room between a downloaded figure's text and its edge


def test_a_small_multiple_downloads_as_a_figure_of_its_own(browser, app_url, downloads_dir):
    """Issue 32: Multi-head's per-head heatmaps leave their colour bar to one caption and their row labels to the
    first of their row. A download has neither neighbour, so it carries its own colour bar (the scale shared by the
    heads, 0 to the largest weight shown) and row labels, and a margin round it all: its title was at the edge.
    The page's "All figures" archive holds the same file."""
    context = browser.new_context(viewport=PROJECTOR, accept_downloads=True)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, app_url, "multi_head")
        wait_for_charts(page)
        figure = page.locator(".al-heatmap[data-title='head 2: weights']")
        shown = figure.evaluate("e => ({...e.alState.header, plotH: e.alState.layout.plotH})")
        assert shown["legend"] is False and shown["rowLabels"] is False  # on the page: the caption's, head 1's
        figure.hover()
        files = {}
        for kind in ("PNG", "SVG"):
            with page.expect_download() as info:
                figure.get_by_role("button", name=re.compile(f"as {kind}")).click()
            files[kind] = downloads_dir / f"multi-head-{info.value.suggested_filename}"
            info.value.save_as(files[kind])
        svg = files["SVG"].read_text(encoding="utf-8")
        width, height = svg_size(svg)
        assert png_size(files["PNG"].read_bytes()) == (2 * width, 2 * height)
        # the colour bar: a strip of 1 px bands from the shared top down to 0, with those two ends written beside it
        bands = re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="12.00" height="1.00" fill="rgb', svg)
        assert len(bands) == math.ceil(min(shown["plotH"], 200)), len(bands)
        assert shown["top"] < 1 and f">{shown['top']:.2f}</text>" in svg and ">0</text>" in svg, shown["top"]
        assert all(f">{label}</text>" in svg for label in shown["rows"]), shown["rows"]
        drawn = page.evaluate(SVG_TEXTS_JS, svg)
        assert (drawn["width"], drawn["height"]) == (width, height)
        title = next(t for t in drawn["texts"] if t["text"] == "head 2: weights")
        assert title["left"] >= 12 and title["top"] >= 12, title  # clear of the edge
        outside = [
            t for t in drawn["texts"] if min(t["left"], t["top"], width - t["right"], height - t["bottom"]) < MARGIN
        ]
        assert outside == [], outside

        with page.expect_download(timeout=60_000) as info:
            page.get_by_role("button", name=re.compile("All figures")).click()
        archive = zipfile.ZipFile(io.BytesIO(info.value.path().read_bytes()))
        assert archive.read("head-2-weights.svg").decode("utf-8") == svg
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_figures_download_as_png_and_svg_with_their_titles(browser, app_url, downloads_dir, scheme):
    context = browser.new_context(viewport=PROJECTOR, accept_downloads=True, color_scheme=scheme)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, app_url, "self_attention")
        wait_for_charts(page)
        figure = page.locator(".al-heatmap").filter(has=page.locator("canvas")).nth(2)  # the softmax weights
        figure.hover()
        with page.expect_download() as info:
            figure.get_by_role("button", name=re.compile("as PNG")).click()
        png = downloads_dir / info.value.suggested_filename
        info.value.save_as(png)
        assert png.name == "softmax-weights.png"
        w, _ = png_size(png.read_bytes())
        with page.expect_download() as info:
            figure.get_by_role("button", name=re.compile("as SVG")).click()
        svg = info.value.path().read_text(encoding="utf-8")
        width = svg_size(svg)[0]  # the page's figure and a margin round it (see the test below)
        assert width > figure.evaluate("e => e.alState.layout.width"), width
        assert abs(w - 2 * width) <= 2, (w, width)  # crisp at 2x
        assert svg.startswith("<?xml") and "<svg" in svg and ">Softmax weights</text>" in svg
        assert ">5 dessert</text>" in svg and ">1.00</text>" in svg  # the labels and the colour bar
        background = page.evaluate("getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        first = svg.split("]]></style>\n", 1)[-1].split("\n")[0]  # after the app's font (see the test below)
        assert first.startswith('<rect x="0.00" y="0.00"') and first.endswith(f'fill="{background}"/>'), svg[:400]
        ink = figure.evaluate("e => getComputedStyle(e).color")
        assert f'fill="{ink}" style="font: 600' in svg  # the title in the theme's ink

        open_page(page, app_url, "scaling")
        wait_for_charts(page)
        page.wait_for_timeout(1000)  # the charts' buttons are added just after they draw
        with page.expect_download(timeout=60_000) as info:
            page.get_by_role("button", name=re.compile("All figures")).click()
        archive = zipfile.ZipFile(io.BytesIO(info.value.path().read_bytes()))
        names = archive.namelist()
        assert archive.testzip() is None
        pngs = [n for n in names if n.endswith(".png")]
        svgs = [n for n in names if n.endswith(".svg")]
        assert len(pngs) == len(svgs) >= 3, names
        for name in pngs:
            png_size(archive.read(name))
        assert all(b"<svg" in archive.read(n) for n in svgs)
        assert not errors, errors
    finally:
        context.close()


# Every SVG blob the page turns into an address (the PNG of a Vega chart is drawn from one through an <img>).
RECORD_SVGS_JS = """
window.alSvgBlobs = [];
const createObjectURL = URL.createObjectURL;
URL.createObjectURL = (blob) => {
  if (blob instanceof Blob && blob.type === "image/svg+xml") window.alSvgBlobs.push(blob);
  return createObjectURL.call(URL, blob);
};
"""
# An SVG drawn at 2x through an <img>, as assets/figures.js draws a chart's PNG: a PNG data: URL.
RASTERIZE_JS = """async ([svg, width, height]) => {
  const url = URL.createObjectURL(new Blob([svg], {type: "image/svg+xml"}));
  const image = new Image();
  await new Promise((resolve, reject) => { image.onload = resolve; image.onerror = reject; image.src = url; });
  const canvas = document.createElement("canvas");
  canvas.width = 2 * width;
  canvas.height = 2 * height;
  const ctx = canvas.getContext("2d");
  ctx.scale(2, 2);
  ctx.drawImage(image, 0, 0, width, height);
  return canvas.toDataURL("image/png");
}"""
# Source Sans's upright face inline: its woff2 is 170 kB, so more than 100,000 characters of base64
FONT_FACE = re.compile(
    r'@font-face \{ font-family: "Source Sans"; font-style: normal;[^}]*src: url\("data:[^"]{100000,}"'
)


def pixels(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


def changed(a, b) -> float:
    """The share of pixels that differ between two images of one size."""
    from PIL import ImageChops

    assert a.size == b.size, (a.size, b.size)
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 16 else 0)
    return diff.histogram()[255] / (a.size[0] * a.size[1])


def rasterized(page, svg: str) -> bytes:
    """The SVG as the page draws it through an <img> at 2x (no @font-face: drawn in a system font)."""
    width, height = (int(float(v)) for v in re.search(r'<svg[^>]* width="([\d.]+)" height="([\d.]+)"', svg).groups())
    data = page.evaluate(RASTERIZE_JS, [svg, width, height])
    return base64.b64decode(data.split(",", 1)[1])


def without_fonts(svg: str) -> str:
    return re.sub(r"<style>.*?</style>", "", svg, flags=re.S)


def test_downloaded_figures_carry_the_apps_font(browser, app_url, downloads_dir):
    """A heatmap's and a Vega chart's PNG and SVG are in Source Sans, the page's font: the SVGs carry it as an
    @font-face with the font inline (fetched from the app's own server, nothing else), the chart's PNG is drawn from
    such an SVG and differs from the same SVG drawn without it, and the heatmap's PNG differs from one drawn in the
    fallback font."""
    context = browser.new_context(viewport=PROJECTOR, accept_downloads=True)
    try:
        page = context.new_page()
        page.add_init_script(RECORD_SVGS_JS)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        open_page(page, app_url, "self_attention")
        wait_for_charts(page)
        assert page.evaluate("getComputedStyle(document.body).fontFamily").startswith('"Source Sans"')
        figure = page.locator(".al-heatmap").filter(has=page.locator("canvas")).nth(2)  # the softmax weights
        figure.hover()

        def download(locator, name: str, prefix: str = "font") -> bytes:
            with page.expect_download() as info:
                locator.get_by_role("button", name=re.compile(f"as {name}")).click()
            path = downloads_dir / f"{prefix}-{info.value.suggested_filename}"
            info.value.save_as(path)
            return path.read_bytes()

        png = download(figure, "PNG")
        svg = download(figure, "SVG").decode("utf-8")
        assert FONT_FACE.search(svg), svg[:600]
        assert "Source Sans" in svg.split("</style>", 1)[1]  # the text asks for it
        assert changed(pixels(rasterized(page, svg)), pixels(rasterized(page, without_fonts(svg)))) > 0.002
        # the PNG is drawn on a canvas of the page, in the page's fonts: in the fallback font it would differ
        family = figure.evaluate("e => e.alState.layout.family")
        assert page.evaluate(f"document.fonts.check('16px {family}')")
        figure.evaluate("e => { e.alState.layout.family = 'sans-serif'; }")
        fallback = download(figure, "PNG", "fallback-font")
        figure.evaluate(f"e => {{ e.alState.layout.family = {family!r}; }}")
        ours, theirs = pixels(png), pixels(fallback)
        # the file is laid out in its font too (labels measured in it): its size differs, or its pixels do
        assert ours.size != theirs.size or changed(ours, theirs) > 0.002, (ours.size, theirs.size)

        open_page(page, app_url, "scaling")
        wait_for_charts(page)
        page.wait_for_timeout(1000)  # the charts' buttons are added just after they draw
        chart = page.locator(".vega-embed").filter(has=page.locator("svg")).first
        chart.hover()
        count = page.evaluate("window.alSvgBlobs.length")
        png = download(chart, "PNG")
        drawn_from = page.evaluate(f"window.alSvgBlobs[{count}].text()")  # the SVG the PNG was drawn from
        assert FONT_FACE.search(drawn_from), drawn_from[:600]
        assert changed(pixels(png), pixels(rasterized(page, drawn_from))) < 0.001
        assert changed(pixels(png), pixels(rasterized(page, without_fonts(drawn_from)))) > 0.002
        svg = download(chart, "SVG").decode("utf-8")
        assert FONT_FACE.search(svg) and 'font-family="&quot;Source Sans&quot;' in svg, svg[:600]
        outside = [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
        assert not outside, outside
    finally:
        context.close()


LUMINANCE = """(css) => {
  const [r, g, b] = css.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map(v => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}"""


def test_dark_theme_bar_values_and_legend_symbols_are_readable(browser, app_url):
    context = browser.new_context(viewport=PROJECTOR, color_scheme="dark")
    try:
        page = context.new_page()
        open_page(page, app_url, "soft_lookup")
        wait_for_charts(page)
        texts = page.locator(".vega-embed svg .role-mark.mark-text text")
        texts.first.wait_for(state="attached")  # the bars' chart may draw after the page's first chart
        values = texts.evaluate_all(f"els => els.map(e => ({LUMINANCE})(getComputedStyle(e).fill))")
        assert values and min(values) > 0.6, values  # light numbers beside the bars, on the dark page
        open_page(page, app_url, "scaling")
        wait_for_charts(page)
        legend = page.locator(".vega-embed svg .role-legend-symbol path")
        legend.first.wait_for(state="attached")  # the legend's chart may draw after the others
        symbols = legend.evaluate_all(
            "els => els.map(e => [+getComputedStyle(e).opacity, +getComputedStyle(e).fillOpacity])"
        )
        assert symbols and all(o == 1 and f == 1 for o, f in symbols), symbols  # not 25% blots on black
    finally:
        context.close()
