"""Wake word detection on the device with pymicro-wakeword (models ship inside its wheel).

Features are computed once per frame and shared by every model. Time is audio time (frames
seen), so a file gives the same detections however fast it is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

from edge.frames import FRAME_BYTES, FRAME_S


@dataclass(frozen=True)
class Detection:
    name: str
    """The model's id (``hey_jarvis``)."""
    phrase: str
    """What is said ("Hey Jarvis")."""
    at: float
    """Audio time of the detection, seconds from the start of the stream."""


class WakeWords:
    """One or several built-in models, a shared cutoff and a cooldown."""

    def __init__(
        self, names: list[str], *, cutoff: float | None = None, cooldown_s: float = 2.0
    ) -> None:
        self.models = [MicroWakeWord.from_builtin(Model(name)) for name in names]
        if cutoff is not None:
            for model in self.models:
                model.probability_cutoff = cutoff
        self.features = MicroWakeWordFeatures()
        self.cooldown_s = cooldown_s
        self.now = 0.0
        self._quiet_until = 0.0

    @property
    def names(self) -> list[str]:
        return [m.id for m in self.models]

    def process(self, frame: bytes) -> Detection | None:
        """Feed one frame; a detection when a model fires outside the cooldown."""
        self.now += len(frame) / FRAME_BYTES * FRAME_S
        found: Detection | None = None
        for features in self.features.process_streaming(frame):
            for model in self.models:
                if model.process_streaming(features) and found is None:
                    found = Detection(model.id, model.wake_word, self.now)
        if found is None:
            return None
        # Scores stay high for a while after a detection: start every model afresh.
        for model in self.models:
            model.reset()
        if self.now < self._quiet_until:
            return None
        self._quiet_until = self.now + self.cooldown_s
        return found

    def close(self) -> None:
        for model in self.models:
            model.close()
