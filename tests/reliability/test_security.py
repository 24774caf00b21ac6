"""Security: pickled messages, Flower behind auth, Redis with a password and TLS, secrets kept
out of logs, events, messages and Flower, URL tools that refuse internal addresses, and a
calculator that cannot be made to burn CPU."""

from __future__ import annotations

import base64
import json
import pickle
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection, Exchange, Producer
from pydantic import SecretStr

from testkit.fakes.http_services import FakeServices
from tests.conftest import SPEECH, RedisServer, System, free_port, system_env
from tests.reliability.conftest import (
    assert_workers_alive,
    full_logs,
    running_system,
    wait_for_logs,
)
from tests.reliability.tls import make_tls_files
from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, TOOLS_RUN, TTS_SPEAK
from voxqueue.client.direct import Client, Unavailable
from voxqueue.settings import RedisSettings, Settings

pytestmark = pytest.mark.integration

OPENAI_KEY = "sk-test-secret-0123456789"  # what system_env gives the workers
ELEVEN_KEY = "el-test-secret-0123456789"
REDIS_PW = "redis-pw-7Hq2Zx"
FLOWER_USER, FLOWER_PW = "ops", "flower-pw-Kd81Lm"
SECRETS = (OPENAI_KEY, ELEVEN_KEY, REDIS_PW, FLOWER_PW)


def leaked(text: str | bytes) -> list[str]:
    """The secrets found in ``text``."""
    data = text.encode() if isinstance(text, str) else text
    return [s for s in SECRETS if s.encode() in data]


def cmdline_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def children_of(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in found]


def http_get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


