"""A room of learners: deploy/run.sh (two Streamlit replicas behind HAProxy with sticky sessions, kept running by
supervisord) spreads new sessions over both replicas, keeps each session's websocket and its downloads on one
replica, opens a share link with the same numbers on either replica, shows every number right under a short load
(websocket clients, and Chromium), survives a replica that dies (supervisord starts it again; its learners'
websockets close and they reconnect to the other replica with their view from the URL) or hangs (SIGSTOP:
HAProxy marks it down and closes its websockets; the watchdog restarts it), cuts off a request whose headers
never end, serves a class of 50 behind one address while another address holds 2,000 idle websockets (the
per-address bound), gives every replica the class poll's Redis, and stops everything on Ctrl-C with exit status
130 (a replica's memory cgroup removed).
Loopback only; needs haproxy, supervisor and Chromium (skips without them, fails when CI is set). No timing is
asserted: waits are bounded generously, and the benchmarks (benchmarks/load_test.py --faults,
benchmarks/room_flood.py) measure how long recovery and visits take.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import websocket

import ui
from benchmarks import load_test, room_flood
from harness import live_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live_server.Recipe]:
    live_server.require_haproxy()
    # The watchdog restarts a replica that has given no health "ok" for 15 s (30 s by default).
    running = live_server.start_recipe(2, tmp_path_factory.mktemp("deploy"), {"LAB_WATCHDOG_S": "15"})
    yield running
    live_server.stop_recipe(running)


def connects(recipe: live_server.Recipe) -> dict[str, float]:
    """How many sessions each process has accepted so far, by its own count (s1, s2)."""
    metric = 'session_events_total{type="connect"}'
    return {f"s{i}": load_test.stcore_metric(base, metric) for i, base in enumerate(recipe.replicas, 1)}


def direct(url: str) -> bytes:
    with load_test.OPENER.open(url, timeout=30) as response:
        return response.read()


def test_new_sessions_are_spread_over_both_processes(recipe: live_server.Recipe) -> None:
    before = connects(recipe)
    clients = [load_test.WsClient(base=recipe.proxy, session=s) for s in load_test.make_sessions(4, seed=11)]
    try:
        for client in clients:
            _, shown = client.rerun()
            assert client.check(shown), client.session.failures
        after = connects(recipe)
    finally:
        for client in clients:
            client.ws.close()
    placed = collections.Counter(client.replica for client in clients)
    assert set(placed) == {"s1", "s2"}
    # Each process accepted exactly the sessions the proxy's cookie says it sent there.
    assert {name: after[name] - before[name] for name in after} == {name: placed[name] for name in after}


def test_a_sessions_downloads_stay_on_its_own_process(recipe: live_server.Recipe) -> None:
    session = load_test.make_sessions(1, seed=4242)[0]
    client = load_test.WsClient(base=recipe.proxy, session=session)
    try:
        _, shown = client.rerun()
        assert client.check(shown), session.failures
        mine = int(client.replica.removeprefix("s")) - 1
        own, other = recipe.replicas[mine], recipe.replicas[1 - mine]
        button = next(b for b in shown["downloads"] if b["deferred"] and not b["disabled"])
        url = client.request_file(button["deferred"])  # the file now lives in the memory of the session's process
        bodies = [client.fetch(url) for _ in range(6)]  # through the proxy, with the session's cookie
        assert bodies[0] and all(body == bodies[0] for body in bodies)
        assert direct(own + url) == bodies[0]
        with pytest.raises(urllib.error.HTTPError) as missing:  # why stickiness: the other process lacks it
            direct(other + url)
        assert missing.value.code == 404
        name, value = load_test.next_value(session)  # the websocket is still the same session
        session.values[name] = value
        _, shown = client.rerun({name: value})
        assert client.check(shown), session.failures
    finally:
        client.ws.close()


def test_the_replicas_share_one_redis_for_the_poll(recipe: live_server.Recipe) -> None:
    """run.sh starts Debian's redis-server under supervisord and gives every replica its address: a room opened
    through one replica's address is the same room through the other's (server/poll over that Redis)."""
    from harness.redis_server import require_redis
    from server.poll import ENV, Poll, PollQuestion, RedisStore

    require_redis()
    urls = set()
    for name in ("s1", "s2"):
        pid = live_server.replica_pid(recipe, name)
        assert pid is not None
        urls.add(psutil.Process(pid).environ().get(ENV))
    (url,) = urls  # one address, the same for both
    assert url and url.startswith("redis://127.0.0.1:")
    one, two = Poll(RedisStore(url)), Poll(RedisStore(url))
    code, key = one.open()
    one.ask(code, key, PollQuestion("q", "?", "choice", ("a", "b")))
    two.answer(code, one.join(code), "q", "1")  # a token one replica issued counts through the other
    assert one.tally(code, one.room(code).question).counts == {"1": 1}


def test_a_share_link_opens_the_same_numbers_on_either_process(recipe: live_server.Recipe) -> None:
    session = load_test.make_sessions(1, seed=99)[0]
    first = load_test.WsClient(base=recipe.replicas[0], session=session)
    try:
        first.rerun()
        for _ in range(3):  # a learner moves sliders on process 1; the page keeps the view in its address
            name, value = load_test.next_value(session)
            session.values[name] = value
            _, made = first.rerun({name: value})
        assert first.check(made), session.failures
    finally:
        first.ws.close()
    link = first.query
    in_link = urllib.parse.parse_qs(link)
    for name, value in session.values.items():  # the link holds the view (a default is left out of it)
        assert in_link.get(name, [str(ui.PARAMS[name].default)]) == [str(value)], (name, link)
    before = connects(recipe)
    opened = {
        "process 2": load_test.WsClient(base=recipe.replicas[1], session=session, query=link),
        "proxy to s1": load_test.WsClient(base=recipe.proxy, session=session, query=link, cookies={"SRV": "s1"}),
        "proxy to s2": load_test.WsClient(base=recipe.proxy, session=session, query=link, cookies={"SRV": "s2"}),
    }
    try:
        for where, client in opened.items():
            _, shown = client.rerun()
            assert shown["charts"] == made["charts"], where
            assert shown["latex"] == made["latex"], where
            assert client.check(shown), (where, session.failures)
    finally:
        for client in opened.values():
            client.ws.close()
    # Process 2 took the direct link and the one sent to s2; process 1 the one sent to s1: the cookie decides.
    after = connects(recipe)
    assert {name: after[name] - before[name] for name in after} == {"s1": 1, "s2": 2}


def test_every_number_is_right_under_a_short_load_through_the_proxy(recipe: live_server.Recipe, tmp_path: Path) -> None:
    args = argparse.Namespace(sessions=8, duration=10, seed=5, think=0.3, chromium=None, url=recipe.proxy,
                              log=str(tmp_path / "unused.log"))  # fmt: skip
    result = load_test.measure(args, "ws")
    assert result["failures"] == []
    assert result["changes"] >= 8  # every session moved at least once ...
    assert result["changes_shown_correctly"] == result["changes"]  # ... and saw exactly its own numbers each time
    assert set(result["sessions_per_process"]) == {"s1", "s2"}
    assert sum(result["sessions_per_process"].values()) == 8


@pytest.mark.browser
def test_chromium_shows_every_number_through_the_proxy(recipe: live_server.Recipe, tmp_path: Path) -> None:
    # The real frontend: its page, scripts, the heatmap component's files and its websocket all pass the proxy.
    args = argparse.Namespace(sessions=2, duration=5, seed=6, think=0.5, chromium=live_server.require_chromium(),
                              url=recipe.proxy, log=str(tmp_path / "unused.log"))  # fmt: skip
    result = load_test.measure(args, "browser")
    assert result["failures"] == []
    assert result["changes"] >= 2
    assert result["changes_shown_correctly"] == result["changes"]
    assert result["sessions_per_process"] == {"s1": 1, "s2": 1}


def closed(client, timeout: float = 60) -> bool:
    """Whether the client's websocket is closed within `timeout` s (what the browser's reconnect waits for);
    any message still on its way is read first."""
    client.ws.settimeout(timeout)
    try:
        while client.ws.recv():
            pass
        return True  # a close frame
    except websocket.WebSocketConnectionClosedException:
        return True  # the connection cut
    except (websocket.WebSocketTimeoutException, TimeoutError):
        return False
    finally:
        client.ws.close()


def reconnect(client, timeout: float = 60):
    """A browser's reconnect: the same link and cookies again, retried while the proxy answers 502/503 (a
    request caught on a replica as it is marked down). The new session, checked against its numbers."""
    start = time.monotonic()
    while True:
        try:
            again = load_test.WsClient(base=client.base, session=client.session, query=client.query,
                                       cookies=client.cookies)  # fmt: skip
            break
        except (urllib.error.HTTPError, ConnectionError, websocket.WebSocketException) as exc:
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"no reconnect in {timeout} s: {exc}") from exc
            time.sleep(0.5)
    _, shown = again.rerun()
    assert again.check(shown), client.session.failures
    return again


def one_on_each(recipe: live_server.Recipe, seed: int) -> dict[str, load_test.WsClient]:
    """A learner on each replica (the cookie picks it), each shown its own numbers."""
    sessions = load_test.make_sessions(2, seed=seed)
    clients = {}
    for name, session in zip(("s1", "s2"), sessions, strict=True):
        for _ in range(3):  # on a loaded machine a replica restarted by the test before may be marked down a moment
            live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)
            clients[name] = load_test.WsClient(base=recipe.proxy, session=session, cookies={"SRV": name})
            _, shown = clients[name].rerun()
            if clients[name].replica == name:
                break
            clients[name].ws.close()
        assert clients[name].replica == name and clients[name].check(shown), session.failures
    return clients


def all_up(recipe: live_server.Recipe) -> bool:
    return live_server.proxy_servers(recipe) == {"s1": "UP", "s2": "UP"}


def still_serves(client: load_test.WsClient) -> None:
    """The learner moves a slider and sees exactly its own new numbers."""
    name, value = load_test.next_value(client.session)
    client.session.values[name] = value
    _, shown = client.rerun({name: value})
    assert client.check(shown), client.session.failures


def test_a_killed_replica_is_started_again_while_its_learners_move_to_the_other(recipe: live_server.Recipe) -> None:
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)
    clients = one_on_each(recipe, seed=71)
    old = live_server.replica_pid(recipe, "s2")
    os.kill(old, signal.SIGKILL)
    moved = None
    try:
        assert closed(clients["s2"])  # its websocket is closed, so the browser reconnects ...
        moved = reconnect(clients["s2"])  # ... and a live replica opens its view from the URL
        assert moved.replica == "s1"
        still_serves(clients["s1"])  # the other replica's learner never noticed
        still_serves(moved)
        # supervisord starts it again, and HAProxy sends learners to it once its health check passes.
        live_server.wait_for("s2 started again", lambda: live_server.replica_pid(recipe, "s2") not in (None, old), 90)
        live_server.wait_for("s2 up in HAProxy", lambda: all_up(recipe), 90)
        live_server.wait_for("s2's own health check", lambda: live_server.health(recipe.replicas[1]) == "ok", 60)
        back = load_test.WsClient(base=recipe.proxy, session=load_test.make_sessions(1, seed=72)[0],
                                  cookies={"SRV": "s2"})  # fmt: skip
        _, shown = back.rerun()
        assert back.replica == "s2" and back.check(shown), back.session.failures
        back.ws.close()
    finally:
        for client in (clients["s1"], moved):
            if client:
                client.ws.close()


def test_a_hung_replica_is_marked_down_its_websockets_closed_and_it_is_restarted(recipe: live_server.Recipe) -> None:
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)
    clients = one_on_each(recipe, seed=81)
    hung = live_server.replica_pid(recipe, "s2")
    os.kill(hung, signal.SIGSTOP)  # alive, holding its sockets, answering nothing
    moved = None
    try:
        # Without `on-marked-down shutdown-sessions` this websocket stayed open, and the page frozen, for the
        # tunnel timeout (then 2 h).
        assert closed(clients["s2"])
        assert live_server.proxy_servers(recipe)["s2"] == "DOWN"
        moved = reconnect(clients["s2"])
        assert moved.replica == "s1"
        still_serves(clients["s1"])
        still_serves(moved)
        fresh = load_test.WsClient(base=recipe.proxy, session=load_test.make_sessions(1, seed=82)[0])
        _, shown = fresh.rerun()
        assert fresh.replica == "s1" and fresh.check(shown), fresh.session.failures  # new learners avoid it
        fresh.ws.close()
        # Alive, it is never restarted for exiting: the watchdog (deploy/watchdog.py) kills it once it has failed
        # its health checks long enough, and supervisord starts it again.
        live_server.wait_for("s2 restarted", lambda: live_server.replica_pid(recipe, "s2") not in (None, hung), 120)
        live_server.wait_for("s2 up in HAProxy", lambda: all_up(recipe), 90)
        assert not psutil.pid_exists(hung) or psutil.Process(hung).status() == psutil.STATUS_ZOMBIE
    finally:
        try:
            os.kill(hung, signal.SIGCONT)  # had the watchdog failed
        except ProcessLookupError:
            pass
        for client in (clients["s1"], moved):
            if client:
                client.ws.close()
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)


def shows(page, session) -> str | None:
    """None when the page shows exactly its session's numbers, connected; else what differs."""
    return load_test.mismatch(page.evaluate(load_test.SNAPSHOT_JS), load_test.expected(session))


