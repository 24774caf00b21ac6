"""What the device asks its responder to do (a turn, an announcement, a notice), and what
became of each command."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from edge.announcements import Announcement
from edge.player import Played
from edge.streamed import StreamedCommand


@dataclass
class TurnJob:
    pcm: bytes
    ended_at: float
    """Wall clock of the end of speech (the last voiced frame)."""
    session: str
    follow_up: bool = False
    endpoint_wait_s: float = 0.0
    """The silence the device waited for before it took the command as ended."""
    decided_at: float = field(default_factory=time.time)
    """Wall clock when the device took the command as ended."""
    streamed: StreamedCommand | None = None
    """The command already on its way (sent while it was spoken), or None: send ``pcm``."""


@dataclass
class AnnounceJob:
    announcement: Announcement


@dataclass
class NoticeJob:
    sound: str
    text: str


Job = TurnJob | AnnounceJob | NoticeJob


@dataclass
class TurnRecord:
    """What became of one command."""

    session: str
    turn_id: str | None = None
    status: str = "pending"
    """ok, error, cancelled, timeout; unsent (the server could not be reached) or lost (the
    connection dropped while the reply was coming)."""
    transcript: str | None = None
    reply: str | None = None
    played: Played | None = None
    interrupted: bool = False
    follow_up: bool = False
    error: str | None = None
    told: bool = False
    """This turn's failure began an outage: the outage notice tells the user."""
    timings: dict[str, float | None] | None = None
    """``speech_end_to_first_audio_ms`` (last voiced frame to the first reply audio in
    hand), ``endpoint_wait_ms`` (the silence waited for), ``transcript_ms`` (the command's
    end to its transcript), ``streamed``."""
