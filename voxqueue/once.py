"""One primitive for "this effect happens once, atomically": a claim and its writes in one script.

A stage that claims a marker with ``SET NX`` and then writes in a second command can die in
between: the claim is taken and the write never happens. :class:`Once` sends the claim, a
fence check and every write as one Lua script, so either all of it happens or none does.

The fence drops the writes of a *zombie*: a task that lost its lease (its worker stalled or
passed the time limit) while a newer delivery of the same job took over. Each delivery of a
job gets an attempt number; only the newest may write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import redis

from voxqueue.redis_conn import run_durably

# KEYS[1] marker (or ""), KEYS[2] fence (or ""), KEYS[3] unless (or ""), KEYS[4..] the commands'
# keys.
# ARGV: marker value, marker ttl, fence attempt, number of commands, then per command:
#       number of arguments after the key, command name, index of its key in KEYS, arguments;
#       last, the run's own token (or "").
# Returns {1, results...} when done, {2} when done already by this very run (the marker holds
# its token: a retry after Redis ran the script and the reply was lost), {0} when the marker
# was already taken by another run (or the "unless" key exists: the turn has ended), {-1} when
# fenced.
# DELIFEQ key value: delete the key only when it holds value (a lock that is ours).
_ONCE = """
if KEYS[1] ~= '' and ARGV[#ARGV] ~= '' and redis.call('get', KEYS[1]) == ARGV[#ARGV] then
  return {2}
end
if KEYS[2] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[3] then return {-1} end
if KEYS[3] ~= '' and redis.call('exists', KEYS[3]) == 1 then return {0} end
if KEYS[1] ~= '' then
  if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return {0} end
end
local out = {1}
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  local nargs, name, key = tonumber(ARGV[i]), ARGV[i + 1], KEYS[tonumber(ARGV[i + 2])]
  local args = {}
  for j = 1, nargs do args[j] = ARGV[i + 2 + j] end
  i = i + 3 + nargs
  if name == 'DELIFEQ' then
    if redis.call('get', key) == args[1] then redis.call('del', key) end
    out[#out + 1] = 0
  else
    local r = redis.call(name, key, unpack(args))
    if type(r) == 'table' and r.ok then r = r.ok end
    if type(r) ~= 'number' and type(r) ~= 'string' then r = 0 end
    out[#out + 1] = r
  end
end
return out
"""

Arg = str | bytes | int | float


@dataclass(frozen=True)
class Fence:
    """Writes are allowed only while ``key`` holds ``attempt`` (the newest delivery)."""

    key: str
    attempt: int


class Fenced(RuntimeError):
    """A newer delivery of this job took over: this one must stop writing."""


@dataclass
class Once:
    """Commands that run together, once (when ``marker`` is given) and only if not fenced.

    >>> done = Once(r, marker="vq:turn:t:once:final").call("RPUSH", key, item).run()
    """

    r: redis.Redis
    marker: str | None = None
    ttl_s: int = 3600
    fence: Fence | None = None
    marker_value: Arg | None = None
    """What the marker holds; by default the run's own token (see ``run``)."""
    unless: str | None = None
    """Write nothing (as if already done) while this key exists, e.g. the turn's end flag."""
    _keys: list[str] = field(default_factory=list)
    _argv: list[Arg] = field(default_factory=list)
    _count: int = 0

    def call(self, command: str, key: str, *args: Arg) -> Once:
        """Add a command (its first argument is a key; ``DELIFEQ key value`` is ours)."""
        self._keys.append(key)
        self._argv += [len(args), command, len(self._keys) + 3, *args]
        self._count += 1
        return self

    def run(self) -> list[Any] | None:
        """The commands' results, or None when the marker was already taken by another run.

        The marker holds this run's own token (unless ``marker_value`` is given), so when
        Redis ran the script but its reply was lost, the client's retry finds its own token
        and knows the writes are done, by itself: it returns a result per command then, each
        None (the replies are gone).

        Raises :class:`Fenced` when a newer attempt owns the job: nothing was written.
        """
        fence = self.fence
        token = uuid.uuid4().hex if self.marker and self.marker_value is None else ""
        keys = [self.marker or "", fence.key if fence else "", self.unless or "", *self._keys]
        argv: list[Arg] = [self.marker_value if self.marker_value is not None else token,
                           self.ttl_s, fence.attempt if fence else 0, self._count, *self._argv,
                           token]
        script = self.r.register_script(_ONCE)  # SHA: ~2 µs
        # On the replicas before anyone acts on it: a failover keeps it.
        result = run_durably(self.r, script, keys, argv, "a once-write")
        status = int(result[0])
        if status == -1:
            raise Fenced(f"a newer attempt than {fence.attempt if fence else '?'} owns this job")
        if status == 2:
            return [None] * self._count
        return None if status == 0 else list(result[1:])



# KEYS: the job's delivery count, its owner (the delivery tag of the copy that runs it), the
# broker's hash of unacknowledged deliveries. ARGV: this copy's delivery tag (or ""), the ttl.
# Returns this copy's attempt number, or 0 when another copy of the job (another tag) holds it
# unacknowledged: a duplicate of a job that is still running skips; it does not take over.
_DELIVER = """
if ARGV[1] ~= '' then
  local owner = redis.call('get', KEYS[2])
  if owner and owner ~= ARGV[1] and redis.call('hexists', KEYS[3], owner) == 1 then
    return 0
  end
  redis.call('set', KEYS[2], ARGV[1], 'EX', ARGV[2])
end
local n = redis.call('incr', KEYS[1])
redis.call('expire', KEYS[1], ARGV[2])
return n
"""


def deliver_in(pipe: Any, *, deliveries: str, owner: str, unacked: str, tag: str | None,
               ttl_s: int) -> None:
    """Add to ``pipe`` the count of a delivery of a job: its result is the attempt number
    (the fence this copy writes under), or 0 when another copy of the job is held by a live
    worker (a job sent twice while it runs): that copy must skip. A redelivery of the same
    message (same tag: its worker died, or its lease ran out) takes over with a new attempt,
    fencing the old one. Sent with the script's text: no round trip to load it."""
    pipe.eval(_DELIVER, 3, deliveries, owner, unacked, tag or "", max(1, ttl_s))