class RedisMonitor(threading.Thread):
    """Every command Redis receives (MONITOR), as raw lines: what was really sent."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.lines: list[bytes] = []
        self._stop_now = threading.Event()
        self._ready = threading.Event()

    def run(self) -> None:
        r = redis.Redis.from_url(self.url)
        conn = r.connection_pool.get_connection()
        conn.send_command("MONITOR")
        conn.read_response()
        self._ready.set()
        while not self._stop_now.is_set():
            line = conn.read_response()
            self.lines.append(line if isinstance(line, bytes) else str(line).encode())
        conn.disconnect()

    def __enter__(self) -> RedisMonitor:
        self.start()
        assert self._ready.wait(10), "MONITOR did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_now.set()
        redis.Redis.from_url(self.url).ping()  # wakes the reader up
        self.join(10)


@pytest.fixture(scope="module")
def guarded(fake_providers, tmp_path_factory) -> Iterator[System]:
    """Redis with a password, workers logging at DEBUG, Flower behind basic auth, loopback
    allow-listed for the URL tools (so a local page can redirect to the metadata address)."""
    server = RedisServer("--requirepass", REDIS_PW)
    server.start()
    url = f"redis://:{REDIS_PW}@127.0.0.1:{server.port}/0"
    env = system_env(
        url, fake_providers, VOXQUEUE_URL_ALLOWLIST="127.0.0.1", VOXQUEUE_LOG_LEVEL="DEBUG"
    )
    try:
        with running_system(
            env, tmp_path_factory.mktemp("guarded-logs"), loglevel="DEBUG"
        ) as system:
            sup = system.sup
            sup.settings = sup.settings.replace(
                dashboard={
                    "flower_port": free_port(),
                    "flower_user": FLOWER_USER,
                    "flower_password": SecretStr(FLOWER_PW),
                }
            )
            sup.start("flower", sup.flower_argv(), sup.flower_env())
            base = f"http://127.0.0.1:{sup.settings.dashboard.flower_port}"
            give_up = time.time() + 60
            while http_get(f"{base}/api/workers", (FLOWER_USER, FLOWER_PW))[0] != 200:
                assert time.time() < give_up, "Flower did not start"
                time.sleep(0.5)
            system.flower_url = base  # type: ignore[attr-defined]
            yield system
    finally:
        server.stop()


# -- pickle -----------------------------------------------------------------------------------


class _Touch:
    """Unpickling this creates ``path`` (as an attacker's payload would run a command)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def publish_pickle(url: str, queue: str, task: str, payload: object, *, v2: bool) -> None:
    """Put a real kombu message with a pickled body on ``queue``, as Celery would send one."""
    task_id = str(uuid.uuid4())
    if v2:  # protocol 2: the task in the headers, (args, kwargs, embed) in the body
        headers = {
            "lang": "py",
            "task": task,
            "id": task_id,
            "root_id": task_id,
            "parent_id": None,
            "group": None,
            "retries": 0,
            "eta": None,
            "expires": None,
            "timelimit": [None, None],
            "argsrepr": "(...)",
            "kwargsrepr": "{}",
            "origin": "attacker",
            "ignore_result": False,
        }
        body = pickle.dumps(
            ((payload,), {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None})
        )
    else:  # protocol 1: everything in the body
        headers = {}
        body = pickle.dumps({"task": task, "id": task_id, "args": (payload,), "kwargs": {}})
    with Connection(url) as conn:
        producer = Producer(conn.default_channel, exchange=Exchange("voxqueue", type="direct"))
        producer.publish(
            body,
            routing_key=queue,
            headers=headers,
            content_type="application/x-python-serialize",
            content_encoding="binary",
            correlation_id=task_id,
        )


def test_a_pickled_message_is_refused_and_never_run(
    system, client, fake, reliability_case, tmp_path
):
    case = reliability_case("pickled task messages pushed onto the queues")
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(_Touch(control)))  # the payload is live: unpickling runs it
    assert control.exists()
    targets = {"agent": AGENT_STEP, "stt": STT_TRANSCRIBE, "tools": TOOLS_RUN, "tts": TTS_SPEAK}
    markers = []
    for queue, task in targets.items():
        for v2 in (True, False):
            marker = tmp_path / f"pwned-{queue}-{'v2' if v2 else 'v1'}"
            markers.append(marker)
            publish_pickle(system.env["VOXQUEUE_REDIS_URL"], queue, task, _Touch(marker), v2=v2)
    case.refused(len(markers))
    refusal = "Refusing to deserialize untrusted content of type pickle"
    give_up = time.time() + 30
    while full_logs(system).count(refusal) < len(markers) or any(
        client.redis.llen(q) for q in targets
    ):
        assert time.time() < give_up, (
            f"{full_logs(system).count(refusal)} refusals logged for {len(markers)} messages; "
            f"left on the queues: {[client.redis.llen(q) for q in targets]}"
        )
        time.sleep(0.2)
    # Each message's refusal is logged where it would have been unpickled: none of them ran.
    assert [m.name for m in markers if m.exists()] == [], "a pickled payload was executed"
    result = case.check(client.ask("still safe?", session="rel-pickle"))
    assert result.status == "ok", result.error
    assert_workers_alive(system)
    case.note(
        f"{len(markers)} messages (protocol 1 and 2, four queues) refused and dropped; "
        "no payload ran; the next turn ok"
    )


# -- Redis with a password, Flower ------------------------------------------------------------


def test_a_full_spoken_turn_works_with_a_redis_password(guarded, fake_providers, reliability_case):
    fake = fake_providers
    fake.reset()
    case = reliability_case("Redis with a password (requirepass)")
    fake.script_transcripts("What time is it in Tokyo?")
    fake.script_chat(
        {
            "match": "tokyo",
            "tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}],
        },
        {"after_tool": True, "content": "It is evening in Tokyo."},
    )
    turn = guarded.client().say(SPEECH / "command_time.wav", session="rel-pw")
    result = case.check(turn)
    assert result.status == "ok", result.error
    assert result.reply == "It is evening in Tokyo."
    assert [c.name for c in result.tool_calls] == ["get_current_time"]
    assert len(turn.audio()) > 16000
    wait_for_logs(guarded, "beat: Acquired lock")  # beat (redbeat) authenticates too
    assert_workers_alive(guarded)
    case.note("speech, tool call and reply audio over an authenticated connection; beat too")


