"""Wake word detection on the device: pymicro-wakeword by default, openWakeWord as an option
(``pyopen-wakeword``); both ship their models inside their wheels.

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


class _OpenWakeWords:
    """openWakeWord models (pyopen-wakeword): a probability per 80 ms step, cut at ``cutoff``."""

    def __init__(self, names: list[str], cutoff: float) -> None:
        try:
            from pyopen_wakeword import Model as OwwModel
            from pyopen_wakeword import OpenWakeWord, OpenWakeWordFeatures
        except ImportError as exc:
            raise ValueError("the openwakeword engine needs: pip install pyopen-wakeword") from exc
        self.models = [(name, OpenWakeWord.from_builtin(OwwModel(name))) for name in names]
        self.features = OpenWakeWordFeatures.from_builtin()
        self.cutoff = cutoff

    def detect(self, frame: bytes) -> str | None:
        found = None
        for embeddings in self.features.process_streaming(frame):
            for name, model in self.models:
                if any(p >= self.cutoff for p in model.process_streaming(embeddings)):
                    found = found or name
        return found

    def reset(self) -> None:
        for _name, model in self.models:
            model.reset()

    def close(self) -> None:
        for _name, model in self.models:
            model.close()
        self.features.close()


class WakeWords:
    """One or several built-in models, a shared cutoff and a cooldown."""

    def __init__(
        self, names: list[str], *, cutoff: float | None = None, cooldown_s: float = 2.0,
        engine: str = "micro",
    ) -> None:
        self._open: _OpenWakeWords | None = None
        self.models: list[MicroWakeWord] = []
        if engine == "openwakeword":
            self._open = _OpenWakeWords(names, 0.5 if cutoff is None else cutoff)
        else:
            self.models = [MicroWakeWord.from_builtin(Model(name)) for name in names]
            if cutoff is not None:
                for model in self.models:
                    model.probability_cutoff = cutoff
            self.features = MicroWakeWordFeatures()
        self._names = list(names)
        self.cooldown_s = cooldown_s
        self.now = 0.0
        self._quiet_until = 0.0

    @property
    def names(self) -> list[str]:
        return [m.id for m in self.models] if self.models else self._names

    def process(self, frame: bytes) -> Detection | None:
        """Feed one frame; a detection when a model fires outside the cooldown."""
        self.now += len(frame) / FRAME_BYTES * FRAME_S
        found: Detection | None = None
        if self._open is not None:
            name = self._open.detect(frame)
            if name is not None:
                found = Detection(name, name.replace("_", " ").title(), self.now)
                self._open.reset()
        for features in self.features.process_streaming(frame) if self.models else ():
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
        if self._open is not None:
            self._open.close()
