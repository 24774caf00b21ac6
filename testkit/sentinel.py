"""A Redis that fails over: a primary, a replica and three real sentinels on free ports."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from testkit.system import (
    RedisServer,
    free_port,
    redis_server_binary,
    wait_for_ping,
    wait_synced,
)

#: The name the sentinels know the primary by (``VOXQUEUE_REDIS_MASTER``).
MASTER = "voxqueue"
#: A replica's full sync starts at once (Redis waits 5 s by default for more replicas to join
#: a diskless sync: the replica would be out of sync for the first seconds of every test).
SYNC_AT_ONCE = ("--repl-diskless-sync-delay", "0")


class Sentinel:
    """One ``redis-server --sentinel`` process with a config file of its own."""

    def __init__(self, primary_port: int, *, down_after_ms: int, quorum: int = 2) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="vq-test-sentinel-"))
        self.config = self.dir / "sentinel.conf"
        self.config.write_text("\n".join([
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            f"logfile {self.dir / 'sentinel.log'}",  # (its failovers, when a test fails)
            f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} {quorum}",
            f"sentinel down-after-milliseconds {MASTER} {down_after_ms}",
            f"sentinel failover-timeout {MASTER} {max(3000, 3 * down_after_ms)}",
            f"sentinel parallel-syncs {MASTER} 1",
            "",
        ]))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([redis_server_binary(), str(self.config), "--sentinel"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_ping(self.port, "test sentinel")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def primary_port(self) -> int | None:
        """The port of the primary this sentinel names now."""
        answer: Any = redis.Redis(port=self.port).sentinel_get_master_addr_by_name(MASTER)
        return int(answer[1]) if answer else None


class SentinelSet:
    """Two Redis servers (one replicating the other) watched by three sentinels.

    ``url`` is Celery's own form of a Sentinel URL; ``kill_primary`` is a crash (SIGKILL) of
    whichever server is the primary now, ``wait_failover`` waits for the sentinels to agree on
    the new one, ``restart_killed`` starts the killed server again (it rejoins as a replica).
    """

    def __init__(self, *, down_after_ms: int = 1000) -> None:
        first = RedisServer(*SYNC_AT_ONCE)
        second = RedisServer(*SYNC_AT_ONCE, "--replicaof", "127.0.0.1", str(first.port))
        self.servers = {first.port: first, second.port: second}
        first.start()
        second.start()
        wait_synced(second.port)
        self.sentinels = [Sentinel(first.port, down_after_ms=down_after_ms) for _ in range(3)]
        for sentinel in self.sentinels:
            sentinel.start()
        self.killed: RedisServer | None = None
        self._wait(lambda: self._replicas_known() >= 1, 20, "the sentinels to see the replica")
        self._wait(lambda: self._peers_known() >= 2, 20, "the sentinels to find each other")

    @property
    def url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{s.port}" for s in self.sentinels) + "/0"

    def primary(self) -> RedisServer:
        port = self.sentinels[0].primary_port()
        assert port is not None
        return self.servers[port]

    def kill_primary(self) -> RedisServer:
        """SIGKILL the primary (no warning to anyone); returns the server killed."""
        primary = self.primary()
        primary.stop(signal.SIGKILL)
        self.killed = primary
        return primary

    def wait_failover(self, timeout_s: float = 30) -> RedisServer:
        """Every sentinel names the other server, and that server answers as a primary."""
        assert self.killed is not None
        old = self.killed.port

        def promoted() -> bool:
            ports = {s.primary_port() for s in self.sentinels}
            if len(ports) != 1 or old in ports:
                return False
            (port,) = ports
            assert port is not None
            role = redis.Redis(port=port).role()
            return bool(role[0] in (b"master", "master"))

        self._wait(promoted, timeout_s, "a failover")
        return self.primary()

    def restart_killed(self) -> None:
        """The killed server starts again on its port and data; the sentinels make it a
        replica of the new primary."""
        assert self.killed is not None
        server, self.killed = self.killed, None
        server.extra = SYNC_AT_ONCE
        server.start()
        self._wait(lambda: _is_replica(server.port), 30, "the old primary to rejoin as replica")

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers.values():
            server.stop()

    def _peers_known(self) -> int:
        return self._fewest_known("sentinels")

    def _replicas_known(self) -> int:
        return self._fewest_known("replicas")

    def _fewest_known(self, kind: str) -> int:
        """The fewest ``SENTINEL <kind>`` of the master any sentinel lists (0 when one fails)."""
        try:
            return min(len(_listed(redis.Redis(port=s.port).execute_command(
                "SENTINEL", kind, MASTER))) for s in self.sentinels)
        except redis.RedisError:
            return 0

    @staticmethod
    def _wait(check: Callable[[], bool], timeout_s: float, what: str) -> None:
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            try:
                if check():
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"waited {timeout_s} s for {what}")


def _listed(answer: Any) -> list[Any]:
    return answer if isinstance(answer, list) else []


def _is_replica(port: int) -> bool:
    info = redis.Redis(port=port).info("replication")
    return bool(info.get("role") == "slave" and info.get("master_link_status") == "up")
