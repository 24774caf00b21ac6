"""Redis connections from the settings' URL (auth and TLS come with the URL)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import quote, unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelManagedConnection as AsyncSentinelManagedConnection
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.commands.core import Script
from redis.exceptions import AuthenticationError, AuthorizationError, NoScriptError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection

from voxqueue.settings import ClientSettings

T = TypeVar("T")

log = logging.getLogger("voxqueue.redis")

#: How long a command keeps retrying while Redis is unreachable (a restart takes a second or
#: two): attempts with exponential backoff and jitter, 0.05 s doubling up to 1 s, about 8 s.
RECONNECT_ATTEMPTS = 12


class ReconnectRetry(Retry):
    """Retries connection errors and timeouts, but not a refused password or user.

    redis-py counts ``AuthenticationError`` as a ``ConnectionError``, so a wrong password
    would be retried for the whole reconnection window before it is reported.
    """

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any],
                        is_retryable: Callable[[Exception], bool] | None = None,
                        with_failure_count: bool = False) -> T:
        if is_retryable is None:  # the usual case: no closure per command
            retryable = _not_refused
        else:
            def retryable(error: Exception) -> bool:
                return _not_refused(error) and is_retryable(error)

        return super().call_with_retry(do, fail, retryable, with_failure_count)


def _not_refused(error: Exception) -> bool:
    return not isinstance(error, AuthenticationError | AuthorizationError)


#: After a wait that found too few replicas, a process waits at most this many milliseconds
#: (instead of ``VOXQUEUE_REDIS_WAIT_MS``) until the primary has the replicas in sync again:
#: with none there is nothing a failover could promote, and a full wait per write (while a
#: replica restarts and syncs, say) would stall every turn.
SHORT_WAIT_MS = 10
#: How often, while waits are short, the primary is asked whether its replicas are back.
RECHECK_S = 0.25


class ReplicaWait:
    """How many replicas a durable write waits for (Redis ``WAIT``) and how long at most: the
    configured time, or :data:`SHORT_WAIT_MS` from a wait that found too few replicas until the
    primary says they are in sync again (asked at most every :data:`RECHECK_S`)."""

    def __init__(self, replicas: int, wait_ms: int) -> None:
        self.replicas, self.wait_ms = replicas, wait_ms
        self._short = False
        self._checked = 0.0

    def timeout_ms(self, client: Any) -> int:
        """How long the next wait through ``client`` (a client of the primary) may take."""
        if self._short and time.monotonic() - self._checked >= RECHECK_S:
            self._checked = time.monotonic()
            try:
                info: Any = client.info("replication")
            except redis.RedisError:
                info = {}
            online = sum(1 for name, value in info.items() if name.startswith("slave")
                         and isinstance(value, dict) and value.get("state") == "online")
            if online >= self.replicas:
                self._short = False
                log.info("the primary has %s replica(s) in sync again: writes wait for them",
                         online)
        return min(SHORT_WAIT_MS, self.wait_ms) if self._short else self.wait_ms

    def acked(self, replicas: Any, what: str, client: Any = None) -> None:
        """Note a wait's answer: too few replicas makes the waits short (logged once, with the
        primary's address when ``client`` is given)."""
        if int(replicas) >= self.replicas or self._short:
            return
        self._short, self._checked = True, time.monotonic()
        where = primary_address(client) if client is not None else ""
        log.warning("%s is on %s of %s replicas after %s ms%s: a failover now could undo it; "
                    "writes wait at most %s ms until the primary has them in sync again", what,
                    replicas, self.replicas, self.wait_ms, f" (primary {where})" if where else "",
                    SHORT_WAIT_MS)


def primary_address(client: Any) -> str:
    """``host:port`` of the server ``client``'s pool connects to now (the primary the sentinels
    named last, with Sentinel), or ``""``."""
    pool = getattr(client, "connection_pool", None)
    address = getattr(pool, "master_address", None)
    if not address and pool is not None:
        kwargs = getattr(pool, "connection_kwargs", {})
        address = (kwargs.get("host"), kwargs.get("port")) if "host" in kwargs else None
    return f"{address[0]}:{address[1]}" if address else ""


class Primary(redis.Redis):
    """A client of the primary, knowing how many replicas a durable write waits for."""

    replica_wait: ReplicaWait | None = None


def durable(r: Any) -> ReplicaWait | None:
    """What a durable write through ``r`` waits for (``None``: not a :class:`Primary`, or no
    replica to wait for)."""
    wait = getattr(r, "replica_wait", None)
    return wait if isinstance(wait, ReplicaWait) and wait.replicas else None


