"""What the device asks its responder to do (a turn, an announcement, a notice), and what
became of each command."""

from __future__ import annotations

from dataclasses import dataclass

from edge.announcements import Announcement
from edge.player import Played
from edge.streamed import StreamedCommand


@dataclass
class TurnJob:
    pcm: bytes
    ended_at: float
    """Wall clock of the end of speech."""
    session: str
    follow_up: bool = False
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
