"""Pipecat's side of ``bench.pipecat_side_by_side``: runs in Pipecat's own virtualenv (it imports
nothing of voxqueue's) and is driven over stdin/stdout, a JSON line each way.

    python _pipecat_driver.py OPENAI_BASE_URL ELEVENLABS_BASE_URL

One pipeline per concurrent session, kept across turns as a Pipecat server keeps a session's:
the OpenAI LLM service (streaming chat) → the ElevenLabs HTTP TTS service (a request per
sentence, Pipecat's default sentence aggregation) → a sink that notes the first and last audio
frame. A typed question goes in as an ``LLMContextFrame`` (the question; the system prompt is
the LLM service's). Each stdin line ``{"concurrency": N, "turns": [{"id", "question"}, ...]}``
runs the turns N at a time and answers ``{"turns": [{"id", "t0", "first_audio", "last_audio"}]}``
(epoch seconds: question queued, first audio frame out of the TTS, last one).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import aiohttp
from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame, LLMFullResponseEndFrame, TTSAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.workers.runner import WorkerRunner

SYSTEM = "You are a helpful voice assistant. Answer briefly."
#: Pipecat logs every frame's story at DEBUG; voxqueue's workers run at WARNING in the bench.
LOG_LEVEL = "WARNING"


class Sink(FrameProcessor):
    """The end of the pipeline: when the turn's first and last audio came, and its end."""

    def __init__(self) -> None:
        super().__init__()
        self.first_audio: float | None = None
        self.last_audio: float | None = None
        self.done = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            now = time.time()
            self.first_audio = self.first_audio or now
            self.last_audio = now
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.done.set()
        await self.push_frame(frame, direction)


class Session:
    """One conversation's pipeline."""

    def __init__(self, http: aiohttp.ClientSession, openai_url: str, eleven_url: str) -> None:
        self.llm = OpenAILLMService(api_key="sk-bench", base_url=openai_url,
                                    settings=OpenAILLMService.Settings(
                                        model="gpt-4o-mini", system_instruction=SYSTEM))
        self.tts = ElevenLabsHttpTTSService(
            api_key="xi-bench", aiohttp_session=http, base_url=eleven_url, sample_rate=16000,
            settings=ElevenLabsHttpTTSService.Settings(voice="bench-voice",
                                                       model="eleven_flash_v2_5"))
        self.sink = Sink()
        self.worker = PipelineWorker(Pipeline([self.llm, self.tts, self.sink]),
                                     idle_timeout_secs=None, enable_rtvi=False,
                                     check_dangling_tasks=False)

    async def turn(self, turn_id: str, question: str) -> dict[str, Any]:
        self.sink.first_audio = self.sink.last_audio = None
        self.sink.done.clear()
        context = LLMContext([{"role": "user", "content": question}])
        t0 = time.time()
        await self.worker.queue_frame(LLMContextFrame(context=context))
        await asyncio.wait_for(self.sink.done.wait(), 60)
        return {"id": turn_id, "t0": t0, "first_audio": self.sink.first_audio,
                "last_audio": self.sink.last_audio}


async def serve(session: Session, todo: list[dict[str, str]],
                done: list[dict[str, Any]]) -> None:
    """Run the turns left in ``todo`` on one session, one after another."""
    while todo:
        item = todo.pop(0)
        done.append(await session.turn(item["id"], item["question"]))


async def main(openai_url: str, eleven_url: str) -> None:
    loop = asyncio.get_running_loop()
    runner = WorkerRunner(handle_sigint=False)
    sessions: list[Session] = []
    running: asyncio.Task[None] | None = None
    async with aiohttp.ClientSession() as http:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            order = json.loads(line)
            added = []
            while len(sessions) < order["concurrency"]:
                added.append(Session(http, openai_url, eleven_url))
                sessions.append(added[-1])
            if added:
                await runner.add_workers(*(s.worker for s in added))
                if running is None:
                    running = asyncio.create_task(runner.run(auto_end=False))
                await asyncio.sleep(1.0)  # the new pipelines start
            todo: list[dict[str, str]] = list(order["turns"])
            done: list[dict[str, Any]] = []
            await asyncio.gather(*(serve(s, todo, done)
                                   for s in sessions[:order["concurrency"]]))
            print(json.dumps({"turns": done}), flush=True)
        await runner.cancel()
        if running is not None:
            await running


if __name__ == "__main__":
    logger.remove()
    logger.add(sys.stderr, level=LOG_LEVEL)
    asyncio.run(main(sys.argv[1], sys.argv[2]))
