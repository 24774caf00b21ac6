"""A real voxqueue for Home Assistant's tests, run from voxqueue's own virtualenv.

These tests run in Home Assistant's virtualenv (``.venv-ha``, made by ``./vq test --ha``), which
has Home Assistant, its test harness and its ``wyoming`` library but none of voxqueue's
dependencies. So voxqueue runs in processes of its own, from voxqueue's virtualenv
(``VOXQUEUE_MAIN_PYTHON``, default ``.venv/bin/python``), as a user runs it:

- ``voxqueue up --no-flower --no-beat``: a real Redis (embedded: none answers at its URL) and a
  worker per queue, on the offline engines: Whisper (pocketsphinx without it) and Piper;
- the agent's LLM is the fake OpenAI server of ``testkit.fakes.provider_server`` (the one thing
  faked, at its HTTP boundary), with voxqueue's local intents first, as by default;
- ``voxqueue wyoming`` on a free port, which Home Assistant's ``wyoming`` integration is
  pointed at.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

if importlib.util.find_spec("pytest_homeassistant_custom_component") is None:
    # voxqueue's virtualenv (pytest tests/homeassistant): these run in Home Assistant's own,
    # with ./vq test --ha.
    collect_ignore_glob = ["*"]

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "fixtures" / "speech"
MAIN_PYTHON = Path(os.environ.get("VOXQUEUE_MAIN_PYTHON") or ROOT / ".venv" / "bin" / "python")
#: How long the workers may take to load their models (Whisper, Piper) on a busy machine.
READY_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FakeLLM:
    """The fake OpenAI server's admin routes, over HTTP."""

    url: str

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/_fake/{route}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def reset(self) -> None:
        self._call("POST", "reset")

    def script_chat(self, *responses: dict[str, Any]) -> None:
        self._call("POST", "chat", list(responses))

    def fail_chat(self, times: int) -> None:
        """The next ``times`` chat completions answer 500."""
        self._call("POST", "faults", {"route": "chat", "status": 500, "times": times})

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the chat completions asked for, in order."""
        state = self._call("GET", "requests")
        return [r["json"] for r in state["requests"] if r["route"] == "chat"]


@dataclass
class Voxqueue:
    """The running system: where its Wyoming server listens, what it runs, its logs."""

    port: int
    stt: str
    llm: FakeLLM
    logs: Path

    def log_tail(self) -> str:
        return "\n".join(f"===== {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.logs.glob("*.log")))


#: Run in voxqueue's virtualenv: wait until a worker answers on every queue and those of the
#: three stages have built their engines (each records it in Redis once it has).
READY = f"""
import time
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES, Settings
from voxqueue.up.supervisor import Supervisor

settings = Settings()
Supervisor(settings).wait_for_workers(QUEUES, timeout={READY_S})
client = Client(settings)
give_up = time.monotonic() + {READY_S}
while len(client.redis.hgetall(client.keys.providers_in_service())) < 3:
    assert time.monotonic() < give_up, "the workers never recorded their engines"
    time.sleep(0.5)
"""


def _describe(port: int) -> Info | None:
    async def ask() -> Info | None:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            while (event := await client.read_event()) is not None:
                if Info.is_type(event.type):
                    return Info.from_event(event)
        return None

    loop = asyncio.new_event_loop()  # not asyncio.run: it would unset the harness's loop
    try:
        return loop.run_until_complete(asyncio.wait_for(ask(), 5))
    except (OSError, TimeoutError):
        return None
    finally:
        loop.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _stt_engine() -> str:
    """Whisper when voxqueue's virtualenv has it (``voxqueue[whisper]``), else pocketsphinx."""
    found = subprocess.run([str(MAIN_PYTHON), "-c", "import faster_whisper"],
                           capture_output=True, check=False)
    return "whisper" if found.returncode == 0 else "pocketsphinx"


@pytest.fixture(scope="session")
def voxqueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Voxqueue]:
    if not MAIN_PYTHON.exists():
        pytest.fail(f"voxqueue's virtualenv is not at {MAIN_PYTHON} (./vq test --ha makes it; "
                    "or set VOXQUEUE_MAIN_PYTHON)")
    logs = tmp_path_factory.mktemp("voxqueue")
    import pytest_socket  # Home Assistant's harness blocks sockets; each test asks for them

    pytest_socket.enable_socket()
    procs: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VOXQUEUE_", "OPENAI_", "ELEVENLABS_", "PYTHON"))}
    env.update(PYTHONPATH=str(ROOT), VOXQUEUE_LOG_LEVEL="INFO",
               VOXQUEUE_DATA_DIR=str(logs / "data"))
    try:
        fake = subprocess.Popen([str(MAIN_PYTHON), "-m", "testkit.fakes.provider_server",
                                 "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE)
        procs.append(fake)
        assert fake.stdout is not None
        ready = fake.stdout.readline().decode().split()
        assert ready[:1] == ["READY"], f"the fake LLM did not start: {ready}"
        llm = FakeLLM(ready[1])
        stt = _stt_engine()
        env.update(VOXQUEUE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
                   VOXQUEUE_STT=stt, VOXQUEUE_TTS="piper", VOXQUEUE_LLM="openai",
                   OPENAI_API_KEY="sk-test-secret-0123456789",
                   OPENAI_BASE_URL=llm.url + "/v1", VOXQUEUE_PROVIDER_BACKOFF_S="0.05")
        voxqueue = str(MAIN_PYTHON.parent / "voxqueue")
        redis_port = env["VOXQUEUE_REDIS_URL"].rsplit(":", 1)[1].split("/")[0]
        port = free_port()
        for name, argv in (
            ("up", [voxqueue, "up", "--no-flower", "--no-beat", "--redis-port", redis_port]),
            ("wyoming", [voxqueue, "wyoming", "--uri", f"tcp://127.0.0.1:{port}"]),
        ):
            with (logs / f"{name}.log").open("wb") as out:
                procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out,
                                              stderr=subprocess.STDOUT))
            time.sleep(1.0)  # Redis first: the Wyoming server connects to it
        system = Voxqueue(port, stt, llm, logs)
        ready = subprocess.run([str(MAIN_PYTHON), "-c", READY], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=READY_S + 30, check=False)
        dead = [p.args for p in procs if p.poll() is not None]
        if ready.returncode != 0 or dead or _describe(port) is None:
            pytest.fail(f"voxqueue did not start ({dead or ready.stderr[-2000:]}):\n"
                        f"{system.log_tail()}")
        pytest_socket.disable_socket(allow_unix_socket=True)
        yield system
    finally:
        for proc in reversed(procs):
            _stop(proc)