@pytest.mark.browser
def test_a_browser_on_a_hung_replica_reconnects_to_the_other_with_its_view(recipe: live_server.Recipe) -> None:
    # The real frontend: its websocket is closed by the proxy, it reconnects by itself, and the live replica
    # starts its session over from the URL. No page stays frozen.
    from playwright.sync_api import sync_playwright

    chromium = live_server.require_chromium()
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)
    session = load_test.make_sessions(1, seed=91)[0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=live_server.CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1024, "height": 768})
            context.add_cookies([{"name": "SRV", "value": "s2", "url": recipe.proxy}])
            page = context.new_page()
            page.goto(session.url(recipe.proxy))
            live_server.wait_for("the page shows its numbers", lambda: shows(page, session) is None, 90)
            s1_connects = lambda: load_test.stcore_metric(recipe.replicas[0], 'session_events_total{type="connect"}')  # noqa: E731
            before = s1_connects()
            hung = live_server.replica_pid(recipe, "s2")
            os.kill(hung, signal.SIGSTOP)
            try:
                cookie = lambda: {c["name"]: c["value"] for c in context.cookies()}.get("SRV")  # noqa: E731
                live_server.wait_for("the page moved to s1", lambda: cookie() == "s1", 90)
                live_server.wait_for("the page shows its numbers again", lambda: shows(page, session) is None, 90)
                assert s1_connects() == before + 1  # a new session on s1: the page shows no stale view
                assert shows(page, session) is None
            finally:
                try:
                    os.kill(hung, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # the watchdog has restarted it
        finally:
            browser.close()
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)