def test_a_wrong_redis_password_is_a_clear_error_that_hides_it(guarded, reliability_case):
    case = reliability_case("client with a wrong Redis password")
    url = guarded.env["VOXQUEUE_REDIS_URL"].replace(REDIS_PW, "not-the-password")
    client = Client(Settings(redis=RedisSettings(url=url)))
    try:
        with pytest.raises(Unavailable) as err:
            client.ask("hello", session="rel-wrong-pw")
    finally:
        client.close()
    case.refused()
    assert "not-the-password" not in str(err.value) and "***" in str(err.value)
    assert "auth" in str(err.value).lower() or "password" in str(err.value).lower()
    case.note("Unavailable at once (a refused password is not retried), the password masked")


def test_flower_needs_credentials(guarded, reliability_case):
    case = reliability_case("Flower without or with wrong credentials")
    base = guarded.flower_url
    for path in (
        "/",
        "/workers",
        "/tasks",
        "/broker",
        "/api/workers",
        "/api/tasks",
        "/api/task/types",
        "/api/queues/length",
    ):
        assert http_get(base + path)[0] == 401, path
        assert http_get(base + path, (FLOWER_USER, "wrong"))[0] == 401, path
        case.refused(2)
    assert http_get(base + "/api/workers", (FLOWER_USER, FLOWER_PW))[0] == 200
    # Flower leaves its Prometheus endpoint open by design: it must give nothing secret away.
    status, metrics = http_get(base + "/metrics")
    assert status == 200 and leaked(metrics) == []
    case.note(
        "every page and API 401 without or with wrong credentials; /metrics is open "
        "(Flower's design, for Prometheus) and holds no secret"
    )


def test_no_secret_in_logs_events_messages_or_flower(guarded, fake_providers, reliability_case):
    fake = fake_providers
    fake.reset()
    case = reliability_case("secrets in logs, events, task messages and Flower")
    fake.script_chat(
        {
            "match": "secret",
            "tool_calls": [
                {"name": "calculate", "arguments": {"expression": "6 * 7"}},
                {"name": "whoami", "arguments": {}},
            ],
        },
        {"after_tool": True, "content": "Forty-two. Nothing secret here."},
    )
    client = guarded.client()
    url = guarded.env["VOXQUEUE_REDIS_URL"]
    fake.script_transcripts("tell me a secret")
    with RedisMonitor(url) as monitor:
        turn = client.say(SPEECH / "command_time.wav", session="rel-secret")
        result = case.check(turn)
        assert result.status == "ok", result.error
        second = client.ask("a secret please", session="rel-secret")
        assert case.check(second).status == "ok"
    assert [c.name for c in result.tool_calls] == ["calculate", "whoami"]
    # Everything sent to Redis: task messages (queues, unacked), events, history, results.
    sent = b"\n".join(monitor.lines)
    assert b"LPUSH" in sent.upper() and turn.turn_id.encode() in sent, "MONITOR saw nothing"
    assert leaked(sent) == [], "a secret was written to Redis"
    # The turns' events, as the caller reads them.
    for t in (turn, second):
        raw = b"".join(str(e.event.model_dump()).encode() for e in client.store.history(t.turn_id))
        assert leaked(raw) == []
    # Flower: task arguments as it shows them, and the workers' configuration.
    base, auth = guarded.flower_url, (FLOWER_USER, FLOWER_PW)
    give_up = time.time() + 30
    while True:
        status, tasks = http_get(f"{base}/api/tasks", auth)
        if status == 200 and turn.turn_id[:12].encode() in tasks:
            break
        assert time.time() < give_up, f"Flower never showed the turn's tasks: {tasks[:500]!r}"
        time.sleep(0.5)
    shown = json.loads(tasks)
    assert any(turn.turn_id[:12] in str(t.get("args")) for t in shown.values()), "no args"
    assert leaked(tasks) == [], "Flower shows a secret in task arguments"
    status, workers = http_get(f"{base}/api/workers?refresh=1", auth)
    assert status == 200
    case.note(
        "checked: every Redis command (MONITOR), events, DEBUG logs, Flower tasks and workers; "
        "the Redis password was shown by Flower (redbeat_redis_url): fixed in beat_config"
    )
    assert leaked(workers) == [], "Flower shows a secret in the workers' configuration"
    # Logs of every process, workers at DEBUG (task arguments included).
    logs = full_logs(guarded)
    applied = [line for line in logs.splitlines() if "TaskPool: Apply" in line]
    assert any(turn.turn_id[:12] in line for line in applied), "the logs are not at DEBUG"
    assert leaked(logs) == [], "a secret is in the logs"
    # Command lines, as `ps` shows them, of every process of the system and its children.
    argv = b"\n".join(cmdline_of(pid) for p in guarded.sup.procs
                      for pid in (p.popen.pid, *children_of(p.popen.pid)))
    assert b"celery" in argv and leaked(argv) == [], "a secret is on a command line"
    # The exporter's metrics (what Prometheus scrapes, with no auth).
    from voxqueue.observability.metrics import Exporter

    exporter = Exporter(client.settings)
    metrics_port = free_port()
    exporter.serve(metrics_port)
    try:
        exporter.sample_queues()
        for t in (turn, second):
            exporter.observe(t.turn_id)
        status, metrics = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        exporter.stop()
    assert status == 200 and b"voxqueue_" in metrics and leaked(metrics) == []
    case.note("and: every command line (ps), the exporter's /metrics")


