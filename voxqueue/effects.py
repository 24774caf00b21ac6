"""One primitive for "this effect happens once, atomically": a claim and its writes in one script.

A stage that claims a marker with ``SET NX`` and then writes in a second command can die in
between: the claim is taken and the write never happens. :class:`Once` sends the claim, a
fence check and every write as one Lua script, so either all of it happens or none does.

The fence drops the writes of a *zombie*: a task that lost its lease (its worker stalled or
passed the time limit) while a newer delivery of the same job took over. Each delivery of a
job gets an attempt number; only the newest may write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

# KEYS[1] marker (or ""), KEYS[2] fence (or ""), KEYS[3] unless (or ""), KEYS[4..] the commands'
# keys.
# ARGV: marker value, marker ttl, fence attempt, number of commands, then per command:
#       number of arguments after the key, command name, index of its key in KEYS, arguments.
# Returns {1, results...} when done, {0} when the marker was already taken (or the "unless" key
# exists: the turn has ended), {-1} when fenced.
# DELIFEQ key value: delete the key only when it holds value (a lock that is ours).
_ONCE = """
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
    marker_value: Arg = b"1"
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
        """The commands' results, or None when the marker was already taken.

        Raises :class:`Fenced` when a newer attempt owns the job: nothing was written.
        """
        fence = self.fence
        keys = [self.marker or "", fence.key if fence else "", self.unless or "", *self._keys]
        argv: list[Arg] = [self.marker_value, self.ttl_s, fence.attempt if fence else 0,
                           self._count, *self._argv]
        result: Any = self.r.register_script(_ONCE)(keys=keys, args=argv)  # SHA: ~2 µs
        status = int(result[0])
        if status == -1:
            raise Fenced(f"a newer attempt than {fence.attempt if fence else '?'} owns this job")
        return None if status == 0 else list(result[1:])

