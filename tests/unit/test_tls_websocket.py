"""``voxqueue.tls_websocket``: websockets' threaded client with one thread at a time in its TLS
session. Against a real TLS 1.3 server that sends session tickets (the fake providers, with a
trustme CA), and, for the one-thread property itself, a session that notices two threads."""

from __future__ import annotations

import base64
import json
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from pydantic import SecretStr
from websockets.exceptions import ConnectionClosed

from testkit.fakes import FakeProviders
from testkit.fakes.provider_server import spoken_pcm
from tests.conftest import SPEECH
from voxqueue.audio import read_speech
from voxqueue.settings import ProviderSettings, Settings
from voxqueue.tls_websocket import SerializedTLSConnection, SerializedTLSSocket, connect


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    assert context.num_tickets > 0  # TLS 1.3 tickets after the handshake: the race's trigger
    return context


@pytest.fixture
def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
def fake(server_context: ssl.SSLContext) -> Iterator[FakeProviders]:
    with FakeProviders(ssl_context=server_context) as server:
        yield server


# -- the property: one thread at a time in the session ------------------------------------------

class WatchedSession:
    """Stands in for an ``SSLSocket`` over one end of a socket pair: notes how many threads are
    inside ``recv``/``send`` at once, and wants a read when nothing is there, as TLS does."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.inside, self.most_inside = sock, 0, 0
        self._count = threading.Lock()

    def _enter(self) -> None:
        with self._count:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)

    def _leave(self) -> None:
        with self._count:
            self.inside -= 1

    def setblocking(self, flag: bool) -> None:
        self.sock.setblocking(flag)

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, size: int) -> bytes:
        self._enter()
        try:
            time.sleep(0.0002)  # long enough for another thread to come in, if it may
            return self.sock.recv(size)
        except BlockingIOError:
            raise ssl.SSLWantReadError() from None
        finally:
            self._leave()

    def send(self, data: memoryview) -> int:
        self._enter()
        try:
            time.sleep(0.0002)
            return self.sock.send(data)
        except BlockingIOError:
            raise ssl.SSLWantWriteError() from None
        finally:
            self._leave()


def exchange(sendall: Callable[[bytes], None], recv: Callable[[int], bytes], *,
             writers: int = 2, each: int = 150, size: int = 700) -> int:
    """Writers send while a reader reads what an echoing peer sends back: the bytes read."""
    total = writers * each * size
    got = 0

    def read() -> None:
        nonlocal got
        while got < total:
            try:
                got += len(recv(65536))
            except (BlockingIOError, ssl.SSLWantReadError):
                time.sleep(0.0001)

    def write() -> None:
        for _ in range(each):
            sendall(b"x" * size)

    threads = [threading.Thread(target=read)] + [threading.Thread(target=write)
                                                 for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return got


@pytest.fixture
def echoing_pair() -> Iterator[socket.socket]:
    ours, theirs = socket.socketpair()

    def echo() -> None:
        while data := theirs.recv(65536):
            theirs.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    yield ours
    ours.close()
    theirs.close()


def test_reads_and_writes_from_several_threads_enter_the_session_one_at_a_time(
        echoing_pair: socket.socket) -> None:
    session = WatchedSession(echoing_pair)
    serialized = SerializedTLSSocket(session)  # type: ignore[arg-type]
    assert exchange(serialized.sendall, serialized.recv) == 2 * 150 * 700
    assert session.most_inside == 1


def test_the_watch_sees_two_threads_in_an_unserialized_session(
        echoing_pair: socket.socket) -> None:
    """The control: the same threads straight on the session do overlap."""
    session = WatchedSession(echoing_pair)
    session.setblocking(False)

    def sendall(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[session.send(view):]
            except ssl.SSLWantWriteError:
                time.sleep(0.0001)

    exchange(sendall, session.recv)
    assert session.most_inside >= 2


# -- over real TLS 1.3, with tickets ------------------------------------------------------------

def stream_url(fake: FakeProviders) -> str:
    return (fake.elevenlabs_base_url.replace("https", "wss", 1)
            + "/v1/text-to-speech/v1/stream-input?output_format=pcm_16000")


def refused_opening(url: str, context: ssl.SSLContext) -> tuple[str, int | None]:
    """One connection whose opening the voice refuses: its error and close code."""
    with connect(url, ssl=context, open_timeout=10,
                 additional_headers={"xi-api-key": "el-test"}) as ws:
        assert isinstance(ws.socket, SerializedTLSSocket)
        ws.send(json.dumps({"text": "Hello"}))  # not the opening " ": refused
        answer = json.loads(ws.recv(timeout=10))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    return answer["error"], closed.value.rcvd.code if closed.value.rcvd else None


def test_hundreds_of_connections_each_get_their_answer(
        fake: FakeProviders, client_context: ssl.SSLContext) -> None:
    """A refused opening, over and over: the workload on which websockets' own client hung in
    ``connect`` (10 in 3,000 here, docs/benchmarks.md). Each connection has 20 s: a hang fails
    the test at once, and leaves its thread behind."""
    url = stream_url(fake)
    for n in range(500):
        ended: list[tuple[str, int | None] | BaseException] = []

        def run() -> None:
            try:
                ended.append(refused_opening(url, client_context))
            except BaseException as exc:
                ended.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(20)
        assert ended, f"connection {n} hung"
        assert ended[0] == ("invalid_message", 1008), f"connection {n}: {ended[0]!r}"


def test_text_goes_out_while_the_audio_comes_in(
        fake: FakeProviders, client_context: ssl.SSLContext) -> None:
    texts = [f"Sentence number {n} of a long answer. " for n in range(12)]
    with connect(stream_url(fake), ssl=client_context, open_timeout=10,
                 additional_headers={"xi-api-key": "el-test"}) as ws:
        ws.send(json.dumps({"text": " ", "generation_config": {"chunk_length_schedule": [50]}}))
        audio = []

        def read() -> None:
            try:
                while True:
                    audio.append(json.loads(ws.recv(timeout=10)))
            except ConnectionClosed:
                pass

        reader = threading.Thread(target=read)
        reader.start()
        for text in texts:
            ws.send(json.dumps({"text": text, "flush": True}))
        ws.send(json.dumps({"text": ""}))
        reader.join(30)
    (record,) = fake.requests_for("tts-input")
    pcm = b"".join(base64.b64decode(m["audio"]) for m in audio if m.get("audio"))
    assert audio[-1] == {"isFinal": True}
    assert len(pcm) == sum(len(spoken_pcm(t)) for t in record["spoken"]) > 0
    assert " ".join(record["spoken"]).split() == "".join(texts).split()


# -- waits: a closed socket wakes its reader; a writer's wait has its timeout ---------------------

@pytest.fixture
def silent_tls_peer(server_context: ssl.SSLContext,
                    client_context: ssl.SSLContext) -> Iterator[ssl.SSLSocket]:
    """A TLS connection whose server never reads nor writes after the handshake."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[ssl.SSLSocket] = []

    def accept() -> None:
        conn, _ = listener.accept()
        accepted.append(server_context.wrap_socket(conn, server_side=True))

    thread = threading.Thread(target=accept)
    thread.start()
    client = client_context.wrap_socket(socket.create_connection(listener.getsockname()),
                                        server_hostname="127.0.0.1")
    thread.join(10)
    yield client
    for sock in (client, *accepted, listener):
        sock.close()