# -- rediss:// ----------------------------------------------------------------------------------


def test_a_full_turn_works_over_tls(fake_providers, reliability_case, tmp_path):
    case = reliability_case("Redis over TLS (rediss://, CA-verified) with a password")
    files = make_tls_files(tmp_path / "tls")
    tls_port = free_port()
    server = RedisServer(
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        str(files.cert),
        "--tls-key-file",
        str(files.key),
        "--tls-ca-cert-file",
        str(files.ca),
        "--tls-auth-clients",
        "no",
        "--requirepass",
        REDIS_PW,
    )
    try:
        server.start()
    except RuntimeError:
        pytest.skip("this redis-server cannot serve TLS (built without it)")
    fake = fake_providers
    fake.reset()
    url = (
        f"rediss://:{REDIS_PW}@127.0.0.1:{tls_port}/0"
        f"?ssl_cert_reqs=required&ssl_ca_certs={files.ca}"
    )
    try:
        env = system_env(url, fake)
        with running_system(env, tmp_path / "logs") as system:
            fake.script_chat(
                {
                    "match": "sum",
                    "tool_calls": [{"name": "calculate", "arguments": {"expression": "12 * 13"}}],
                },
                {"after_tool": True, "content": "It is 156."},
            )
            turn = system.client().ask("what is the sum", session="rel-tls")
            result = case.check(turn)
            assert result.status == "ok", result.error
            assert result.reply == "It is 156." and len(turn.audio()) > 0
            wait_for_logs(system, "beat: Acquired lock")  # beat's redbeat lock over TLS too
            assert_workers_alive(system)
            # The plain port is open too, but the system never used it: every client is TLS.
            plain = redis.Redis(port=server.port, password=REDIS_PW)
            me = str(plain.client_id())
            others = [c for c in plain.client_list() if c["id"] != me]
            assert others and all(c["laddr"].endswith(f":{tls_port}") for c in others), others
        # A certificate from another CA is refused: the CA in the URL is really checked.
        other = make_tls_files(tmp_path / "other")
        bad = url.replace(str(files.ca), str(other.ca))
        with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            redis.Redis.from_url(bad, socket_connect_timeout=5).ping()
    finally:
        server.stop()
    case.note("workers, beat, client and chord results over TLS; a wrong CA is refused")


