"""``voxqueue doctor`` shows Redis memory per key family and warns about keys that never expire
but should, on a real redis-server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import redis

from tests.conftest import ROOT, RedisServer, system_env
from voxqueue.observability.doctor import check_key_ttls, family_of, must_expire, scan_key_families


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    s.start()
    yield s
    s.stop()


@pytest.fixture
def seeded(server: RedisServer) -> redis.Redis:
    r = redis.Redis(port=server.port)
    r.flushall()
    for turn in ("a1b2c3", "d4e5f6"):
        r.xadd(f"vq:turn:{turn}:events", {"e": b"x" * 200})
        r.hset(f"vq:turn:{turn}", "spec", "{}")
        r.expire(f"vq:turn:{turn}", 3600)
    r.expire("vq:turn:a1b2c3:events", 3600)  # the other turn's events never expire: a leak
    r.set("vq:turn:a1b2c3:once:sent:a1b2c3.tts.3", b"1", ex=3600)
    for session in ("kitchen", "hall"):
        r.rpush(f"vq:session:{session}:messages", "{}")
        r.expire(f"vq:session:{session}:messages", 600)
    r.hset("vq:monitors", "web", "{}")  # lives for good, by design
    r.lpush("tts", "job", "job")
    r.lpush("tts\x06\x163", "job")
    r.hset("unacked", "tag", "message")
    r.set("celery-task-meta-a1b2c3.stt", "{}", ex=3600)
    r.set("someone-else:key", "not ours")
    return r


def test_keys_are_grouped_into_families_by_replacing_ids():
    assert family_of("vq:turn:3f2a:events", "vq") == "vq:turn:*:events"
    assert family_of("vq:turn:3f2a:once:sent:3f2a.tts.2", "vq") == "vq:turn:*:once:*"
    assert family_of("vq:session:kitchen:messages", "vq") == "vq:session:*:messages"
    assert family_of("vq:deliveries:3f2a.tts.2", "vq") == "vq:deliveries:*"
    assert family_of("vq:redbeat::lock", "vq") == "vq:redbeat::lock"
    assert family_of("vq:redbeat:sweep-turns", "vq") == "vq:redbeat:*"
    assert family_of("app:vq:turns:active", "app:vq") == "app:vq:turns:active"
    assert family_of("tts\x06\x169", "vq") == "tts"
    assert family_of("celery-task-meta-3f2a.tts.2", "vq") == "celery-task-meta-*"
    assert family_of("celery-taskset-meta-9c1d.j", "vq") == "celery-taskset-meta-*.j"
    assert family_of("9c1d-77.reply.celery.pidbox", "vq") == "*.reply.celery.pidbox"
    assert family_of("someone-else:key", "vq") is None


def test_only_keys_of_one_turn_session_or_job_must_expire():
    assert must_expire("vq:turn:*:events", "vq") and must_expire("vq:session:*:lock", "vq")
    assert must_expire("celery-task-meta-*", "vq")
    assert not must_expire("vq:turns:active", "vq") and not must_expire("vq:monitors", "vq")
    assert not must_expire("tts", "vq") and not must_expire("vq:owner:*:memory", "vq")


def test_the_scan_counts_memory_and_keys_without_ttl_per_family(seeded):
    report = scan_key_families(seeded, "vq", batch=3)
    families = {f.name: f for f in report.families}
    assert set(families) == {
        "vq:turn:*:events", "vq:turn:*", "vq:turn:*:once:*", "vq:session:*:messages",
        "vq:monitors", "tts", "unacked", "celery-task-meta-*"}
    assert report.scanned == 13 and not report.capped
    events = families["vq:turn:*:events"]
    assert (events.count, events.no_ttl, events.must_expire) == (2, 1, True)
    assert events.bytes > 400  # two entries of 200 bytes and more
    assert (families["tts"].count, families["tts"].no_ttl) == (2, 2)
    assert families["vq:session:*:messages"].no_ttl == 0
    assert [f.bytes for f in report.families] == sorted((f.bytes for f in report.families),
                                                        reverse=True)
    checks = check_key_ttls(report)
    assert checks[0].detail.startswith("13 keys scanned, 12 of voxqueue and Celery in 8 families")
    warnings = [c for c in checks if c.warning]
    assert [(c.name, c.detail) for c in warnings] == [
        ("keys: vq:turn:*:events", "1 of 2 keys have no TTL")]


def test_the_scan_stops_at_its_limit(seeded):
    report = scan_key_families(seeded, "vq", limit=5)
    assert report.capped and report.scanned == 5
    assert "first 5 keys scanned" in check_key_ttls(report)[0].detail


def test_doctor_prints_the_table_and_warns_without_failing(seeded, server):
    done = subprocess.run([sys.executable, "-m", "voxqueue.cli", "doctor"],
                          env=system_env(server.url, None), cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "Redis memory per key family" in done.stdout, done.stdout + done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()
            if line.strip().startswith(("vq:", "tts", "celery-"))}
    assert rows["vq:turn:*:events"][0] == "2" and "should expire" in " ".join(
        rows["vq:turn:*:events"])
    assert rows["tts"][0] == "2" and rows["tts"][-1] == "2"
    assert "keys: vq:turn:*:events" in done.stdout
    assert "1 of 2 keys have no TTL" in done.stdout
