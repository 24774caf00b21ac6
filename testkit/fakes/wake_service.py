"""A Wyoming wake word service for ``wyoming-satellite --wake-uri``, on the edge's own engine
(pymicro-wakeword, as ``wyoming-microwakeword`` runs it): audio chunks in, ``detection`` out.

    python -m testkit.fakes.wake_service --port PORT     # prints READY once listening
"""

from __future__ import annotations

import argparse
import asyncio

from wyoming.audio import AudioChunk, AudioChunkConverter
from wyoming.event import Event
from wyoming.server import AsyncEventHandler, AsyncTcpServer
from wyoming.wake import Detection

from edge.frames import FRAME_BYTES
from edge.wake import WakeWords


class WakeHandler(AsyncEventHandler):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.wake = WakeWords(["hey_jarvis", "okay_nabu"])
        self.converter = AudioChunkConverter(rate=16000, width=2, channels=1)
        self.pending = bytearray()

    async def handle_event(self, event: Event) -> bool:
        if AudioChunk.is_type(event.type):
            self.pending += self.converter.convert(AudioChunk.from_event(event)).audio
            whole = len(self.pending) - len(self.pending) % FRAME_BYTES
            for at in range(0, whole, FRAME_BYTES):
                found = self.wake.process(bytes(self.pending[at:at + FRAME_BYTES]))
                if found is not None:
                    await self.write_event(Detection(name=found.name,
                                                     timestamp=int(found.at * 1000)).event())
            del self.pending[:whole]
        return True


async def serve(port: int) -> None:
    server = AsyncTcpServer("127.0.0.1", port)
    await server.start(WakeHandler)
    print("READY", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(serve(parser.parse_args().port))