# -- URL tools and the calculator through a whole turn -------------------------------------------


def test_fetch_url_refuses_the_metadata_address_and_loopback_names(client, fake, reliability_case):
    case = reliability_case("fetch_url to metadata, private and loopback addresses")
    urls = {
        "c_meta": "http://169.254.169.254/latest/meta-data/",
        "c_mapped": "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "c_private": "http://10.0.0.1/admin",
        "c_localhost": f"http://localhost:{free_port()}/",
        "c_decimal": "http://2130706433/",
    }
    fake.script_chat(
        {
            "match": "fetch",
            "tool_calls": [
                {"id": cid, "name": "fetch_url", "arguments": {"url": u}} for cid, u in urls.items()
            ],
        },
        {"after_tool": True, "content": "I can't open those."},
    )
    # The person names them (fetch_url opens only hosts named in the turn): the address
    # guard is what refuses them.
    said = "fetch the metadata: " + " ".join(urls.values())
    result = case.check(client.ask(said, session="rel-ssrf", speak=False))
    assert result.status == "ok", result.error
    messages = fake.chat_requests()[-1]["messages"]
    out = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(out) == set(urls)
    for cid, text in out.items():
        assert text.startswith("Error") and "refusing to connect" in text, (cid, text)
    case.note(f"{len(urls)} addresses refused, through IP literals and a DNS name")


def test_fetch_url_refuses_a_redirect_to_the_metadata_address(
    guarded, fake_providers, reliability_case
):
    fake = fake_providers
    fake.reset()
    case = reliability_case("fetch_url redirected to the metadata address")
    with FakeServices() as services:
        page = f"{services.url}/web/redirect"
        fake.script_chat(
            {
                "match": "redirect",
                "tool_calls": [
                    {"id": "c_redirect", "name": "fetch_url", "arguments": {"url": page}}
                ],
            },
            {"after_tool": True, "content": "That page is off limits."},
        )
        result = case.check(
            guarded.client().ask(f"follow the redirect {page}", session="rel-redirect",
                                 speak=False)
        )
        assert services.requests_to("/web/redirect"), "the allow-listed page was never asked"
    assert result.status == "ok", result.error
    tool = [m for m in fake.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert tool and "169.254.169.254" in tool[0]["content"]
    assert "refusing to connect" in tool[0]["content"], tool[0]["content"]
    case.note("the redirect target is checked like the first address")


def test_the_calculator_cannot_be_made_to_burn_cpu(system, client, fake, reliability_case):
    case = reliability_case("calculator asked for 9**9**9**9 and other bombs")
    bombs = {
        "c_tower": "9**9**9**9",
        "c_fact": "factorial(100000)",
        "c_shift": "1 << 10**9",
        "c_nest": "(" * 5000 + "1" + ")" * 5000,
    }
    fake.script_chat(
        {
            "match": "huge",
            "tool_calls": [
                {"id": cid, "name": "calculate", "arguments": {"expression": e}}
                for cid, e in bombs.items()
            ],
        },
        {"after_tool": True, "content": "That number is too big to say."},
    )
    result = case.check(client.ask("something huge", session="rel-bomb"))
    assert result.status == "ok", result.error
    ends = {
        e.event.data["call_id"]: e.event.data
        for e in client.store.history(result.turn_id)
        if e.event.type == "tool-end"
    }
    assert set(ends) == set(bombs)
    for cid, data in ends.items():
        assert not data["ok"], (cid, data)
        assert data["error_code"] != "timeout", f"{cid} ran until its timeout"
        assert data["ms"] < 5000, f"{cid} took {data['ms']} ms"
    assert_workers_alive(system)
    after = case.check(client.ask("and now a small one", session="rel-bomb", speak=False))
    assert after.status == "ok"
    case.note("each refused at once (no timeout); the tools worker kept serving")
