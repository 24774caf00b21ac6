"""Names of every Redis key voxqueue writes, in one place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix (``VOXQUEUE_KEY_PREFIX``)."""

    prefix: str = "vq"

    # -- a turn ----------------------------------------------------------------------------
    def turn(self, turn_id: str) -> str:
        """Hash: the turn's spec (JSON) and its bookkeeping."""
        return f"{self.prefix}:turn:{turn_id}"

    def events(self, turn_id: str) -> str:
        """Stream: the turn's events and audio chunks."""
        return f"{self.prefix}:turn:{turn_id}:events"

    def audio(self, turn_id: str) -> str:
        """String: the utterance's PCM (the claim check)."""
        return f"{self.prefix}:turn:{turn_id}:audio"

    def speech(self, turn_id: str) -> str:
        """Stream: the utterance's PCM as it is spoken (``voxqueue.client.direct``)."""
        return f"{self.prefix}:turn:{turn_id}:speech"

    def cancel(self, turn_id: str) -> str:
        return f"{self.prefix}:turn:{turn_id}:cancel"

    def ended(self, turn_id: str) -> str:
        return f"{self.prefix}:turn:{turn_id}:ended"

    def marker(self, turn_id: str, name: str) -> str:
        """String set once (``SET NX``): guards a side effect against redelivery."""
        return f"{self.prefix}:turn:{turn_id}:once:{name}"

    def said(self, turn_id: str, step: int) -> str:
        """List: the sentences of an agent step's reply that were put in pieces for TTS, in
        order, each recorded as its piece is named, before its job is sent."""
        return f"{self.prefix}:turn:{turn_id}:said:{step}"

    def tool_outcome(self, turn_id: str, call_id: str) -> str:
        return f"{self.prefix}:turn:{turn_id}:tool:{call_id}"

    def tool_join(self, turn_id: str, step: int) -> str:
        """The set of call ids of step ``step`` whose outcome is stored (the tools' join)."""
        return f"{self.prefix}:turn:{turn_id}:join:{step}"

    def job_owner(self, task_id: str) -> str:
        """The broker delivery tag of the copy of a job that runs it (see ``stage.begin``)."""
        return f"{self.prefix}:owner:{task_id}"

    def turn_untrusted(self, turn_id: str) -> str:
        """String: why the turn read untrusted content (a tool's name, or "alert")."""
        return f"{self.prefix}:turn:{turn_id}:untrusted"

    def tts_done(self, turn_id: str) -> str:
        """Set: sequence numbers of sentences fully synthesized."""
        return f"{self.prefix}:turn:{turn_id}:tts-done"

    def deliveries(self, task_id: str) -> str:
        """Counter: how many times a job was delivered (bounds redelivery). Its value is the
        newest attempt, the fence: only that attempt may write (:mod:`voxqueue.once`)."""
        return f"{self.prefix}:deliveries:{task_id}"

    def job_done(self, task_id: str) -> str:
        """String: the job finished; a copy delivered later is skipped."""
        return f"{self.prefix}:done:{task_id}"

    def crash_plan(self, session_id: str) -> str:
        """String (tests only): the crash point armed for this session's turns."""
        return f"{self.prefix}:crash-plan:{session_id}"

    def crash_fired(self, turn_id: str) -> str:
        """String (tests only): where and when a crash point killed a process for this turn."""
        return f"{self.prefix}:crash-fired:{turn_id}"

    def ended_turns(self) -> str:
        """Stream: one entry per ended turn (turn_id, status), read by the metrics exporter."""
        return f"{self.prefix}:turns:ended"

    def active_turns(self) -> str:
        """Sorted set: turns not yet ended, scored by deadline."""
        return f"{self.prefix}:turns:active"

    # -- a session -------------------------------------------------------------------------
    def messages(self, session_id: str) -> str:
        """List: the session's chat history, one JSON message per item."""
        return f"{self.prefix}:session:{session_id}:messages"

    def session_lock(self, session_id: str) -> str:
        """String: the turn that holds the session's agent loop."""
        return f"{self.prefix}:session:{session_id}:lock"

    def session_waiting(self, session_id: str) -> str:
        """Sorted set: the session's turns not yet given the session, scored by creation time."""
        return f"{self.prefix}:session:{session_id}:waiting"

    def alerts(self, session_id: str) -> str:
        """List: monitor alerts waiting to be injected at the session's next turn."""
        return f"{self.prefix}:session:{session_id}:alerts"

    def session_announcements(self, session_id: str) -> str:
        """Stream: what the server says unasked to a session without a device (its timers)."""
        return f"{self.prefix}:session:{session_id}:announce"

    def session_untrusted(self, session_id: str) -> str:
        """String: the session's history holds untrusted content (set with the turn's)."""
        return f"{self.prefix}:session:{session_id}:untrusted"

    def pending_action(self, session_id: str) -> str:
        """String: the one side effect the system asked the person to confirm (JSON,
        ``PendingAction``); taken by the session's next turn."""
        return f"{self.prefix}:session:{session_id}:pending-action"

    def sessions(self) -> str:
        """Sorted set: session ids scored by last use."""
        return f"{self.prefix}:sessions"

    def context_stats(self, session_id: str) -> str:
        """Hash: the session's token accounting (last count, limit, summaries, trims)."""
        return f"{self.prefix}:session:{session_id}:context"

    def session_links(self, session_id: str) -> str:
        """Set: links of the pages fetched in the session, which a tainted turn may follow."""
        return f"{self.prefix}:session:{session_id}:links"

    # -- a device --------------------------------------------------------------------------
    def announcements(self, device: str) -> str:
        """Stream: what the server says to a device unasked (timers, alerts)."""
        return f"{self.prefix}:device:{device}:announce"

    def device_alerts(self, device: str) -> str:
        """List: monitor alerts waiting to be injected at the device's next turn."""
        return f"{self.prefix}:device:{device}:alerts"

    def devices(self) -> str:
        """Hash: device name -> JSON (created_at, token_hash)."""
        return f"{self.prefix}:devices"

    def device_tokens(self) -> str:
        """Hash: SHA-256 of a device token -> device name."""
        return f"{self.prefix}:device-tokens"

    def device_seen(self) -> str:
        """Hash: device name -> when the gateway last heard from it."""
        return f"{self.prefix}:device-seen"

    def device_budget(self, device: str, what: str, span: int, window: int) -> str:
        """Counter: what a device used of one budget (``what``) in one window of ``span``
        seconds (the gateway's budgets per minute and per hour)."""
        return f"{self.prefix}:device:{device}:budget:{what}:{span}:{window}"

    def device_held(self, device: str, what: str) -> str:
        """Sorted set: the device's spoken turns in flight, each holding part of one budget
        (``what``) until its reply is recorded or it ends; scored by when the hold lapses."""
        return f"{self.prefix}:device:{device}:budget:{what}:held"

    # -- monitors --------------------------------------------------------------------------
    def monitors(self) -> str:
        """Hash: monitor name -> its definition (JSON)."""
        return f"{self.prefix}:monitors"

    def monitor_state(self, name: str) -> str:
        """Hash: a monitor's state, last value and counters."""
        return f"{self.prefix}:monitor:{name}:state"

    def providers_in_service(self) -> str:
        """Hash: stage (stt, llm, tts) -> the provider its workers built, as they last started
        (what ``describe`` reports, whatever the reporting process's own keys would pick)."""
        return f"{self.prefix}:providers"

    def tool_catalogue(self) -> str:
        """String: the MCP servers' tools a tools worker listed (``ToolCatalogue`` JSON)."""
        return f"{self.prefix}:tools:catalogue"

    def redbeat_prefix(self) -> str:
        """Prefix of beat's schedule entries and lock in Redis (celery-redbeat)."""
        return f"{self.prefix}:redbeat:"

    # -- tools' own state (owner: "device:<name>" that asked, else "session:<id>") ----------
    def timers_due(self) -> str:
        """Sorted set: pending timer and reminder ids scored by due time (epoch seconds)."""
        return f"{self.prefix}:timers:due"

    def timers_wake(self) -> str:
        """List: a wake-up for the housekeeping loop, pushed when a timer is added (at most
        one element)."""
        return f"{self.prefix}:timers:wake"

    def housekeeping_turn(self) -> str:
        """Name of the turn (``voxqueue.broker.sweeps.hold_sweep_turn_in``) of the one worker
        process that runs the housekeeping loop."""
        return f"housekeeping.{self.prefix}"

    def housekeeping_handoff(self) -> str:
        """List: pushed when the process holding the housekeeping turn stops cleanly, so one
        waiting for the turn takes it at once (at most one element)."""
        return f"{self.prefix}:housekeeping:handoff"

    def timer_items(self) -> str:
        """Hash: timer id -> its JSON (what to announce, to whom)."""
        return f"{self.prefix}:timers:items"

    def owner_timers(self, owner: str) -> str:
        """Sorted set: one owner's pending timer ids, by due time."""
        return f"{self.prefix}:owner:{owner}:timers"

    def memory(self, owner: str) -> str:
        """Hash: fact id -> JSON of a fact the owner asked to be remembered."""
        return f"{self.prefix}:owner:{owner}:memory"

    def monitor_creates(self, owner: str) -> str:
        """Sorted set: when the owner created monitors through the tool (the rate limit)."""
        return f"{self.prefix}:owner:{owner}:monitor-creates"

    def recent_turn_ms(self) -> str:
        """List: durations (ms) of the most recently ended turns, newest first."""
        return f"{self.prefix}:turns:recent-ms"
