"""The browser device (``voxqueue/gateway/page/``) in a real headless Chromium with a fake
microphone playing a recording, against ``voxqueue gateway`` in front of ``voxqueue up`` as it
runs with no keys (its default layout and offline engines: Whisper where installed, else
pocketsphinx; the local intents; Piper): paired by its link, one press of Talk
brings the spoken question's answer onto the page and its audio into the page's player; a
typed question; a timer's announcement shown and spoken; a revoked token's clear message; the
page works under its Content-Security-Policy. The page's modules (the speaking order ported
from ``voxqueue.client.result``, the end-of-command decisions) are tested in the same page.

One browser for the module: its fake microphone plays the recording once, at the first press.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from testkit.browser import Browser, chromium
from testkit.clock import wait_until
from tests.conftest import ROOT, SPEECH, RedisServer, system_env
from tests.integration.test_gateway import VOXQUEUE, Gateway, running_gateway
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.up.process_table import SHARED_WORKER
from voxqueue.up.supervisor import Supervisor

pytestmark = pytest.mark.integration

#: This module's own Redis database.
DB = 9
SPOKEN = SPEECH / "command_time.wav"


@pytest.fixture(scope="module")
def binary() -> str:
    """Chromium; in CI its absence fails the module (.ci/run installs it), elsewhere skips."""
    found = chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium in CI: .ci/run should have installed it (apt chromium)")
        pytest.skip("no Chromium here (apt install chromium): the browser device not tested")
    return found


class Up:
    """``voxqueue up`` as a user runs it with no keys (its default layout: one worker process
    for every queue, beat and the exporter on its threads; the offline engines)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.settings = Settings(redis=RedisSettings(url=env["VOXQUEUE_REDIS_URL"]))
        with log.open("wb") as out:
            self.proc = subprocess.Popen([*VOXQUEUE, "up", "--no-flower"], env=env, cwd=ROOT,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self._client: Client | None = None

    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.settings)
        return self._client

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module")
def offline(binary: str, redis_server: RedisServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    url = redis_server.url.rsplit("/", 1)[0] + f"/{DB}"
    redis.Redis.from_url(url).flushdb()
    system = Up(system_env(url, None), tmp_path_factory.mktemp("browser-up") / "up.log")
    try:
        Supervisor(system.settings).wait_for_workers(QUEUES, timeout=120, names=[SHARED_WORKER])
        yield system
    finally:
        system.stop()


@pytest.fixture(scope="module")
def gateway(offline: Up, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(offline, tmp_path_factory.mktemp("browser-gateway")) as running:
        yield running


@pytest.fixture(scope="module")
def browser(binary: str, gateway: Gateway) -> Iterator[Browser]:
    with Browser(binary, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={SPOKEN}%noloop",
                 "--autoplay-policy=no-user-gesture-required") as opened:
        opened.viewport(412, 915, mobile=True)  # a phone's screen
        yield opened


def link(gateway: Gateway, name: str) -> str:
    """``voxqueue devices add NAME --link --url …``: the pairing link it prints."""
    done = subprocess.run([*VOXQUEUE, "devices", "add", name, "--link", "--url", gateway.url],
                          env=gateway.env, cwd=ROOT, capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.strip().splitlines()[0]


def data(browser: Browser) -> dict[str, str]:
    """#app's data attributes: the page's state and counters."""
    return browser.evaluate("({...document.getElementById('app').dataset})") or {}


def counted(browser: Browser, name: str) -> int:
    """One of the page's counters (turns, announcements) as it is now."""
    return int(data(browser).get(name, "0"))


def one_more(browser: Browser, name: str, before: int, timeout: float = 60) -> bool:
    return bool(browser.wait_for(
        f"document.getElementById('app').dataset.{name} === '{before + 1}'", timeout))


def text(browser: Browser, selector: str) -> list[str]:
    return browser.evaluate(f"[...document.querySelectorAll({json.dumps(selector)})]"
                            ".map(e => e.textContent)") or []


def csp_violations(browser: Browser) -> list[str]:
    browser.evaluate("1")  # read the events sent meanwhile
    return [m for m in browser.console if "Content Security Policy" in m]


@pytest.fixture(scope="module")
def paired(browser: Browser, gateway: Gateway) -> Browser:
    address = link(gateway, "kitchen")
    assert address.startswith(f"{gateway.url}/#token=vqd_"), address
    browser.open(address)
    assert browser.wait_for("document.getElementById('app')?.dataset.state === 'ready'", 20), \
        data(browser)
    return browser


# -- the page's modules, in the page ------------------------------------------------------------
SPEAKING_ORDER_CASES = """
(async () => {
  const { inSpeakingOrder } = await import('/page/speaking-order.js');
  const bytes = (s) => new TextEncoder().encode(s);
  const chunk = (seq, attempt, offset, s) => ({event: {type: 'tts-chunk', data: {seq, idx: 0,
    attempt, offset, bytes: s.length}}, pcm: bytes(s)});
  const ev = (type, data) => ({event: {type, data}, pcm: null});
  const heard = (entries) => inSpeakingOrder(entries).map((c) => new TextDecoder().decode(c))
    .join('');
  return [
    heard([chunk(0, 1, 0, 'AAAA'), chunk(0, 2, 0, 'bbbb'), chunk(0, 2, 4, 'cccc'),
           ev('tts-end', {seq: 0}), ev('run-end', {status: 'ok'})]),
    heard([chunk(0, 1, 0, 'AAAA'), chunk(0, 2, 0, 'AA'), chunk(0, 2, 2, 'AAcccc'),
           ev('tts-end', {seq: 0})]),
    heard([chunk(0, 1, 0, 'AAAA'), chunk(0, 2, 0, 'AA'), chunk(0, 2, 2, 'Xccccc'),
           ev('tts-end', {seq: 0})]),
    heard([chunk(0, 1, 0, 'zero'), chunk(1, 1, 0, 'ONE-'), chunk(1, 2, 0, 'one!'),
           ev('tts-end', {seq: 1}), ev('tts-end', {seq: 0})]),
    heard([chunk(0, 2, 0, 'new-'), chunk(0, 1, 0, 'OLD-'), chunk(0, 2, 4, 'tail'),
           chunk(0, 1, 4, 'TAIL'), ev('tts-end', {seq: 0})]),
    heard([chunk(0, 1, 0, 'AAAA'), chunk(0, 2, 0, 'AA'), ev('run-end', {status: 'ok'})]),
    // a later sentence waits for the earlier one, and plays once it ends
    inSpeakingOrder([chunk(1, 1, 0, 'one'), chunk(0, 1, 0, 'zero')]).length,
  ];
})()
"""


def test_the_speaking_order_is_the_python_one_ported(browser, gateway):
    """The cases of tests/unit/test_playback.py, on the page's own module."""
    browser.open(f"{gateway.url}/")
    browser.wait_for("document.readyState === 'complete'", 10)
    assert browser.evaluate(SPEAKING_ORDER_CASES) == [
        "AAAA" + "bbbbcccc", "AAAAcccc", "AAAA" + "AAXccccc", "zero" + "one!", "new-tail",
        "AAAA", 1]


ENDPOINTING_CASES = """
(async () => {
  const { Command, listensAgain } = await import('/page/endpointing.js');
  const loud = new Int16Array(320).map((_, i) => (i % 20 < 10 ? 8000 : -8000));
  const quiet = new Int16Array(320);
  // frames of speech then silence; the decision and the seconds of silence it took
  const run = (speechS, partial, noSpeechS) => {
    const c = new Command(undefined, noSpeechS ? { noSpeechS } : {});
    for (let i = 0; i < 5; i++) if (c.feed(quiet)) return 'early';
    for (let i = 0; i < speechS / 0.02; i++) if (c.feed(loud)) return 'cut';
    if (partial) c.partial({ at_s: c.spokenUntil, ...partial });
    for (let i = 1; i < 400; i++) {
      const why = c.feed(quiet);
      if (why) return [why, Math.round(i * 20)];
    }
    return 'never';
  };
  const silent = new Command(undefined, { noSpeechS: 2 });
  let why = null, frames = 0;
  while (!why && frames < 500) { why = silent.feed(quiet); frames += 1; }
  const asked = { status: 'ok', interrupted: false, reply: 'Which room? ' };
  return [run(1.0), run(1.0, { complete: true }), run(1.0, { unfinished: true }),
          [why, frames * 20],
          [listensAgain(asked), listensAgain({ ...asked, reply: 'Done.' }),
           listensAgain({ ...asked, interrupted: true }),
           listensAgain({ ...asked, status: 'error' }), listensAgain(null)]];
})()
"""


def test_the_command_ends_as_the_edge_decides(browser, gateway):
    """Trailing silence 0.7 s; 0.25 s once the server heard a complete command; 1.2 s after
    words that stop mid-sentence; no speech at all: dropped; listening again (no press) only
    after a reply that asked a question, heard to its end."""
    browser.open(f"{gateway.url}/")
    browser.wait_for("document.readyState === 'complete'", 10)
    assert browser.evaluate(ENDPOINTING_CASES) == [
        ["ended", 700], ["understood", 260], ["ended", 1200], ["no-speech", 2000],
        [True, False, False, False, False]]


CAPTURE = """
(async () => {
  const { Microphone } = await import('/page/capture.js');
  const context = new AudioContext();
  await context.resume();
  const mic = new Microphone(context);
  const frames = [];
  mic.onFrame = (frame) => frames.push(frame);
  await mic.open();
  await new Promise((resolve) => setTimeout(resolve, 2500));
  mic.close();
  await context.close();
  const all = new Int16Array(frames.length * 320);
  frames.forEach((frame, i) => all.set(frame, i * 320));
  return [context.sampleRate, [...new Set(frames.map((f) => f.length))], Array.from(all)];
})()
"""


def test_the_microphone_reaches_the_page_as_it_was_recorded(browser, gateway):
    """The capture worklet brings the browser's rate down to 16 kHz without changing the voice
    (and the browser's own processing is off): the frames match the fake microphone's file."""
    browser.open(f"{gateway.url}/")
    browser.wait_for("document.readyState === 'complete'", 10)
    rate, sizes, samples = browser.evaluate(CAPTURE, gesture=True)
    got = np.array(samples, dtype=float)
    with wave.open(str(SPOKEN)) as w:
        ref = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(float)
    speech = ref[16000:32000]  # its first second of speech (after a second of silence)
    assert len(got) > len(speech) + 16000, len(got)
    scores = np.correlate(got, speech, mode="valid")
    lag = int(np.argmax(np.abs(scores)))
    heard = got[lag:lag + len(speech)]
    print(f"\ncontext at {rate} Hz; correlation {np.corrcoef(heard, speech)[0, 1]:.4f}, "
          f"gain {heard.std() / speech.std():.3f}")
    assert sizes == [320]
    assert np.corrcoef(heard, speech)[0, 1] > 0.99
    assert 0.9 < heard.std() / speech.std() < 1.1


# -- the device -------------------------------------------------------------------------------
def test_the_page_is_served_with_its_security_headers(gateway):
    page = httpx.get(f"{gateway.url}/")
    assert page.status_code == 200 and "<button id=\"talk\"" in page.text
    csp = page.headers["content-security-policy"]
    for rule in ("default-src 'none'", "script-src 'self'", "connect-src 'self'",
                 "frame-ancestors 'none'", "base-uri 'none'"):
        assert rule in csp, csp
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "microphone=(self)" in page.headers["permissions-policy"]
    assert httpx.get(f"{gateway.url}/page/app.js").headers["content-type"].startswith(
        "text/javascript")
    assert httpx.get(f"{gateway.url}/page/secrets.js").status_code == 404
    assert httpx.get(f"{gateway.url}/page/..%2Fapp.py").status_code == 404


def test_one_press_of_talk_brings_the_answer_seen_and_heard(paired, gateway, tmp_path):
    browser = paired
    # Paired by the link: the token kept, and out of the address bar.
    assert browser.evaluate("location.hash") == ""
    assert browser.evaluate("localStorage.getItem('voxqueue.token')").startswith("vqd_")
    assert text(browser, "#paired") == ["Paired as kitchen"]
    assert browser.evaluate("document.getElementById('talk').textContent") == "Talk"
    assert browser.evaluate("document.getElementById('insecure').hidden") is True  # localhost
    before = counted(browser, "turns")
    partials = counted(browser, "partialsShown")
    browser.evaluate("document.getElementById('talk').click()", gesture=True)
    assert browser.wait_for("document.getElementById('app').dataset.state === 'listening'", 10)
    # The reply, while it is heard: the page in the middle of a turn.
    speaking = browser.wait_for(
        "document.getElementById('app').dataset.state === 'speaking'", 60)
    shot = tmp_path / "browser-page.png"
    browser.screenshot(str(shot))
    if os.environ.get("VOXQUEUE_BROWSER_SCREENSHOT"):
        shutil.copy(shot, os.environ["VOXQUEUE_BROWSER_SCREENSHOT"])
    assert speaking, (data(browser), browser.console, gateway.log.read_text()[-3000:])
    assert one_more(browser, "turns", before), data(browser)
    state = data(browser)
    said = text(browser, ".turn .you")[0].lower()
    assert "time" in said, said
    # The words heard so far were shown while the command was spoken (a partial transcript).
    assert counted(browser, "partialsShown") > partials, state
    assert "time" in state["lastPartial"].lower(), state
    tools = text(browser, ".turn .tool")
    assert len(tools) == 1 and tools[0].startswith("get_current_time(") and "UTC" in tools[0]
    reply = text(browser, ".turn .reply")[0]
    assert reply.startswith("It's"), reply
    assert "total" in text(browser, ".turn .timings dt")
    # Its audio went through the page's player, all of it.
    played = int(state["samplesPlayed"])
    assert played == int(state["samplesScheduled"]) and played > 16000 * 0.5, state
    # The time from the end of speech to the first reply audio heard, by the page's clock.
    print(f"\nbrowser: end of speech -> first reply audio heard {state['speechToSoundMs']} ms; "
          f"end of the command sent ({state['endedBy']}) -> heard {state['endToSoundMs']} ms")
    timings = dict(zip(text(browser, ".turn .timings dt"), text(browser, ".turn .timings dd"),
                       strict=True))
    print(f"the turn's stages: {timings}; console: {browser.console}")
    assert int(state["speechToSoundMs"]) > int(state["endToSoundMs"]) > 0
    assert csp_violations(browser) == []


def test_a_typed_question(paired):
    browser = paired
    before = counted(browser, "turns")
    browser.evaluate("(() => { document.getElementById('question').value = "
                     "'what is 12 times 13'; document.getElementById('ask-form').requestSubmit(); "
                     "})()", gesture=True)
    assert one_more(browser, "turns", before), data(browser)
    assert text(browser, ".turn .you")[0] == "what is 12 times 13"
    assert "156" in text(browser, ".turn .reply")[0]
    assert text(browser, ".turn .tool")[0].startswith("calculate(")
    state = data(browser)
    assert int(state["samplesPlayed"]) == int(state["samplesScheduled"])


def test_a_timer_is_announced_shown_and_spoken(paired):
    browser = paired
    before = int(data(browser)["samplesPlayed"])
    announced = counted(browser, "announcements")
    browser.evaluate("(() => { document.getElementById('question').value = "
                     "'set a timer for 2 seconds'; "
                     "document.getElementById('ask-form').requestSubmit(); })()", gesture=True)
    assert one_more(browser, "announcements", announced), (data(browser), text(browser, "#log li"))
    shown = text(browser, ".announcement")
    assert len(shown) == announced + 1 and shown[0].startswith("Timer: "), shown
    assert int(data(browser)["samplesPlayed"]) > before
    assert csp_violations(browser) == []


def test_pressing_talk_while_it_answers_stops_the_reply_and_cancels_its_turn(paired, gateway,
                                                                             offline):
    """Barge-in, by the space bar: the audio stops at once, the turn is cancelled (unless all
    its audio was written already), and the page listens: the new question (the fake microphone
    plays its recording again) is answered."""
    browser = paired
    browser.evaluate("(() => { document.getElementById('question').value = "
                     "'tell me a story about dragons'; "
                     "document.getElementById('ask-form').requestSubmit(); })()", gesture=True)
    assert browser.wait_for("document.getElementById('app').dataset.state === 'speaking'", 60)
    turn_id = data(browser)["turnId"]
    browser.evaluate("document.activeElement?.blur()")
    browser.press(" ", "Space", 32)  # the space bar, as Talk
    assert browser.wait_for("document.getElementById('app').dataset.state === 'listening'", 5)
    assert browser.wait_for("document.querySelector('.turn .note')?.textContent", 5) == \
        "(interrupted)"
    wait_until(lambda: f'"POST /v1/turns/{turn_id}/cancel HTTP/1.1" 202' in
               gateway.log.read_text(), "the page's cancel")
    client = offline.client()
    ended = wait_until(lambda: client.redis.get(client.keys.ended(turn_id)), "the turn's end",
                       timeout=20)
    print(f"\nthe interrupted turn ended {ended.decode()}")
    stopped = data(browser)
    assert int(stopped["samplesPlayed"]) < int(stopped["samplesScheduled"]), stopped
    assert one_more(browser, "turns", int(stopped.get("turns", "0"))), data(browser)
    assert "time" in text(browser, ".turn .you")[0].lower()
    assert text(browser, ".turn .reply")[0].startswith("It's")
    # The stopped reply's rest was never played: only the new answer's audio was.
    after = data(browser)
    assert int(after["samplesScheduled"]) - int(after["samplesPlayed"]) == \
        int(stopped["samplesScheduled"]) - int(stopped["samplesPlayed"])


def test_a_violation_of_the_policy_would_be_seen(paired):
    """The check above can fail: a request to another origin is blocked, and reported."""
    blocked = paired.evaluate("fetch('http://127.0.0.2:9/').then(() => 'sent', () => 'blocked')")
    assert blocked == "blocked"
    deadline = time.monotonic() + 5
    while not csp_violations(paired) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("127.0.0.2" in m for m in csp_violations(paired)), paired.console
    paired.console.clear()


def test_the_websocket_takes_the_token_as_a_subprotocol_only(gateway):
    token = gateway.add("sockets")
    ws_url = gateway.url.replace("http", "ws", 1) + "/v1/turns/stream?rate=16000"
    offered = [Subprotocol("voxqueue.v1"), Subprotocol(f"voxqueue.token.{token}")]
    with connect(ws_url, subprotocols=offered) as ws:
        assert ws.subprotocol == "voxqueue.v1"
        ws.send(json.dumps({"type": "cancel"}))
    for refused in (["voxqueue.v1", "voxqueue.token.vqd_wrong"], ["voxqueue.v1"]):
        with pytest.raises(InvalidStatus) as no:
            connect(ws_url, subprotocols=[Subprotocol(p) for p in refused])
        assert no.value.response.status_code == 403
    with pytest.raises(InvalidStatus):  # never in the URL
        connect(f"{ws_url}&token={token}")
    who = httpx.get(f"{gateway.url}/v1/device", headers={"Authorization": f"Bearer {token}"})
    assert who.json() == {"v": 1, "device": "sockets"}
    assert httpx.get(f"{gateway.url}/v1/device",
                     headers={"Authorization": "Bearer vqd_wrong"}).status_code == 401


def test_a_revoked_token_shows_a_clear_message(paired, gateway):
    """Revoked while the page is open (its long poll is refused), after a reload, and a wrong
    token in a link."""
    browser = paired
    subprocess.run([*VOXQUEUE, "devices", "revoke", "kitchen"], env=gateway.env, cwd=ROOT,
                   capture_output=True, timeout=30, check=True)
    unpaired = "document.getElementById('app')?.dataset.state === 'unpaired'"
    for step in ("open", "reload", "wrong link"):
        if step == "reload":
            browser.evaluate("location.reload()")
            browser.wait_for("document.readyState === 'complete'", 10)
        elif step == "wrong link":
            browser.evaluate("document.getElementById('app').dataset.state = 'checked'; "
                             "location.hash = '#token=vqd_not-a-token'")
        assert browser.wait_for(unpaired, 20), (step, data(browser))
        message = text(browser, "#pairing-message")[0]
        assert "revoked" in message and "--link" in message, (step, message)
        assert text(browser, "#pairing-title") == ["Pair this page"]
        assert browser.evaluate("localStorage.getItem('voxqueue.token')") is None
    assert csp_violations(browser) == []



def test_over_tls_the_page_may_listen_and_its_socket_is_wss_to_itself(browser, offline,
                                                                      tmp_path_factory):
    """Behind the gateway's own TLS (a private CA's certificate, accepted by this browser as
    a phone accepts one), the page is a secure context (what gives it the microphone away from
    localhost) and its WebSocket goes to wss:// on its own origin, allowed by the CSP's 'self'."""
    import trustme

    where = tmp_path_factory.mktemp("tls-page")
    issued = trustme.CA().issue_cert("127.0.0.1")
    issued.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    issued.private_key_pem.write_to_path(str(where / "key.pem"))
    with running_gateway(offline, where, "--certfile", str(where / "cert.pem"),
                         "--keyfile", str(where / "key.pem")) as secure:
        token = secure.add("tls-page")
        browser.call("Security.setIgnoreCertificateErrors", ignore=True)
        browser.open(f"{secure.url}/#token={token}")
        assert browser.wait_for("document.getElementById('app')?.dataset.state === 'ready'", 20)
        assert browser.evaluate("window.isSecureContext") is True
        opened = browser.evaluate("""(async () => {
          const { Gateway } = await import('/page/gateway-api.js');
          const stream = new Gateway(localStorage.getItem('voxqueue.token')).stream('tls');
          await new Promise((resolve, reject) => {
            stream.socket.addEventListener('open', resolve);
            stream.socket.addEventListener('close', reject);
          });
          stream.socket.close();
          return [stream.socket.url, stream.socket.protocol];
        })()""")
    port = secure.url.rsplit(":", 1)[1]
    assert opened == [f"wss://127.0.0.1:{port}/v1/turns/stream?rate=16000&session=tls",
                      "voxqueue.v1"]
    assert csp_violations(browser) == []


def test_the_link_is_printed_with_its_qr_code_on_a_terminal(redis_server: RedisServer) -> None:
    """On a terminal, ``devices add --link`` prints the pairing link and the QR code of exactly
    that link (a phone's camera opens it); piped, the link alone."""
    import io
    import pty

    import segno

    url = redis_server.url.rsplit("/", 1)[0] + f"/{DB}"
    env = {**system_env(url, None), "COLUMNS": "200"}
    argv = [*VOXQUEUE, "devices", "add", "phone-qr", "--link", "--url", "https://voice.home.lan"]
    output = bytearray()

    def read(fd: int) -> bytes:
        data = os.read(fd, 65536)
        output.extend(data)
        return data

    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on the pty
        os.chdir(ROOT)
        os.execvpe(argv[0], argv, env)
    try:
        while True:
            try:
                if not read(fd):
                    break
            except OSError:  # the child closed the pty
                break
    finally:
        os.waitpid(pid, 0)
    printed = output.decode(errors="replace").replace("\r\n", "\n")
    address = printed.strip().splitlines()[0].strip()
    assert address.startswith("https://voice.home.lan/#token=vqd_"), printed
    qr = io.StringIO()
    segno.make(address, error="l").terminal(out=qr, compact=True)
    rows = [row for row in qr.getvalue().splitlines() if row.strip()]
    assert len(rows) > 10
    assert all(row.rstrip() in printed for row in rows), printed
    piped = subprocess.run([*argv[:5], "phone-piped", *argv[6:]], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=30, check=True)
    assert piped.stdout.strip().startswith("https://voice.home.lan/#token=vqd_")
    assert len(piped.stdout.strip().splitlines()) == 1  # no QR code into a pipe