def test_the_proxy_cuts_off_a_request_whose_headers_never_end(recipe: live_server.Recipe) -> None:
    # A slow client (slowloris) holds a connection by sending its headers a byte at a time, or never ending
    # them: HAProxy answers 408 and closes it (`timeout http-request`), so Streamlit never holds it.
    host, port = recipe.proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: room\r\nX-Slow: ")
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]


def per_address_default() -> int:
    """The bound deploy/haproxy.cfg puts on one address's open connections when LAB_CONN_PER_ADDRESS is unset."""
    config = (ROOT / "deploy/haproxy.cfg").read_text()
    found = re.search(r"sc0_conn_cur gt \"\$\{LAB_CONN_PER_ADDRESS-(\d+)\}\"", config)
    assert found, "deploy/haproxy.cfg no longer bounds connections per address"
    return int(found.group(1))


@pytest.mark.timeout(900)
def test_one_address_holding_2000_idle_websockets_leaves_room_for_a_class(recipe: live_server.Recipe) -> None:
    # Issue 38: one client held 2,795 idle websockets (a tunnel each, for up to an hour), filled every replica's 900
    # connections, and 4 of 52 learners got 503. Now the proxy refuses an address's connections past its bound, and
    # a class behind one school NAT (all 50 learners from one other address) is served, each its own numbers.
    bound = per_address_default()
    live_server.wait_for("both replicas up", lambda: all_up(recipe), 90)
    flood = room_flood.open_flood(recipe.proxy, 2000)
    try:
        assert len(flood.held) == bound and flood.refused == 2000 - bound, (len(flood.held), flood.answered)
        assert room_flood.address_table(recipe)[room_flood.FLOOD_ADDRESS]["conn_cur"] == bound
        visits = room_flood.visit_class(recipe.proxy, 50)
        try:
            assert visits.refused == [] and visits.wrong == [] and visits.served == 50
            assert flood.open == bound  # held open the whole time: the class came while the replicas held them
        finally:
            room_flood.leave(visits)
    finally:
        flood.close()


