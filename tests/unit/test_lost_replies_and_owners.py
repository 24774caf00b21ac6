"""What a once-write and a job's delivery do when Redis ran a script but its reply was lost,
and when a second copy of a job arrives while the first runs; against a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from voxqueue.once import Fence, Once, deliver_in
from voxqueue.redis_conn import connect
from voxqueue.settings import RedisSettings, Settings

DB = 5


class LosesReplies(redis.Redis):
    """A client whose connection breaks after Redis ran the next ``EVALSHA`` and before its
    reply is read, once per arming: the retry of ``voxqueue.redis_conn`` then sends it again."""

    lose_next = 0

    def _send_command_parse_response(self, conn: Any, command_name: str, *args: Any,
                                     **options: Any) -> Any:
        reply = super()._send_command_parse_response(conn, command_name, *args, **options)
        if command_name == "EVALSHA" and self.lose_next:
            self.lose_next -= 1
            raise redis.ConnectionError("the reply was lost")
        return reply


@pytest.fixture
def lossy(redis_server) -> Iterator[LosesReplies]:
    redis_server.client(DB)  # emptied
    base = connect(Settings(redis=RedisSettings(url=redis_server.url[:-1] + str(DB))))
    client = LosesReplies(connection_pool=base.connection_pool)  # its retry, as the workers'

    yield client
    client.close()


def test_a_retry_after_a_lost_reply_knows_it_was_itself(lossy):
    lossy.register_script("return 1")()  # the script cache is warm: the next call is EVALSHA
    lossy.lose_next = 1
    done = Once(lossy, marker="claim").call("RPUSH", "effects", "ran").run()
    assert done == [None], "the retry must report the writes done (by this very run)"
    assert lossy.lrange("effects", 0, -1) == [b"ran"], "written once, not twice"
    assert lossy.lose_next == 0, "the reply was really lost once"
    # Another run (another token) finds the marker taken: done by someone else.
    assert Once(lossy, marker="claim").call("RPUSH", "effects", "again").run() is None
    assert lossy.lrange("effects", 0, -1) == [b"ran"]


def test_without_the_token_a_lost_reply_would_read_as_done_by_another(lossy):
    """The marker value given by the caller (as ``finish`` does) carries no token: the
    retry cannot tell, which is why every other once-write keeps the default."""
    lossy.register_script("return 1")()
    lossy.lose_next = 1
    assert Once(lossy, marker="end", marker_value=b"ok").call("SET", "x", "1").run() is None
    assert lossy.get("x") == b"1"


def test_a_fenced_retry_of_its_own_write_is_still_done(lossy):
    """The token is checked before the fence: a newer attempt that took over right after our
    write does not make our own finished write look unfinished."""
    lossy.set("attempts", 1)
    lossy.register_script("return 1")()
    lossy.lose_next = 1
    fence = Fence("attempts", 1)
    assert Once(lossy, marker="m", fence=fence).call("SET", "y", "v").run() == [None]


def deliver(r: redis.Redis, tag: str | None) -> int:
    pipe = r.pipeline(transaction=False)
    deliver_in(pipe, deliveries="n", owner="owner", unacked="unacked", tag=tag, ttl_s=60)
    return int(pipe.execute()[0])


def test_a_copy_of_a_running_job_skips_and_a_redelivery_takes_over(redis_server):
    r = redis_server.client(DB)
    r.hset("unacked", "tag-a", "message a")  # copy a is held by a live worker
    assert deliver(r, "tag-a") == 1
    assert deliver(r, "tag-b") == 0, "a second copy of a running job must skip"
    assert r.get("owner") == b"tag-a" and r.get("n") == b"1", "and change nothing"
    assert deliver(r, "tag-a") == 2, "the same message delivered again takes over"
    r.hdel("unacked", "tag-a")  # a's worker died and its message went back to the queue
    assert deliver(r, "tag-b") == 3, "with the owner gone, another copy takes over"
    assert r.get("owner") == b"tag-b"
    r.hset("unacked", "tag-b", "message b")
    assert deliver(r, None) == 4, "without a broker tag (run in-process) there is no owner"
