"""Where a streamed command pauses: shorter before a whole decode (Whisper) than for an engine
that hears the speech as it arrives."""

from __future__ import annotations

from tests.conftest import SPEECH
from voxqueue.audio import read_speech
from voxqueue.settings import ProviderSettings
from workers.stt.listening import FRAME_BYTES, Pauses, pause_s


def test_a_whole_decode_comes_after_a_shorter_pause_than_a_live_engine_waits_for():
    providers = ProviderSettings()
    assert pause_s(providers, live=False) == providers.stt_decode_pause_s == 0.12
    assert pause_s(providers, live=True) == providers.speech_pause_s == 0.2
    speech = read_speech(SPEECH / "command_time.wav", max_bytes=10**8, max_seconds=60).data
    first = Pauses(0.2)
    first.feed(speech)
    words = speech[:first.spoken_until]  # the command, without its trailing silence
    gap = bytes(FRAME_BYTES * 8)  # 0.16 s of silence, then the words again
    for live, found in ((False, True), (True, False)):
        pauses = Pauses(pause_s(providers, live=live))
        ends = pauses.feed(words + gap + words)
        assert (len(words) in ends) is found, live
