"""The link a too-big view writes opens again on the real server (`streamlit run dashboard.py`).

The server (uvicorn with h11) refuses a request whose line and headers pass 16 KiB before all of them have
arrived. Over loopback a browser's request of up to ~128 KB usually arrives at once and passes, which hides
the limit; over a real network it arrives in pieces. So the link is also requested here in network-sized
pieces, as it would reach a deployed server.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.parse

import pytest

import ui
from browser.test_pages import assert_clean, open_page, poll, settle

pytestmark = pytest.mark.browser

QUERY_TEXT = " ".join(["é" * 99] * 100) + " "  # 10,000 characters, 60,000 once percent-encoded
KEY_TEXT = " ".join(["日本" * 49 + "語"] * 100) + " "  # 10,000 characters, 90,000 once percent-encoded
SEGMENT = 1448  # the payload of one TCP segment on a 1500-byte Ethernet link


def status_over_a_network(base: str, target: str, headers: dict[str, str]) -> str:
    """The status line the server answers a GET of target with, the request sent one segment at a time."""
    host, port = urllib.parse.urlsplit(base).netloc.split(":")
    lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items() if k.lower() != "connection")]
    request = ("\r\n".join([*lines, "Connection: close", "", ""])).encode()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        try:
            for start in range(0, len(request), SEGMENT):
                s.sendall(request[start : start + SEGMENT])
                time.sleep(0.002)  # let the server read each piece on its own, as it would over a network
            return s.recv(128).decode(errors="replace").split("\r\n")[0]
        except OSError as exc:  # the server closed the connection while the request was still arriving
            return f"refused ({exc.__class__.__name__})"


def test_a_view_too_big_for_a_link_writes_one_that_opens(page, app_url, page_errors, shoot) -> None:
    open_page(page, app_url, "cross_attention", "seed=7")
    for label, text in (("Query sentence", QUERY_TEXT), ("Key/value sentence", KEY_TEXT)):
        box = page.get_by_label(re.compile(label))
        box.fill(text)
        box.press("Control+Enter")  # a text area sends its value on Ctrl+Enter or when it loses focus
        settle(page)
    shoot(page, "test_share_links_too_big")
    assert page.get_by_text("too big to share as a link").count() == 1
    assert page.get_by_label(re.compile("Key/value sentence")).input_value() == KEY_TEXT
    href = page.evaluate("location.href")
    parts = urllib.parse.urlsplit(href)
    assert urllib.parse.parse_qs(parts.query) == {"seed": ["7"]}  # the sentences are left out, the rest kept
    assert len(parts.query) <= ui.URL_MAX

    response = page.goto(href)  # the written link, opened again in the browser
    assert response is not None and response.status == 200
    settle(page)
    assert_clean(page, page_errors)
    headers = response.request.all_headers()  # what this browser sends, cookies included
    assert status_over_a_network(app_url, f"{parts.path}?{parts.query}", headers).endswith("200 OK")
    # the harness sees the limit: the link that holds both sentences (what the app used to write) is refused
    both = urllib.parse.urlencode({"sentence": QUERY_TEXT, "cross_sentence": KEY_TEXT, "seed": "7"})
    assert not status_over_a_network(app_url, f"{parts.path}?{both}", headers).endswith("200 OK")


def address_query(page) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(page.evaluate("location.href")).query)


@pytest.mark.parametrize("unknown", [3, 1500])
def test_unknown_link_keys_leave_the_browsers_address(page, app_url, page_errors, unknown) -> None:
    """Issue 38: few or many, unknown link keys leave the address bar. A short link keeps the page's own value and
    names the unknown keys on the page; one of more than 1,000 parameters, which Streamlit ignores whole, opens the
    page's defaults."""
    junk = "&".join(f"junk{i}=x" for i in range(unknown))
    open_page(page, app_url, "self_attention", f"{junk}&heads=2")
    query = poll(lambda: address_query(page), lambda q: not [k for k in q if k.startswith("junk")])
    assert not [k for k in query if k.startswith("junk")], list(query)[:5]
    assert query.get("heads") == (["2"] if unknown < 1000 else None)
    if unknown < 1000:
        page.get_by_text("junk0 (unknown)").wait_for(timeout=30_000)
    assert_clean(page, page_errors)


def test_a_link_streamlit_ignores_whole_is_named_in_the_browser(page, app_url, page_errors) -> None:
    """Streamlit drops a query string of more than 1,000 parameters before the script runs; the browser
    (assets/link_check.js) tells the page, which says why it opened with its defaults. Once: a rerun keeps it, and
    moving a control takes it away."""
    junk = "&".join(f"junk{i}=x" for i in range(1500))
    open_page(page, app_url, "self_attention", f"{junk}&heads=2")
    page.get_by_text("it has 1,501 parameters, and a page reads a link of at most 1,000").wait_for(timeout=30_000)
    page.get_by_text("taken out of the address").wait_for(timeout=5_000)
    assert_clean(page, page_errors)