def podman(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def require_compose_images() -> dict[str, str]:
    """The environment for podman-compose, once podman, podman-compose and the three images (built by
    deploy/container-build.sh) are found; skips without them, or fails when LAB_CONTAINERS=1 (.ci/run built them)."""
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(ROOT / "deploy/containers.conf"))}
    missing = [tool for tool in ("podman", "podman-compose") if not shutil.which(tool)]
    if not missing:
        images = ("localhost/attention-lab:latest", "localhost/attention-lab-haproxy:latest",
                  "localhost/attention-lab-redis:latest")  # fmt: skip
        missing = [image for image in images if podman("image", "exists", image, env=env).returncode != 0]
    if missing:
        reason = f"no {', '.join(missing)}: `bash deploy/container-build.sh` builds the images (README, Containers)"
        if os.environ.get("LAB_CONTAINERS") == "1":
            pytest.fail(f"LAB_CONTAINERS=1 and the compose test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return env


@pytest.mark.timeout(600)
def test_the_compose_room_restarts_a_killed_replica_and_moves_the_learners_of_a_frozen_one() -> None:
    # compose.yaml as written, with podman-compose: three non-root replicas with a memory limit behind HAProxy.
    env = require_compose_images()
    port = live_server.free_port()
    env["LAB_PORT"] = str(port)
    project = f"attention-lab-test-{port}"
    proxy = f"http://{live_server.LOOPBACK}:{port}"
    compose = ["podman-compose", "-p", project]
    name = lambda service: f"{project}_{service}_1"  # noqa: E731  (podman-compose's container names)
    pid = lambda service: int(podman("inspect", "-f", "{{.State.Pid}}", name(service), env=env).stdout.strip() or 0)  # noqa: E731
    healthy = lambda service: podman("healthcheck", "run", name(service), env=env).returncode == 0  # noqa: E731
    up = subprocess.run([*compose, "up", "-d"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    try:
        for service in ("s1", "s2", "s3"):
            live_server.wait_for(f"{service} healthy", lambda s=service: healthy(s), 180)
        live_server.wait_for("the proxy", lambda: live_server.health(proxy) == "ok", 60)
        for service in ("s1", "s2", "s3"):
            assert podman("exec", name(service), "id", "-u", env=env).stdout.strip() == "10001"  # not root
        limit = podman("exec", name("s1"), "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes", env=env).stdout
        limit = limit or podman("exec", name("s1"), "cat", "/sys/fs/cgroup/memory.max", env=env).stdout
        assert int(limit) == 690 * 2**20

        def learner(replica: str, seed: int) -> load_test.WsClient:
            client = load_test.WsClient(base=proxy, session=load_test.make_sessions(1, seed=seed)[0],
                                        cookies={"SRV": replica})  # fmt: skip
            _, shown = client.rerun()
            assert client.replica == replica and client.check(shown), client.session.failures
            return client

        # A replica's process killed (as the kernel does past its memory limit): the engine starts it again.
        on_s2, old = learner("s2", 101), pid("s2")
        os.kill(old, signal.SIGKILL)
        assert closed(on_s2)
        moved = reconnect(on_s2)
        assert moved.replica in ("s1", "s3")
        still_serves(moved)
        moved.ws.close()
        live_server.wait_for("s2 started again", lambda: pid("s2") not in (0, old), 120)
        live_server.wait_for("s2 healthy again", lambda: healthy("s2"), 180)

        def lands_on(replica: str, seed: int) -> bool:
            try:
                learner(replica, seed).ws.close()
                return True
            except AssertionError:  # the proxy has not marked it up yet: sent elsewhere
                return False

        live_server.wait_for("s2 back behind the proxy", lambda: lands_on("s2", 102), 60)
        # A replica frozen (the cgroup freezer: alive, answering nothing): HAProxy closes its websockets.
        on_s3 = learner("s3", 103)
        assert podman("pause", name("s3"), env=env).returncode == 0
        try:
            assert closed(on_s3)
            moved = reconnect(on_s3)
            assert moved.replica in ("s1", "s2")
            still_serves(moved)
            moved.ws.close()
        finally:
            podman("unpause", name("s3"), env=env)
    finally:
        subprocess.run([*compose, "down"], cwd=ROOT, env=env, capture_output=True, timeout=300)


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    live_server.require_haproxy()
    # Where the cgroup v1 memory controller is writable (root here), the replica also gets its memory limit.
    limited = os.access("/sys/fs/cgroup/memory", os.W_OK)
    running = live_server.start_recipe(1, tmp_path, {"LAB_MEMORY_LIMIT": "690M"} if limited else {})
    if limited:
        pid = live_server.replica_pid(running, "s1")
        group = next(line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                     if line.split(":")[1] == "memory")  # fmt: skip
        assert group.startswith("/attention-lab/")
        assert int(Path(f"/sys/fs/cgroup/memory{group}/memory.limit_in_bytes").read_text()) == 690 * 2**20
    children = psutil.Process(running.proc.pid).children(recursive=True)

    def cmdline(p: psutil.Process) -> list[str]:  # [] for a short-lived helper that ended (a zombie) meanwhile
        try:
            return p.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return []

    cmdlines = [c for c in map(cmdline, children) if c]
    names = {Path(c[0]).name for c in cmdlines}
    assert "haproxy" in names and any("python" in name for name in names)
    assert any("supervisord" in " ".join(c) for c in cmdlines)
    # What Ctrl-C in a terminal sends: SIGINT to the whole foreground group (run.sh and supervisord; the replicas
    # and HAProxy are in groups of their own, which supervisord stops). run.sh's exit status is its trap's,
    # whatever the order in which the processes end.
    os.killpg(running.proc.pid, signal.SIGINT)
    try:
        assert running.proc.wait(timeout=60) == 130
    except subprocess.TimeoutExpired:
        live_server.stop_recipe(running)
        raise
    _, alive = psutil.wait_procs(children, timeout=15)
    assert alive == []
    assert all(live_server.health(base) is None for base in (running.proxy, *running.replicas))
    if limited:  # issue 38: the replica's memory cgroup is removed once it has exited
        live_server.wait_for("the cgroup removed", lambda: not Path(f"/sys/fs/cgroup/memory{group}").exists(), 30)


def test_the_proxy_keeps_streamlits_metrics_from_visitors_and_forwards_the_clients_own_address(tmp_path) -> None:
    """Issue 50: /_stcore/metrics was public through the proxy, and the replicas saw every client as the proxy's
    address. HAProxy with deploy/haproxy.cfg, in front of a stand-in replica that records what reaches it: the
    metrics are refused as typed, percent-encoded or in capitals, and X-Forwarded-For holds the one address HAProxy
    saw, whatever the client wrote in it."""
    import http.server
    import threading

    haproxy = live_server.require_haproxy()
    reached: list[tuple[str, list[str] | None]] = []

    class Replica(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            reached.append((self.path, self.headers.get_all("X-Forwarded-For")))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")  # what the health check expects

        def log_message(self, *args) -> None:
            pass

    replica = http.server.ThreadingHTTPServer((live_server.LOOPBACK, 0), Replica)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    port = live_server.free_port()
    servers = tmp_path / "servers.cfg"
    where = f"{live_server.LOOPBACK}:{replica.server_address[1]}"
    servers.write_text(f"backend streamlit\n    server s1 {where} cookie s1\n")
    env = {**os.environ, "LAB_ADDRESS": live_server.LOOPBACK, "LAB_PORT": str(port)}
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg"), "-f", str(servers)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def status(path: str, headers: dict[str, str] | None = None) -> int:
        request = urllib.request.Request(f"http://{live_server.LOOPBACK}:{port}{path}", headers=headers or {})
        try:
            with load_test.OPENER.open(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code

    try:
        live_server.wait_for("the proxy to reach its replica", lambda: _answers(status), timeout=30)
        for path in ("/_stcore/metrics", "/_stcore/metrics?families=session", "/_stcore/%6Detrics", "/_STCORE/METRICS"):
            assert status(path) == 404, path
        assert not [p for p, _ in reached if "etrics" in p.lower()]  # none reached the replica
        reached.clear()
        assert status("/?who", {"X-Forwarded-For": "203.0.113.77"}) == 200
        assert [xff for p, xff in reached if p == "/?who"] == [["127.0.0.1"]]  # the client's own, the forged gone
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        replica.shutdown()


def _answers(status) -> bool:
    try:
        return status("/") == 200
    except OSError:
        return False


def test_the_rooms_redis_killed_comes_back_with_every_room(recipe: live_server.Recipe) -> None:
    """Issue 50: supervisord started a killed Redis again with nothing, so every room was lost. Its append-only file
    (LAB_REDIS_DIR) brings back the room, its question, its answers and the token secret."""
    from harness.redis_server import require_redis
    from server.poll import ENV, Poll, PollQuestion, RedisStore

    require_redis()
    url = psutil.Process(live_server.replica_pid(recipe, "s1")).environ()[ENV]
    poll = Poll(RedisStore(url, timeout_s=0.5))
    code, key = poll.open()
    question = PollQuestion("q", "?", "choice", ("a", "b"))
    poll.ask(code, key, question)
    token = poll.join(code)
    poll.answer(code, token, "q", "1")
    supervisorctl = shutil.which("supervisorctl") or "/usr/bin/supervisorctl"

    def redis_pid() -> int:
        done = subprocess.run([supervisorctl, "-s", f"unix://{recipe.log_dir}/supervisor.sock", "pid", "redis"],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        return int(done.stdout.strip()) if done.stdout.strip().isdigit() else 0

    killed = redis_pid()
    assert killed > 0 and (recipe.log_dir / "redis").is_dir()
    os.kill(killed, signal.SIGKILL)

    def back() -> bool:
        try:
            return redis_pid() not in (0, killed) and Poll(RedisStore(url, timeout_s=0.5)).store.ping() is None
        except Exception:  # noqa: BLE001 (still starting)
            return False

    live_server.wait_for("supervisord to start Redis again", back, timeout=30)
    again = Poll(RedisStore(url))  # a replica's view after the restart
    assert again.room(code).question == question and again.tally(code, question).counts == {"1": 1}
    assert again.holds(code, token)  # the secret came back with the rooms: the learner's token still counts
