"""The class poll as a lecturer and a class use it (issue 48), over the real server in Chromium: a projector at
1024 x 768, phones at 390 x 844.

- every question kind (choice, number, cell) answered on a phone, changed, and revealed, with the phone's periodic
  refresh (LAB_POLL_REFRESH_S=1 here: 3 s in a class) running for a minute after the answer: no error at any step;
- the projector's first screen, presenter mode included, shows the room's code, the QR code and the live split in
  the window, and so does the reveal;
- the instructor's key is in no address (issue 50): not in the projector's, not in a lesson's; a lesson's link opened
  on another device gives no host's controls; the projector's reload keeps its room.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser.conftest import SERVER_LOG, screenshot
from browser.test_pages import assert_clean, settle
from harness import live_server

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}
REFRESH_S = 1  # the phones' refresh in these tests: a minute holds sixty
WATCH_S = 60  # how long the refresh runs after the answer
# question id -> (the answer given first, the answer it is changed to), as a phone's controls take them
KINDS = {"demo.rows": ("0", "1"), "demo.causal": ("3", "4"), "demo.cell": ((0, 1), (0, 0))}


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    """The dashboard with the phones' refresh every REFRESH_S (the module's own server: the env is read at start)."""
    saved = os.environ.get("LAB_POLL_REFRESH_S")
    os.environ["LAB_POLL_REFRESH_S"] = str(REFRESH_S)
    port = live_server.free_port()
    try:
        proc = live_server.start(port, SERVER_LOG, append=True)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        if saved is None:
            os.environ.pop("LAB_POLL_REFRESH_S", None)
        else:
            os.environ["LAB_POLL_REFRESH_S"] = saved
    try:
        yield f"http://{live_server.LOOPBACK}:{port}"
    finally:
        live_server.stop(proc)


@pytest.fixture
def new_page(browser):
    """new_page(**context options): a page in a context of its own (another device); every one is closed after the
    test, so no phone or projector of an earlier test keeps refreshing beside the next one."""
    contexts = []

    def make(**options):
        contexts.append(browser.new_context(**options))
        page = contexts[-1].new_page()
        page.set_default_timeout(60_000)
        return page

    yield make
    for context in contexts:
        context.close()


def wait_text(page, pattern: str, timeout_s: float = 30) -> None:
    page.get_by_text(re.compile(pattern)).first.wait_for(timeout=timeout_s * 1000)


def open_room(page, app_url: str, query: str = "") -> str:
    """The projector opens a room; its code."""
    page.goto(f"{app_url}/poll_room" + (f"?{query}" if query else ""), timeout=120_000)
    try:
        page.get_by_role("button", name="Open a room").click(timeout=120_000)
    except Exception:
        screenshot(page, "room_open_failed")
        raise
    page.get_by_role("heading", name=re.compile(r"^[A-Z2-9]{5}$")).first.wait_for(timeout=60_000)
    # not `settle`: the projector's split reruns every half second, so on a busy machine it is seldom between runs
    page.get_by_role("button", name="Ask").wait_for(timeout=60_000)
    return re.search(r"Room code\s+([A-Z2-9]{5})", page.inner_text("body")).group(1)


def ask(page, text: str) -> None:
    """Pick the question whose text contains `text` and press Ask."""
    page.get_by_test_id("stSelectbox").first.click()
    page.get_by_role("option", name=re.compile(re.escape(text))).first.click()
    page.get_by_role("button", name="Ask").click()
    wait_text(page, "^Answered$")
    page.get_by_role("button", name="Reveal").wait_for()


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= page.viewport_size["height"]


def give(phone, qid: str, value) -> None:
    """Answer on the phone as a person does: a choice's button; a number typed and sent; a cell's row and column."""
    if qid == "demo.rows":
        labels = ["0", "1", "the number of keys", "it depends on the sentence"]
        phone.get_by_role("button", name=labels[int(value)], exact=True).click()
    elif qid == "demo.causal":
        box = phone.get_by_label("Your answer")
        box.fill(str(value))
        phone.get_by_role("button", name="Send").click()
    else:
        for label, index in zip(("Row (query)", "Column (key)"), value, strict=True):
            phone.get_by_test_id("stSelectbox").filter(has_text=label).click()
            phone.get_by_role("option").nth(index).click()
        phone.get_by_role("button", name="Send").click()
    wait_text(phone, "^Your answer: ")


def errors_on(phone) -> list[str]:
    texts = phone.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').all_inner_texts()
    body = phone.inner_text("body")
    return texts + (["the app's error page"] if "This app has encountered an error" in body else [])


@pytest.mark.parametrize("qid", list(KINDS))
def test_each_kind_answered_on_a_phone_survives_a_minute_of_refreshes_a_change_and_the_reveal(
    new_page, app_url, qid, page_errors, shoot
) -> None:
    first, then = KINDS[qid]
    projector = new_page(viewport=PROJECTOR)
    code = open_room(projector, app_url)
    ask(projector, {"demo.rows": "add up to", "demo.causal": "causal mask", "demo.cell": "largest"}[qid])
    phone = new_page(**PHONE)
    phone.on("pageerror", lambda error: page_errors.append(str(error)))
    phone.goto(f"{app_url}/poll?room={code}", timeout=120_000)
    wait_text(phone, "anonymous: no name is asked")  # not `settle`: the phone's page refreshes every second
    give(phone, qid, first)
    shown = phone.get_by_text(re.compile("^Your answer: ")).first.inner_text()
    end = time.monotonic() + WATCH_S
    looks = 0
    while time.monotonic() < end:  # the page's own refresh, again and again: the answer stays, nothing breaks
        phone.wait_for_timeout(2_000)
        assert errors_on(phone) == [], f"after {looks} looks: {errors_on(phone)}"
        assert phone.get_by_text(re.compile("^Your answer: ")).first.inner_text() == shown
        looks += 1
    give(phone, qid, then)
    deadline = time.monotonic() + 15
    while phone.get_by_text(re.compile("^Your answer: ")).first.inner_text() == shown:  # changed
        assert time.monotonic() < deadline, "the phone's changed answer was not shown"
        phone.wait_for_timeout(200)
    assert errors_on(phone) == []
    deadline = time.monotonic() + 10
    while projector.get_by_test_id("stMetricValue").first.inner_text().strip() != "1":
        assert time.monotonic() < deadline, "the projector did not count the phone's answer"
        projector.wait_for_timeout(200)
    projector.get_by_role("button", name="Reveal").click()
    wait_text(projector, "^The answer:")
    wait_text(phone, "^The answer:", 15)
    wait_text(phone, r"^You answered .*: (right|not this time)\.$", 15)
    phone.wait_for_timeout(3_000)  # a few more refreshes after the reveal
    assert errors_on(phone) == []
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    shoot(phone, f"room_phone_{qid}_revealed")
    assert_clean(phone, page_errors)


@pytest.mark.parametrize("present", [False, True], ids=["plain", "presenter"])
def test_the_projectors_first_screen_holds_code_qr_and_split_and_so_does_the_reveal(
    new_page, app_url, present, page_errors, shoot
) -> None:
    projector = new_page(viewport=PROJECTOR)
    projector.on("pageerror", lambda error: page_errors.append(str(error)))
    code = open_room(projector, app_url, "present=true" if present else "")
    ask(projector, "add up to")
    phone = new_page(**PHONE)
    phone.goto(f"{app_url}/poll?room={code}", timeout=120_000)
    give(phone, "demo.rows", "1")
    wait_text(projector, r"^1: 1 \(100 %\)$", 10)
    for stage in ("question", "revealed"):
        if stage == "revealed":
            projector.get_by_role("button", name="Reveal").click()
            wait_text(projector, "^The answer:")
            projector.get_by_role("button", name="Counts (CSV)").wait_for()
            projector.wait_for_timeout(1_000)  # the split's bars drawn after the answer's line
        projector.evaluate("window.scrollTo(0, 0)")
        what = {
            "the room's code": projector.get_by_role("heading", name=code).first,
            "the QR code": projector.get_by_test_id("stImage").first,
            "the count": projector.get_by_test_id("stMetricValue").first,
            "the split's last bar": projector.get_by_test_id("stProgress").last,
        }
        if stage == "revealed":
            what["the answer"] = projector.get_by_text(re.compile("^The answer:")).first
        shoot(projector, f"room_projector_{'presenter' if present else 'plain'}_{stage}")
        out = [name for name, locator in what.items() if not in_view(projector, locator)]
        assert out == [], f"{stage}: not in the 1024 x 768 window: {out}"
    # the counts are made when clicked (not at every tick of the projector): the file holds the revealed answer
    with projector.expect_download(timeout=30_000) as download:
        projector.get_by_role("button", name="Counts (CSV)").click()
    rows = Path(download.value.path()).read_text().splitlines()
    assert rows[0].startswith("question_id,") and any(row.endswith(",1,1,true") for row in rows[1:]), rows
    assert_clean(projector, page_errors)


def test_no_address_carries_the_key_and_a_lessons_link_gives_no_host_controls(new_page, app_url, page_errors) -> None:
    projector = new_page(viewport=PROJECTOR)
    instructor = projector.context
    code = open_room(projector, app_url)
    assert "host=" not in projector.url
    wait_text(projector, "^Phones cannot open")  # this server listens on loopback only: it says so, and what to do
    projector.reload()  # the instructor's browser keeps the room's key: the reload is still the projector
    projector.get_by_role("heading", name=code).first.wait_for(timeout=60_000)
    projector.get_by_role("link", name="The course, with this room").click()
    settle(projector)
    projector.get_by_role("button", name=re.compile("Start the course")).click()
    wait_text(projector, rf"^The room \({code}\): 0 answered", 60)
    projector.wait_for_url(re.compile(r"[?&]lesson="), timeout=30_000)  # the run's end writes the lesson's address
    lesson_url = projector.url
    assert f"room={code}" in lesson_url and "host=" not in lesson_url
    hrefs = projector.locator("a[href]").evaluate_all("els => els.map(a => a.href)")
    assert not [h for h in hrefs if "host=" in h]
    key = next(c["value"] for c in instructor.cookies() if c["name"] == f"lab_host_{code}")
    assert key not in lesson_url and not [h for h in hrefs if key in h]

    device = new_page(**PHONE)  # the lesson's link, shared: another device opens it
    device.on("pageerror", lambda error: page_errors.append(str(error)))
    device.goto(lesson_url, timeout=120_000)
    settle(device)
    assert "The room (" not in device.inner_text("body")
    device.goto(f"{app_url}/poll_room?room={code}", timeout=120_000)
    settle(device)
    assert device.get_by_role("button", name="Reveal").count() == 0
    assert device.get_by_role("button", name="Ask").count() == 0
    assert device.get_by_role("button", name="Open a room").count() == 1
    assert_clean(device, page_errors)
