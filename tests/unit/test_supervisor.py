"""Worker processes per queue: their names and the ``--processes`` option."""

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from voxqueue.cli import app
from voxqueue.settings import ProviderSettings, Settings
from voxqueue.up.process_table import (
    DEFAULT_PROCESSES,
    default_processes,
    parse_processes,
    worker_names,
)


def test_a_queues_processes_have_distinct_worker_names():
    assert worker_names("tts", 3) == ["tts", "tts-2", "tts-3"]
    assert worker_names("agent", 1) == ["agent"]


def test_processes_per_queue_are_parsed():
    assert parse_processes("tts=3, agent=2") == {"tts": 3, "agent": 2}
    assert parse_processes("") == {}


@pytest.mark.parametrize("spec", ["tts", "tts=0", "tts=x", "speech=2", "tts=-1"])
def test_a_bad_processes_spec_is_refused_with_its_part(spec):
    with pytest.raises(ValueError, match="QUEUE=N"):
        parse_processes(spec)


def test_up_refuses_a_bad_processes_spec_before_starting_anything():
    result = CliRunner().invoke(app, ["up", "--processes", "tts=many"])
    assert result.exit_code == 2
    assert "--processes" in result.output and "'tts=many'" in result.output


def test_the_queues_that_hold_streams_get_more_than_one_process():
    assert DEFAULT_PROCESSES["tts"] > 1 and DEFAULT_PROCESSES["agent"] > 1


def test_cloud_providers_get_the_default_processes_offline_models_one():
    keys = {"openai_api_key": SecretStr("sk-x"), "elevenlabs_api_key": SecretStr("el-x")}
    cloud = Settings(providers=ProviderSettings(**keys))
    assert default_processes(cloud) == DEFAULT_PROCESSES
    offline = Settings(
        providers=ProviderSettings(openai_api_key=None, elevenlabs_api_key=None,
                                   openai_base_url=None))
    assert default_processes(offline) == {}  # Piper and the local intents: one each
    mixed = Settings(providers=ProviderSettings(**keys, tts="piper"))
    assert default_processes(mixed) == {"agent": DEFAULT_PROCESSES["agent"]}