def run_durably(r: Any, script: Script, keys: list[Any], args: list[Any], what: str) -> Any:
    """Run ``script`` and return its result once its writes are on the replicas ``r`` waits
    for (``WAIT`` in the same round trip; see :class:`ReplicaWait`), so that nothing acts on a
    write a failover could undo; with no replica to wait for, a plain call. ``what`` names the
    write in the warning of a wait that found too few replicas."""
    wait = durable(r)
    if wait is None:
        return script(keys=keys, args=args)
    for load in (False, True):
        if load:  # a new primary's script cache is empty (and the pipeline's retry skipped it)
            r.script_load(script.script)
        try:
            with r.pipeline(transaction=False) as pipe:
                script(keys=keys, args=args, client=pipe)
                pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms(r))
                result, acked = pipe.execute()
            break
        except NoScriptError:  # nothing was written: the script did not run
            if load:
                raise
    wait.acked(acked, what, r)
    return result


class DurableScript:
    """A Lua script registered on ``r`` whose every call runs :func:`run_durably`."""

    def __init__(self, r: Any, source: str, what: str) -> None:
        self.r, self.what = r, what
        self.script = r.register_script(source)

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        return run_durably(self.r, self.script, keys, args, self.what)


def replicas_to_wait(settings: ClientSettings) -> int:
    """``VOXQUEUE_REDIS_WAIT_REPLICAS``; unset: 1 with sentinels (a replica to fail over to),
    else 0."""
    if settings.redis.wait_replicas is not None:
        return settings.redis.wait_replicas
    return 1 if is_sentinel(settings.redis.url) else 0


class RedisAddressError(ValueError):
    """The Redis address in the settings cannot be used as given."""


@dataclass(frozen=True)
class SentinelAddress:
    """Where the sentinels are, which primary they watch, and how to log in to it."""

    sentinels: list[tuple[str, int]]
    master: str
    db: int
    username: str | None
    password: str | None
    sentinel_password: str | None

    def primary_kwargs(self) -> dict[str, Any]:
        """What every connection to the primary is opened with."""
        return {"db": self.db, "username": self.username, "password": self.password}

    def broker_url(self) -> str:
        """One sentinel's URL with the primary's login and the database (the broker's)."""
        login = ""
        if self.password is not None:
            login = f"{quote(self.username or '')}:{quote(self.password)}@"
        host, port = self.sentinels[0]
        return f"sentinel://{login}{host}:{port}/{self.db}"

    def sentinel_kwargs(self) -> dict[str, Any]:
        """What every connection to a sentinel is opened with."""
        return {"password": self.sentinel_password, "socket_timeout": 2,
                "socket_connect_timeout": 2}


@dataclass
class SentinelView:
    """What the sentinels say about the primary (``voxqueue doctor``)."""

    answered: list[str]
    """The sentinels that answered, ``host:port``."""
    primary: str | None = None
    replicas: list[str] | None = None
    quorum: str = ""
    """``SENTINEL CKQUORUM``'s answer: whether they can agree on a failover."""
    problem: str = ""
    """One line saying what is wrong, or ""."""


def look_through(address: SentinelAddress) -> SentinelView:
    """Ask the sentinels where the primary is (the one a majority names, as the clients do),
    its replicas, and whether they have a quorum."""
    view = SentinelView(answered=[])
    unknown: list[str] = []
    answers: list[Any] = []
    asked: dict[tuple[str, int], Any] = {}  # a sentinel that names each primary
    for host, port in address.sentinels:
        one = redis.Redis(host=host, port=port, decode_responses=True,
                          retry=Retry(NoBackoff(), 0), **address.sentinel_kwargs())
        try:
            where: Any = one.execute_command("SENTINEL", "get-master-addr-by-name",
                                             address.master)
        except redis.RedisError as exc:
            answers.append(exc)
            one.close()
            continue
        view.answered.append(f"{host}:{port}")
        answers.append(where)
        if where is None:
            unknown.append(f"{host}:{port}")
            one.close()
        else:
            asked.setdefault((str(where[0]), int(where[1])), one)
    if not view.answered:
        view.problem = (f"no sentinel answered at "
                        f"{', '.join(f'{h}:{p}' for h, p in address.sentinels)}")
    elif not asked:
        view.problem = (f"the sentinels at {', '.join(unknown)} know no primary named "
                        f"{address.master!r} (VOXQUEUE_REDIS_MASTER)")
    else:
        try:
            primary = agreed_primary(answers, len(address.sentinels), address.master)
        except MasterNotFoundError as exc:
            view.problem = f"the sentinels do not agree on a primary: {exc}"
            primary = next(iter(asked))
        view.primary = f"{primary[0]}:{primary[1]}"
        one = asked[primary]
        try:
            replicas: Any = one.sentinel_slaves(address.master)
            view.replicas = [f"{r['ip']}:{r['port']}" for r in replicas
                             if not r.get("is_odown") and not r.get("is_sdown")]
            view.quorum = str(one.execute_command("SENTINEL", "ckquorum", address.master))
        except redis.ResponseError as exc:
            view.quorum = str(exc)
            view.problem = view.problem or f"the sentinels cannot fail over: {exc}"
        except redis.RedisError:
            pass
    for client in asked.values():
        client.close()
    return view


