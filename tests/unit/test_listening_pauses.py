"""Where a streamed command pauses: a whole decode (Whisper) and an engine that hears the speech
as it arrives each have a pause of their own."""

from __future__ import annotations

from tests.conftest import SPEECH
from voxqueue.audio import read_speech
from voxqueue.settings import ProviderSettings
from workers.stt.listening import FRAME_BYTES, Pauses, pause_s


def test_a_whole_decode_and_a_live_engine_each_pause_as_set():
    assert pause_s(ProviderSettings(), live=False) == pause_s(ProviderSettings(), live=True) == 0.2
    providers = ProviderSettings(stt_decode_pause_s=0.12)
    assert pause_s(providers, live=False) == 0.12
    assert pause_s(providers, live=True) == 0.2
    speech = read_speech(SPEECH / "command_time.wav", max_bytes=10**8, max_seconds=60).data
    first = Pauses(0.2)
    first.feed(speech)
    words = speech[:first.spoken_until]  # the command, without its trailing silence
    gap = bytes(FRAME_BYTES * 8)  # 0.16 s of silence, then the words again
    for live, found in ((False, True), (True, False)):
        pauses = Pauses(pause_s(providers, live=live))
        ends = pauses.feed(words + gap + words)
        assert (len(words) in ends) is found, live
