"""The edge's announcement reader loses nothing to a reconnection, on a real redis-server:
what is announced while its link is down (or before Redis first answers) is spoken after."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from edge.announcements import Announcement, AnnouncementListener, RedisFeed
from edge.link import Backoff, Link
from tests.conftest import RedisServer
from voxqueue.settings import RedisSettings, Settings

STREAM = "vq:device:porch:announce"


class Heard:
    """A listener on ``server`` with what it delivered and the link's changes."""

    def __init__(self, server: RedisServer) -> None:
        self.items: list[Announcement] = []
        self.link_events: list[str] = []
        link = Link("redis", lambda _n, _r: self.link_events.append("down"),
                    lambda _n: self.link_events.append("up"))
        settings = Settings(redis=RedisSettings(url=server.url))
        self.listener = AnnouncementListener(RedisFeed(settings, STREAM, block_ms=200), link,
                                             self.items.append, block_ms=200)
        # A long first delay: what is announced during it must be read after it.
        self.listener.backoff = Backoff(first_s=1.5, max_s=1.5)

    def texts(self) -> list[str]:
        return [a.text for a in self.items]


def announce(server: RedisServer, text: str, age_s: float = 0.0) -> str:
    """Add an announcement to the stream; its entry id."""
    event = {"v": 1, "type": "announcement", "kind": "timer", "text": text,
             "ts": time.time() - age_s}
    return redis.Redis(port=server.port).xadd(STREAM, {"e": json.dumps(event)}).decode()


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def test_what_is_announced_while_the_link_is_down_is_spoken_after_it_reconnects(server):
    server.start()
    before = announce(server, "Said before the edge started.")
    heard = Heard(server)
    heard.listener.start()
    try:
        wait_for(lambda: heard.listener.last_id == before, "the first read")
        announce(server, "Tea is ready.")
        wait_for(lambda: heard.texts() == ["Tea is ready."], "the first announcement")
        redis.Redis(port=server.port).client_kill_filter(_type="normal")  # drops the edge's link
        wait_for(lambda: heard.link_events == ["down"], "the link to go down")
        announce(server, "Said ten minutes ago.", age_s=1000)
        announce(server, "Your pasta timer is done.")
        wait_for(lambda: heard.link_events == ["down", "up"], "the link to come back")
        # Read in order: the stale one, announced before it, was read (and skipped) by now.
        wait_for(lambda: len(heard.items) == 2, "the announcement made while down")
    finally:
        heard.listener.close()
    assert heard.texts() == ["Tea is ready.", "Your pasta timer is done."]  # the stale skipped


def test_what_is_announced_before_redis_first_answers_is_spoken(server):
    heard = Heard(server)
    heard.listener.start()
    try:
        wait_for(lambda: heard.link_events == ["down"], "the first attempt to fail")
        server.start()
        announce(server, "Your timer is done.")  # while the edge waits to try again
        wait_for(lambda: heard.texts() == ["Your timer is done."], "the announcement", 10)
    finally:
        heard.listener.close()