def agreed_primary(answers: list[Any], sentinels: int, service: str) -> tuple[str, int]:
    """The primary a majority of ``sentinels`` name in ``answers`` (each one sentinel's reply
    to ``SENTINEL GET-MASTER-ADDR-BY-NAME``, or the error asking it raised).

    One sentinel's word is not enough: a sentinel that has not yet heard of a failover names
    the old primary, and a sentinel that led the failover keeps it in ``SENTINEL MASTERS``
    (what redis-py asks) until the failover ends; an old primary restarted meanwhile answers
    as a primary, with its old data, until the sentinels make it a replica (about ten seconds
    here), and every write made there in those seconds is lost when it resyncs. Raises
    ``MasterNotFoundError`` (a connection error: the caller's retries ask again) while no
    majority agrees.
    """
    found = _majority(answers, sentinels)
    if found is not None:
        return found
    named = _named(answers)
    errors = [f"{type(a).__name__}: {a}" for a in answers if isinstance(a, Exception)]
    said = ", ".join(f"{h}:{p} by {n}" for (h, p), n in named.items()) or "none named"
    raise MasterNotFoundError(
        f"No master found for {service!r}: no majority of the {sentinels} sentinels names "
        f"one primary ({said}{'; ' + '; '.join(errors) if errors else ''})")


def _named(answers: list[Any]) -> dict[tuple[str, int], int]:
    """How many of ``answers`` name each primary."""
    named: dict[tuple[str, int], int] = {}
    for answer in answers:
        if answer and not isinstance(answer, Exception):
            host = answer[0].decode() if isinstance(answer[0], bytes) else str(answer[0])
            where = (host, int(answer[1]))
            named[where] = named.get(where, 0) + 1
    return named


def _majority(answers: list[Any], sentinels: int) -> tuple[str, int] | None:
    """The primary more than half of ``sentinels`` name in ``answers`` so far, or None."""
    best = max(_named(answers).items(), key=lambda item: item[1], default=None)
    return best[0] if best is not None and best[1] > sentinels // 2 else None


#: What asking one sentinel may raise (its answer is then an error, not a vote).
_ASK_ERRORS = (redis.ConnectionError, redis.ResponseError, redis.TimeoutError)


class QuorumSentinel(Sentinel):
    """redis-py's Sentinel, naming the primary a majority of the sentinels agree on (asked in
    turn, until a majority agrees: a sentinel that does not answer costs only when needed)."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        answers: list[Any] = []
        for sentinel in self.sentinels:
            try:
                answers.append(sentinel.sentinel_get_master_addr_by_name(service_name))
            except _ASK_ERRORS as exc:
                answers.append(exc)
            if (found := _majority(answers, len(self.sentinels))) is not None:
                return found
        return agreed_primary(answers, len(self.sentinels), service_name)


class AsyncQuorumSentinel(AsyncSentinel):
    """The asyncio form of :class:`QuorumSentinel`."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        answers: list[Any] = []
        for sentinel in self.sentinels:
            try:
                answers.append(await sentinel.sentinel_get_master_addr_by_name(service_name))
            except _ASK_ERRORS as exc:
                answers.append(exc)
            if (found := _majority(answers, len(self.sentinels))) is not None:
                return found
        return agreed_primary(answers, len(self.sentinels), service_name)


class PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary the sentinels name, asking them again on every reconnection.

    redis-py 8 reconnects a dropped connection from ``send_packed_command`` through
    ``connect_check_health``, which skips the discovery ``SentinelManagedConnection.connect``
    does: after a failover the connection dials the old primary's address again, and once that
    server is back (restarted, with its old data, a primary until the sentinels make it a
    replica some ten seconds later) it writes there, and the writes are lost.
    """

    _dialing = False

    def connect_to(self, address: Any) -> None:
        self._dialing = True  # (the address was just asked for)
        try:
            super().connect_to(address)
        finally:
            self._dialing = False

    def connect_check_health(self, check_health: bool = True,
                             retry_socket_connect: bool = True) -> None:
        if self._sock is None and not self._dialing and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        super().connect_check_health(check_health=check_health,
                                     retry_socket_connect=retry_socket_connect)


class AsyncPrimaryConnection(AsyncSentinelManagedConnection):
    """The asyncio form of :class:`PrimaryConnection` (redis-py's asyncio connection has the
    same gap)."""

    _dialing = False

    async def connect_to(self, address: Any) -> None:
        self._dialing = True
        try:
            await super().connect_to(address)
        finally:
            self._dialing = False

    async def connect_check_health(self, check_health: bool = True,
                                   retry_socket_connect: bool = True) -> None:
        if self._reader is None and not self._dialing and self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super().connect_check_health(check_health=check_health,
                                           retry_socket_connect=retry_socket_connect)


def is_sentinel(url: str) -> bool:
    return url.startswith("sentinel://")


def sentinel_address(settings: ClientSettings) -> SentinelAddress | None:
    """The sentinels of a ``sentinel://`` URL (Celery's form, one per ``;``), else ``None``.

    Raises :class:`RedisAddressError`, in one line saying which, for a sentinel URL without a
    master name or with a part that is not a sentinel address.
    """
    url = settings.redis.url
    if not is_sentinel(url):
        return None
    if not settings.redis.master:
        raise RedisAddressError(
            "VOXQUEUE_REDIS_URL names sentinels (sentinel://...) but VOXQUEUE_REDIS_MASTER is "
            "not set: give the name the sentinels know the primary by")
    sentinels: list[tuple[str, int]] = []
    db, username, password = 0, None, None
    for part in url.split(";"):
        parts = urlsplit(part.strip())
        if parts.scheme != "sentinel" or not parts.hostname:
            raise RedisAddressError(
                f"VOXQUEUE_REDIS_URL: {redact(part)!r} is not a sentinel address "
                "(sentinel://host:26379)")
        sentinels.append((parts.hostname, parts.port or 26379))
        if parts.password is not None:
            username = unquote(parts.username) if parts.username else None
            password = unquote(parts.password)
        if parts.path.strip("/"):
            try:
                db = int(parts.path.strip("/"))
            except ValueError:
                raise RedisAddressError(
                    f"VOXQUEUE_REDIS_URL: {parts.path!r} is not a database number") from None
    sentinel_password = settings.redis.sentinel_password
    return SentinelAddress(sentinels, settings.redis.master, db, username, password,
                           sentinel_password.get_secret_value() if sentinel_password else None)


def connect(settings: ClientSettings, *, decode: bool = False, patient: bool = True,
            **overrides: Any) -> Primary:
    """A client with timeouts and keep-alive that rides out a Redis restart or a failover.

    Every command is retried on connection errors and timeouts with exponential backoff, so a
    stage or a client in the middle of a turn waits for Redis to come back instead of failing.
    With Sentinel, every new connection asks the sentinels where the primary is, so the retries
    follow a failover. ``patient=False``: one try with short timeouts (a check's client);
    ``overrides``: other options of the client.
    """
    options: dict[str, Any] = {
        "decode_responses": decode,
        "socket_timeout": 10,
        "socket_connect_timeout": 2,
        "socket_keepalive": True,
        "health_check_interval": 25,
        "retry": ReconnectRetry(ExponentialWithJitterBackoff(cap=1.0, base=0.05),
                                RECONNECT_ATTEMPTS),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }
    if not patient:
        options.update(socket_timeout=3, retry=Retry(NoBackoff(), 0), retry_on_error=[])
    options.update(overrides)
    address = sentinel_address(settings)
    client: Primary
    if address is None:
        client = cast(Primary, Primary.from_url(settings.redis.url, **options))
    else:
        sentinel = QuorumSentinel(address.sentinels, sentinel_kwargs=address.sentinel_kwargs(),
                            **address.primary_kwargs())
        client = sentinel.master_for(address.master, redis_class=Primary,
                                     connection_class=PrimaryConnection, **options)
    client.replica_wait = ReplicaWait(replicas_to_wait(settings), settings.redis.wait_ms)
    return client


def connect_async(settings: ClientSettings, **options: Any) -> aioredis.Redis:
    """An asyncio client of the primary (through the sentinels with a ``sentinel://`` URL);
    ``max_connections`` and ``timeout`` make its pool a blocking one."""
    address = sentinel_address(settings)
    blocking = "timeout" in options
    if address is None:
        if blocking:
            return aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
                settings.redis.url, **options))
        return aioredis.Redis.from_url(settings.redis.url, **options)
    options.pop("timeout", None)  # the sentinel-managed pool does not block
    sentinel = AsyncQuorumSentinel(address.sentinels, sentinel_kwargs=address.sentinel_kwargs(),
                                   **address.primary_kwargs())
    return sentinel.master_for(address.master, redis_class=aioredis.Redis,
                               connection_class=AsyncPrimaryConnection, **options)


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs (each part of a sentinel URL)."""
    if ";" in url:
        return ";".join(redact(part) for part in url.split(";"))
    from urllib.parse import urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
