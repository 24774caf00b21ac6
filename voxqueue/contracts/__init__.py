"""Pydantic models that cross process boundaries: every job, event and result is one of these.

Each carries a version ``v``; a receiver validates what it reads and refuses what it cannot read.
"""

from voxqueue.contracts.events import EVENT_TYPES, ErrorCode, EventType, TurnEvent
from voxqueue.contracts.jobs import AgentStep, SttJob, ToolCallJob, ToolOutcome, TtsJob
from voxqueue.contracts.results import ToolCallRecord, TurnResult
from voxqueue.contracts.turn import TurnSpec

__all__ = [
    "EVENT_TYPES",
    "AgentStep",
    "ErrorCode",
    "EventType",
    "SttJob",
    "ToolCallJob",
    "ToolCallRecord",
    "ToolOutcome",
    "TtsJob",
    "TurnEvent",
    "TurnResult",
    "TurnSpec",
]
