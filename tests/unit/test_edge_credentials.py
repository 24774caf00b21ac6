"""A device holds its own token, never the server's Redis password: ``voxqueue edge`` and
``voxqueue satellite`` refuse a Redis on another machine unless the host is declared trusted."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from edge.settings import EdgeSettings, direct_redis_problem
from tests.conftest import ROOT

VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
CANARY = "canary-Redis-pw-77"
REMOTE = f"rediss://:{CANARY}@voice-server.lan:6380/0"


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:6379/0", "redis://localhost:6379", "rediss://:pw@[::1]:6380/0",
    "redis://:pw@127.0.0.2/1", "unix:///run/redis/redis.sock", "redis://",
])
def test_a_redis_on_this_machine_is_accepted(url):
    assert direct_redis_problem(url, None, trusted=False) is None


@pytest.mark.parametrize("url", [
    REMOTE, "redis://192.168.1.5:6379/0", "redis://[fd00::5]:6379", "redis://0.0.0.0:6379",
    "redis://localhost.example.com:6379", "redis://10.0.0.2",
])
def test_a_redis_elsewhere_is_refused_with_the_way_through_the_gateway(url):
    problem = direct_redis_problem(url, None, trusted=False)
    assert problem is not None
    assert "voxqueue devices add NAME" in problem and "VOXQUEUE_GATEWAY_URL" in problem
    assert "VOXQUEUE_DEVICE_TOKEN" in problem and "--trusted-host" in problem
    assert CANARY not in problem


def test_a_gateway_or_a_trusted_host_is_accepted():
    assert direct_redis_problem(REMOTE, "https://voice-server.lan:8765", trusted=False) is None
    assert direct_redis_problem(REMOTE, None, trusted=True) is None
    trusted = EdgeSettings(_env_file=None, direct_redis="1")  # type: ignore[call-arg]
    assert trusted.direct_redis is True
    assert EdgeSettings(_env_file=None).direct_redis is False  # type: ignore[call-arg]


def run_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VOXQUEUE_", "OPENAI_", "ELEVENLABS_"))}
    return subprocess.run([*VOXQUEUE, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**base, "PYTHONPATH": str(ROOT), **env})


def silent_wav(path: Path) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(bytes(16000))  # 0.5 s
    return path


def test_the_edge_refuses_a_remote_redis_and_runs_once_the_host_is_trusted(tmp_path):
    wav = silent_wav(tmp_path / "quiet.wav")
    args = ("edge", "--wav", str(wav), "--no-announcements", "--audio-out", str(tmp_path))
    # 0.0.0.0 is not loopback for the check, and refuses a connection at once if one is tried.
    refused = run_cli(tmp_path, *args, VOXQUEUE_REDIS_URL=f"redis://:{CANARY}@0.0.0.0:1/0")
    said = refused.stdout + refused.stderr
    assert refused.returncode == 2, said
    assert "refusing to reach Redis at 0.0.0.0" in said and "voxqueue devices add" in said
    assert CANARY not in said
    for trust in ({"VOXQUEUE_EDGE_DIRECT_REDIS": "1"}, {}):
        extra = () if trust else ("--trusted-host",)
        ran = run_cli(tmp_path, *args, *extra, VOXQUEUE_REDIS_URL="redis://0.0.0.0:1/0",
                      **trust)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "refusing" not in ran.stdout + ran.stderr


def test_the_satellite_refuses_a_remote_redis(tmp_path):
    refused = run_cli(tmp_path, "satellite", "--uri", "tcp://127.0.0.1:1",
                      VOXQUEUE_REDIS_URL=REMOTE)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "voxqueue devices add NAME" in refused.stderr and CANARY not in refused.stderr