def test_closing_the_socket_wakes_a_reader_waiting_for_data(
        silent_tls_peer: ssl.SSLSocket) -> None:
    serialized = SerializedTLSSocket(silent_tls_peer)
    ended: list[BaseException] = []

    def read() -> None:
        try:
            serialized.recv(4096)
        except OSError as exc:
            ended.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    assert reader.is_alive(), "nothing was sent: the reader waits"
    serialized.close()
    reader.join(5)
    assert not reader.is_alive() and len(ended) == 1


def test_a_write_to_a_peer_that_never_reads_times_out(silent_tls_peer: ssl.SSLSocket) -> None:
    serialized = SerializedTLSSocket(silent_tls_peer)
    serialized.settimeout(0.5)
    raised: list[BaseException] = []

    def write() -> None:
        try:
            serialized.sendall(b"x" * 64 * 1024 * 1024)  # more than the kernel's buffers hold
        except BaseException as exc:
            raised.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(30)  # a deadline, not a speed: without the timeout it would block for ever
    assert not writer.is_alive(), "the write never timed out"
    assert len(raised) == 1 and isinstance(raised[0], TimeoutError), raised


# -- the Realtime speech-to-text session through the OpenAI SDK, over TLS -----------------------

def test_the_realtime_transcription_session_runs_on_the_serialized_connection(
        fake: FakeProviders, ca: trustme.CA, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from workers.stt.providers.openai_stt import OpenAITranscriber

    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))  # the SDK's socket trusts the default store
    fake.script_transcripts("what time is it")
    settings = Settings(
        providers=ProviderSettings(openai_api_key=SecretStr("sk-test"),
                                   openai_base_url=fake.openai_base_url,
                                   openai_stt_transport="realtime"))
    hearing = OpenAITranscriber(settings).hear(deadline=math.inf)
    assert hearing is not None
    try:
        assert isinstance(hearing._conn._connection, SerializedTLSConnection)
        speech = read_speech(SPEECH / "command_time.wav", max_bytes=10**8, max_seconds=60).data
        for at in range(0, len(speech), 640):
            hearing.feed(speech[at:at + 640])
        transcript = hearing.finish()
    finally:
        hearing.close()
    assert transcript.text == "what time is it"
    (session,) = fake.requests_for("realtime")
    assert session["commits"] >= 1 and session["audio_bytes"] > 0
