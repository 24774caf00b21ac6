"""What a Wyoming client may do, tried with the ``wyoming`` library's own client against the real
``voxqueue wyoming`` in front of real workers: by default only this machine is answered, its
turns run as the device ``wyoming`` with no side effect, one address starts a bounded number of
turns a minute, and made-up conversation ids share the device's limits."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wyoming.asr import Transcript
from wyoming.audio import AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.handle import Handled
from wyoming.ping import Ping
from wyoming.tts import Synthesize

from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
#: The networks a LAN uses (what the old default answered).
LAN = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                         "fc00::/7")]


def lan_address() -> str | None:
    """An address of this machine that is not loopback (one in a LAN range if there is one),
    so a connection to it comes from a LAN peer, as Home Assistant's would."""
    found = []
    for family, probe in ((socket.AF_INET6, "2001:db8::1"), (socket.AF_INET, "192.0.2.1")):
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))  # no packet is sent: only the route is looked up
            found.append(ipaddress.ip_address(s.getsockname()[0]))
    usable = [a for a in found if not a.is_loopback and not a.is_link_local]
    usable.sort(key=lambda a: not any(a in net for net in LAN))
    return str(usable[0]) if usable else None


@contextlib.contextmanager
def wyoming(system: Any, log_path: Path, host: str = "127.0.0.1",
            **env: str) -> Iterator[int]:
    """``voxqueue wyoming`` on ``host`` with ``env`` over the system's; yields its port."""
    port = free_port()
    bound = f"[{host}]" if ":" in host else host
    loopback = "::1" if ":" in host else "127.0.0.1"  # asyncio's "::" takes no IPv4
    with log_path.open("wb") as log:
        proc = subprocess.Popen([*VOXQUEUE, "wyoming", "--uri", f"tcp://{bound}:{port}"],
                                env={**system.env, **env}, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            give_up = time.time() + 30
            while True:
                try:
                    socket.create_connection((loopback, port), timeout=1).close()
                    break
                except OSError:
                    assert proc.poll() is None and time.time() < give_up, log_path.read_text()
                    time.sleep(0.2)
            yield port
        finally:
            proc.terminate()
            proc.wait(10)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def request(host: str, port: int, *events: Event) -> Event | None:
    """Send ``events`` on a new connection (as Home Assistant does per request); the answer,
    or None when the server closed the connection without one."""
    with contextlib.suppress(ConnectionError):
        async with AsyncTcpClient(host, port) as client:
            for event in events:
                await client.write_event(event)
            while (answer := await client.read_event()) is not None:
                if answer.type in ("pong", "handled", "not-handled", "error", "audio-start"):
                    return answer
    return None


def say(text: str, conversation: str) -> Event:
    return Transcript(text=text, context={"conversation_id": conversation}).event()


def tool_results(fake: Any) -> list[str]:
    """What each tool call told the model, in order (the requests after a tool answered)."""
    return [m["content"] for body in fake.chat_requests() for m in body["messages"][-1:]
            if m["role"] == "tool"]


def offered(fake: Any) -> set[str]:
    return {t["function"]["name"] for t in fake.chat_requests()[0].get("tools", [])}


@pytest.fixture(scope="module")
def lan() -> str | None:
    return lan_address()


@pytest.fixture(scope="module")
def default_server(system, lan, tmp_path_factory) -> Iterator[tuple[int, str, Path]]:
    """As shipped (no Wyoming setting), listening on every address of the LAN's family; its
    port, this machine's loopback address in that family, and its log."""
    wildcard = "::" if lan and ":" in lan else "0.0.0.0"
    log = tmp_path_factory.mktemp("wy") / "lan.log"
    with wyoming(system, log, wildcard) as port:
        yield port, "::1" if wildcard == "::" else "127.0.0.1", log


@pytest.fixture(scope="module")
def allowing_server(system, tmp_path_factory) -> Iterator[int]:
    with wyoming(system, tmp_path_factory.mktemp("wy") / "allowing.log",
                 VOXQUEUE_WYOMING_TOOLS="remember,create_monitor") as port:
        yield port


def test_a_lan_host_is_refused_until_named_and_this_machine_is_served(default_server, lan):
    port, loopback, log = default_server
    assert run(request(loopback, port, Ping(text="local").event())) is not None
    if lan is None:
        pytest.skip("this machine has no address but loopback")
    assert run(request(lan, port, Ping(text="lan").event())) is None
    assert "not in VOXQUEUE_WYOMING_ALLOW" in log.read_text() and lan in log.read_text()


def test_by_default_a_wyoming_conversation_cannot_run_a_side_effect(default_server, fake,
                                                                    client):
    fake.script_chat(
        {"match": "remember", "tool_calls": [
            {"name": "remember", "arguments": {"fact": "the alarm code is 2468"}}]},
        {"after_tool": True, "content": "I could not do that."})
    port, loopback, _ = default_server
    answer = run(request(loopback, port, say("remember the alarm code is 2468", "made-up-1")))
    assert answer is not None and Handled.is_type(answer.type)
    assert "remember" not in offered(fake) and "recall" in offered(fake)
    (result,) = tool_results(fake)
    assert result.startswith("Error: remember has side effects"), result
    kept = client.redis.hvals(client.keys.memory("device:wyoming"))
    assert not any(b"2468" in fact for fact in kept)


def test_with_the_setting_a_wyoming_conversation_runs_the_named_side_effect(allowing_server,
                                                                           fake, client):
    fake.script_chat(
        {"match": "remember", "tool_calls": [
            {"name": "remember", "arguments": {"fact": "the bin goes out on Tuesday"}}]},
        {"after_tool": True, "content": "Noted."})
    answer = run(request("127.0.0.1", allowing_server,
                         say("remember the bin goes out on Tuesday", "made-up-2")))
    assert answer is not None and Handled.from_event(answer).text == "Noted."
    assert {"remember", "create_monitor"} <= offered(fake) and "set_timer" not in offered(fake)
    (result,) = tool_results(fake)
    assert not result.startswith("Error"), result
    kept = client.redis.hvals(client.keys.memory("device:wyoming"))  # the device's memory
    assert any(b"Tuesday" in fact for fact in kept)


def test_made_up_conversation_ids_share_the_devices_monitor_cap(allowing_server, fake, client,
                                                                system):
    from voxqueue.settings import Settings
    from workers.monitor.monitors import MonitorStore

    cap = Settings().monitors.creates_per_hour
    fake.script_chat(
        {"after_tool": True, "repeat": True, "content": "Done."},
        {"match": "watch the queues", "repeat": True, "tool_calls": [
            {"name": "create_monitor", "arguments": {
                "kind": "queue_depth", "condition": "> 100000", "every": 3600}}]})
    store = MonitorStore(client.redis, client.keys)
    try:
        for n in range(cap + 1):  # every request a new conversation id
            answer = run(request("127.0.0.1", allowing_server,
                                 say("watch the queues", f"made-up-monitor-{n}")))
            assert answer is not None and Handled.is_type(answer.type), answer
        results = tool_results(fake)
        assert len(results) == cap + 1
        assert all(not r.startswith("Error") for r in results[:cap]), results
        assert results[cap].startswith("Error") and "hour" in results[cap], results[cap]
        mine = [m for m in store.all() if m.owner == "device:wyoming"]
        assert len(mine) == cap
    finally:
        for monitor in store.all():
            if monitor.owner == "device:wyoming":
                store.delete(monitor.name)


def test_a_burst_from_one_address_is_rate_limited(system, fake, tmp_path):
    fake.script_chat({"match": "hello", "repeat": True, "content": "Hi."})
    with wyoming(system, tmp_path / "rate.log", VOXQUEUE_WYOMING_TURNS_PER_MINUTE="3") as port:
        answers = [run(request("127.0.0.1", port, say("hello there", f"burst-{n}")))
                   for n in range(3)]
        assert all(a is not None and Handled.is_type(a.type) for a in answers), answers
        over = [run(request("127.0.0.1", port, say("hello again", "burst-4"))),
                run(request("127.0.0.1", port, Synthesize(text="Hello.").event())),
                run(request("127.0.0.1", port,
                            AudioStart(rate=16000, width=2, channels=1).event()))]
    for answer in over:
        assert answer is not None and Error.is_type(answer.type), answer
        refused = Error.from_event(answer)
        assert refused.code == "rate-limited" and "try again in" in refused.text
    assert len(fake.chat_requests()) == 3  # the refused requests started no turn
    assert fake.requests_for("tts") == []


def test_a_confirmation_through_wyoming_runs_the_action_once(allowing_server, fake, client):
    """The legitimate flow through Home Assistant's Wyoming: text others wrote read in the
    conversation (a monitor's state), the side effect asked for next held back and the system's
    own question answered, then a "yes" in the same conversation runs exactly that action,
    once; a second "yes" runs nothing."""
    fact = "the gate code is 7315"
    fake.script_chat(
        {"match": "gate", "tool_calls": [{"name": "create_monitor", "arguments": {
            "kind": "queue_depth", "condition": "> 100000", "every": 3600, "name": "gate"}}]},
        {"after_tool": True, "match": "gate",
         "tool_calls": [{"name": "monitor_status", "arguments": {"name": "gate"}}]},
        {"after_tool": True, "match": "gate",
         "tool_calls": [{"name": "remember", "arguments": {"fact": fact}}]},
        {"after_tool": True, "match": "yes", "repeat": True, "content": "Remembered."},
    )
    asked = run(request("127.0.0.1", allowing_server,
                        say("watch the gate queue and keep its code", "wy-confirm")))
    assert asked is not None and Handled.is_type(asked.type), asked
    question = Handled.from_event(asked).text or ""
    assert question.rstrip().endswith("?"), question  # the system's question, not the model's
    kept = client.redis.hvals(client.keys.memory("device:wyoming"))
    assert not any(b"7315" in f for f in kept), "held back until the person's yes"

    yes = run(request("127.0.0.1", allowing_server, say("yes", "wy-confirm")))
    assert yes is not None and Handled.from_event(yes).text == "Remembered."
    kept = client.redis.hvals(client.keys.memory("device:wyoming"))
    assert sum(b"7315" in f for f in kept) == 1
    run(request("127.0.0.1", allowing_server, say("yes", "wy-confirm")))  # a second yes
    kept = client.redis.hvals(client.keys.memory("device:wyoming"))
    assert sum(b"7315" in f for f in kept) == 1
    from workers.monitor.monitors import MonitorStore

    store = MonitorStore(client.redis, client.keys)
    for monitor in store.all():
        if monitor.owner == "device:wyoming":
            store.delete(monitor.name)
