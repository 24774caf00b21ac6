"""What a person is told when a turn fails: a short sentence per error code. The error's own
message (a provider's status, an exception) stays in the turn's events and the logs."""

from __future__ import annotations

from voxqueue.contracts import ErrorCode

APOLOGY = "Sorry, something went wrong and I can't answer that right now."
APOLOGIES: dict[str, str] = {
    ErrorCode.STT_NO_TEXT: "Sorry, I didn't catch that.",
    ErrorCode.AUDIO_INVALID: "Sorry, I couldn't hear that recording.",
    ErrorCode.MISSING_KEY: "Sorry, I'm not set up to answer that: an API key is missing.",
    ErrorCode.TIMEOUT: "Sorry, that took too long. Please try again.",
    ErrorCode.CANCELLED: "Okay, I stopped.",
}


def apology_for(code: ErrorCode | str | None) -> str:
    """The sentence a person hears for a turn that ended with ``code``."""
    return APOLOGIES.get(str(code), APOLOGY) if code is not None else APOLOGY
