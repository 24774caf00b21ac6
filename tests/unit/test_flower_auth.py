"""Flower's password: never the old default; made up once per machine, kept 0600, reused."""

from __future__ import annotations

import base64
import os
import stat
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.conftest import free_port, system_env
from voxqueue.settings import DashboardSettings, Settings
from voxqueue.up.flower_auth import (
    OLD_FLOWER_PASSWORD,
    flower_credentials,
    flower_password_file,
)
from voxqueue.up.supervisor import Supervisor


def settings(**dashboard) -> Settings:
    return Settings(dashboard=DashboardSettings(**dashboard))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def config_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


def test_the_default_is_unset():
    assert DashboardSettings.model_fields["flower_password"].default is None


@pytest.mark.parametrize("configured", [None, "", OLD_FLOWER_PASSWORD])
def test_no_password_or_the_old_default_gets_a_made_up_one_kept_0600(config_home, configured):
    chosen = None if configured is None else SecretStr(configured)
    s = settings(flower_password=chosen)
    first = flower_credentials(s)
    path = config_home / "voxqueue" / "flower-password"
    assert first.source == str(path) == str(flower_password_file(s))
    assert first.user == "admin"
    assert first.password != OLD_FLOWER_PASSWORD and len(first.password) >= 24
    assert path.read_text().strip() == first.password
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert flower_credentials(s) == first  # the next run reuses it
    env = Supervisor(s, env={}).flower_env()
    assert env == {"FLOWER_BASIC_AUTH": f"admin:{first.password}"}
    assert OLD_FLOWER_PASSWORD not in env["FLOWER_BASIC_AUTH"]
    assert first.password not in repr(first)


def test_a_chosen_password_is_used_and_nothing_is_written(config_home):
    s = settings(flower_user="ops", flower_password=SecretStr("a-long-chosen-password"))
    creds = flower_credentials(s)
    assert (creds.user, creds.password) == ("ops", "a-long-chosen-password")
    assert creds.source == "VOXQUEUE_FLOWER_PASSWORD"
    assert not config_home.exists()


def test_the_file_setting_home_fallback_and_repairs(tmp_path, monkeypatch):
    target = tmp_path / "secrets" / "flower"
    s = settings(flower_password_file=str(target))
    made = flower_credentials(s)
    assert made.source == str(target) and mode(target) == 0o600
    target.chmod(0o644)  # loosened by hand: tightened again, same password
    assert flower_credentials(s).password == made.password and mode(target) == 0o600
    for stale in ("", f"{OLD_FLOWER_PASSWORD}\n"):  # emptied, or the old default: replaced
        target.write_text(stale)
        fresh = flower_credentials(s).password
        assert fresh not in ("", OLD_FLOWER_PASSWORD) and target.read_text().strip() == fresh
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".config" / "voxqueue" / "flower-password"
    assert flower_password_file(settings()) == expected
    monkeypatch.setenv("VOXQUEUE_FLOWER_PASSWORD_FILE", str(target))
    assert flower_password_file(Settings()) == target


def test_concurrent_first_runs_agree_on_one_password(config_home):
    s = settings()
    seen: list[str] = []
    start = threading.Barrier(8)

    def run() -> None:
        start.wait()
        seen.append(flower_credentials(s).password)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 8 and len(set(seen)) == 1
    assert os.listdir(config_home / "voxqueue") == ["flower-password"]  # no drafts left


def _status(url: str, auth: tuple[str, str] | None) -> int:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def test_a_real_flower_refuses_the_old_default(redis_server, config_home, tmp_path):
    s = settings(flower_port=free_port(), flower_password=SecretStr(OLD_FLOWER_PASSWORD)).replace(
        redis={"url": redis_server.url})
    env = {**system_env(redis_server.url, None), "XDG_CONFIG_HOME": str(config_home)}
    sup = Supervisor(s, env=env, log_dir=tmp_path / "logs")
    creds = flower_credentials(s)
    sup.start("flower", sup.flower_argv(), sup.flower_env())
    base = f"http://127.0.0.1:{s.dashboard.flower_port}/api/workers"
    try:
        give_up = time.time() + 60
        while _status(base, (creds.user, creds.password)) != 200:
            assert sup.procs[0].popen.poll() is None, (tmp_path / "logs" / "flower.log").read_text()
            assert time.time() < give_up, "Flower did not start"
            time.sleep(0.3)
        assert _status(base, ("admin", OLD_FLOWER_PASSWORD)) == 401
        assert _status(base, None) == 401
        # Not on the command line (argv[0] is the interpreter: its path may hold anything).
        assert all(OLD_FLOWER_PASSWORD not in a and creds.password not in a
                   for a in sup.procs[0].argv[1:])
    finally:
        sup.stop_all()
