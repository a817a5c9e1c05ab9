"""ui.join: the address phones join a room at (issue 48): the set public address first, else the browser's own when
it is not this computer's, else this computer's network address, else the local one with words saying what to do."""

from __future__ import annotations

import pytest

from ui import join

PAGE = "http://localhost:8501/poll_room"


@pytest.fixture(autouse=True)
def listens_everywhere(monkeypatch):
    monkeypatch.setattr(join, "_configured", lambda: None)  # no browser.serverAddress set
    monkeypatch.setattr(join, "_listens_locally", lambda: False)


def test_the_public_address_set_wins_and_keeps_its_path() -> None:
    found = join.find(PAGE, {join.ENV: "https://lab.example.org/class/"})
    assert (found.base, found.how) == ("https://lab.example.org/class", "public")
    assert found.link("ABCDE") == "https://lab.example.org/class/poll?room=ABCDE"
    assert join.find(PAGE, {join.ENV: "lab.example.org"}).base == "https://lab.example.org"


@pytest.mark.parametrize(
    ("page", "base"),
    [
        ("https://attention-lab.streamlit.app/poll_room", "https://attention-lab.streamlit.app"),
        ("http://192.168.1.20:8501/poll_room", "http://192.168.1.20:8501"),
        ("http://lab.school.example:8080/lab/poll_room", "http://lab.school.example:8080/lab"),
    ],
)
def test_an_address_phones_can_open_is_used_as_the_browser_sees_it(page: str, base: str) -> None:
    found = join.find(page, {})
    assert (found.base, found.how, found.advice) == (base, "browser", "")


def test_localhost_becomes_this_computers_network_address_with_the_browsers_port(monkeypatch) -> None:
    monkeypatch.setattr(join, "network_address", lambda: "10.0.0.7")
    found = join.find("http://127.0.0.1:8512/lab/poll_room", {})
    assert (found.base, found.how) == ("http://10.0.0.7:8512/lab", "network")
    assert "10.0.0.7" in found.advice and "same Wi-Fi" in found.advice and join.ENV in found.advice


def test_only_a_local_address_says_so_and_what_to_do(monkeypatch) -> None:
    monkeypatch.setattr(join, "network_address", lambda: None)
    found = join.find(PAGE, {})
    assert (found.base, found.how) == ("http://localhost:8501", "local")
    assert found.advice.startswith("Phones cannot open localhost") and join.ENV in found.advice
    monkeypatch.setattr(join, "network_address", lambda: "10.0.0.7")
    monkeypatch.setattr(join, "_listens_locally", lambda: True)  # --server.address 127.0.0.1
    found = join.find(PAGE, {})
    assert found.how == "local" and "--server.address 0.0.0.0" in found.advice


@pytest.mark.parametrize(
    ("host", "local"),
    [("localhost", True), ("127.0.0.1", True), ("[::1]", True), ("0.0.0.0", True), ("app.localhost", True),
     ("192.168.1.20", False), ("lab.example.org", False), (None, True)],
)  # fmt: skip
def test_what_counts_as_this_computers_own_name(host, local: bool) -> None:
    assert join.is_local(host) is local


def test_no_address_known_gives_a_relative_link() -> None:
    assert join.find(None, {}).link("ABCDE") == "/poll?room=ABCDE"


def test_the_network_address_is_never_loopback() -> None:
    address = join.network_address()
    assert address is None or not join.is_local(address)
