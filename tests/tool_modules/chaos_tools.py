"""Tools of the chaos test (tests/reliability/test_chaos.py), loaded through
VOXQUEUE_TOOL_MODULES.

``inscribe`` is a side effect the system under test cannot see or write: each execution appends
one JSON line to the file named by ``$CHAOS_LEDGER_FILE`` (turn id, call id, a run id unique to
this execution), and answers with that run id. The test reads the file afterwards to check that
no call ran twice and that what the model was told matches what happened.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from workers.tools import current_call, tool

#: The environment variable naming the ledger file (outside Redis, never read by the system).
LEDGER_ENV = "CHAOS_LEDGER_FILE"
#: Seconds a call of ``inscribe`` takes before and after its effect, so kills and cancels
#: land on both sides of it.
BEFORE_S = 0.3
AFTER_S = 0.5


def ran_reply(run: str) -> str:
    """What ``inscribe`` answers after its effect (the test parses the run id back)."""
    return f"inscribed as run {run}"


@tool(side_effects=True)
def inscribe(note: str) -> str:
    """Write a note into the household journal (a real-world action: never repeat it).

    Args:
        note: The note to write.
    """
    call = current_call()
    assert call is not None
    time.sleep(BEFORE_S)
    run = uuid.uuid4().hex[:12]
    line = json.dumps({"turn": call.turn_id, "call": call.call_id, "run": run,
                       "session": call.session_id, "pid": os.getpid(), "ts": time.time(),
                       "note": note}) + "\n"
    # One write(2) of a short line with O_APPEND: whole lines, whatever dies when.
    fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    time.sleep(AFTER_S)
    return ran_reply(run)


def lookup(topic: str) -> str:
    """Look a topic up in the household notes (no side effect).

    Args:
        topic: What to look up.
    """
    time.sleep(0.2)
    return f"the notes about {topic} say all is well"
