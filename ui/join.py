"""Where phones join a class poll: the address the projector shows (and its QR code encodes), found in this order:

1. the public address set for it: LAB_PUBLIC_URL (a copy behind a proxy or a tunnel: https://lab.example.org), or
   Streamlit's own `browser.serverAddress` (and `browser.serverPort`) when a config or flag sets it;
2. the address the projector's browser opened, when it is not this computer's own (a hosted copy's public address,
   the Network URL Streamlit prints);
3. this computer's address on its network, with the browser's port, when the projector opened localhost and the
   server listens beyond it (Streamlit's default);
4. else only the local address, which phones cannot open: `Join.advice` says what to do.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

ENV = "LAB_PUBLIC_URL"
PROBES = ("10.255.255.255", "192.168.255.255", "172.31.255.255")  # a UDP "connect" sends nothing: it picks a route


@dataclass(frozen=True)
class Join:
    """The base address learners open (no trailing slash; "" when the page's own address is unknown), where it came
    from (public | browser | network | local), and, for network and local, the words the projector says."""

    base: str
    how: str
    advice: str = ""

    def link(self, code: str) -> str:
        return f"{self.base}/poll?room={code}"


def is_local(host: str | None) -> bool:
    """Whether a host name only this computer can open (localhost, 127.x, ::1, 0.0.0.0)."""
    if not host or host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def network_address() -> str | None:
    """This computer's IPv4 address on its network (the one a packet out would leave from), None when it has only
    loopback. No packet is sent, and nothing outside is reached: it works offline, on a workshop's own Wi-Fi."""
    for probe in PROBES:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((probe, 9))
                address = s.getsockname()[0]
            except OSError:
                continue
        if not is_local(address):
            return address
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return None
    return next((i[4][0] for i in infos if not is_local(i[4][0])), None)


def _configured() -> str | None:
    """Streamlit's browser.serverAddress (with browser.serverPort) when set by a config file, a flag or the
    environment, and not a local name."""
    try:
        from streamlit import config
    except ImportError:  # pragma: no cover - streamlit is a dependency
        return None
    if config.get_where_defined("browser.serverAddress") == config.ConfigOption.DEFAULT_DEFINITION:
        return None
    host = str(config.get_option("browser.serverAddress") or "")
    if is_local(host):
        return None
    port = int(config.get_option("browser.serverPort") or 80)
    scheme = "https" if port == 443 else "http"
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + ("" if port == default else f":{port}")


def _listens_locally() -> bool:
    try:
        from streamlit import config

        address = str(config.get_option("server.address") or "")  # unset: every interface
    except (ImportError, RuntimeError):  # pragma: no cover
        return False
    if address in ("", "0.0.0.0", "::"):
        return False
    return is_local(address)


def find(page_url: str | None, environ: Mapping[str, str] | None = None) -> Join:
    """The address learners join at, for a projector whose browser shows `page_url` (st.context.url: a page's
    address, such as http://localhost:8501/poll_room)."""
    env = os.environ if environ is None else environ
    public = env.get(ENV, "").strip().rstrip("/")
    if public:
        return Join(public if "://" in public else "https://" + public, "public")
    here = urllib.parse.urlsplit(page_url or "")
    path = here.path.rsplit("/", 1)[0] if here.path else ""  # the app's own path prefix (server.baseUrlPath)
    configured = _configured()
    if configured:
        return Join(configured + path, "public")
    if not here.netloc:
        return Join("", "browser")  # no address known (a test's run): a relative link
    if not is_local(here.hostname):
        return Join(f"{here.scheme}://{here.netloc}{path}", "browser")
    local = f"{here.scheme}://{here.netloc}{path}"
    fix = f"open this page at the address phones can reach, or set {ENV} to it (a proxy's or tunnel's public address)"
    if _listens_locally():
        return Join(local, "local", f"Phones cannot open {here.hostname}, and this server listens on this computer "
                    f"only: start it with --server.address 0.0.0.0, or {fix}.")  # fmt: skip
    address = network_address()
    if address is None:
        return Join(local, "local", f"Phones cannot open {here.hostname}, and this computer has no network address "
                    f"now: join the room's Wi-Fi (or share a hotspot) and reload, or {fix}.")  # fmt: skip
    port = f":{here.port}" if here.port else ""
    return Join(f"{here.scheme}://{address}{port}{path}", "network", f"This is this computer's address on its "
                f"network ({address}): phones on the same Wi-Fi open it. If they cannot, a firewall may block port "
                f"{here.port or 80}, or the Wi-Fi keeps devices apart: {fix}.")  # fmt: skip
