"""The URL allow-set after untrusted text (issue #44, H2): its pure rules, and the tools that
apply it (fetch_url, feeds, monitors, MCP arguments) against a real Redis and the local HTTP
fakes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from testkit.fakes.http_services import FakeServices
from tests.unit.runtimes import installed
from voxqueue.contracts import ToolOutcome, TurnSpec
from voxqueue.sessions import Sessions
from voxqueue.settings import RedisSettings, Settings
from workers.monitor.monitors import MonitorStore
from workers.monitor.tools import create_monitor
from workers.runtime.resources import Runtime
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.context import ToolCall, set_current_call
from workers.tool_registry.egress import (
    MAX_LINKS_PER_PAGE,
    Egress,
    EgressRefused,
    canonical,
    check_model_url,
    check_model_urls,
    links_on_page,
    urls_said,
)
from workers.tool_registry.taint import taint_writes
from workers.tools.executor import run_tool_call
from workers.wiring import runtime_for

DB = 14


# -- the pure rules ----------------------------------------------------------------------------
@pytest.mark.parametrize(("a", "b"), [
    ("https://Example.com/a", "http://example.com/a/"),
    ("https://www.example.com", "https://example.com/"),
    ("https://example.com:443/a?q=1#top", "https://example.com/a?q=1"),
    ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x/"),
])
def test_forms_that_send_the_same_request_are_one(a, b):
    assert canonical(a) == canonical(b) is not None


@pytest.mark.parametrize(("a", "b"), [
    ("https://example.com/a?q=1", "https://example.com/a?q=2"),
    ("https://example.com/a?q=1", "https://example.com/a?q=1&d=secret"),
    ("https://example.com/a", "https://example.com/a?d=secret"),
    ("https://example.com/a", "https://example.com/a/secret"),
    ("https://example.com/a", "https://secret@example.com/a"),
    ("https://example.com/a", "https://example.com:8443/a"),
    ("https://example.com/a", "https://secret.example.com/a"),
])
def test_anything_that_could_carry_data_differs(a, b):
    assert canonical(a) != canonical(b)


def test_only_http_urls_with_a_host_have_a_form():
    assert canonical("file:///etc/passwd") is None
    assert canonical("mailto:ann@example.com") is None
    assert canonical("not a url") is None


def test_urls_the_person_said():
    said = ("read https://News.Example.org/today?x=1, then example dot com and "
            "127.0.0.1:8080/notes. Also www.bbc.co.uk/news/ please; my email is ann@evil.com")
    assert urls_said(said) == {"news.example.org/today?x=1", "example.com/",
                               "127.0.0.1:8080/notes", "bbc.co.uk/news"}
    assert urls_said("what's the weather like") == set()


def test_links_on_a_page_resolve_against_it_and_keep_their_query():
    html = ('<a href="next?p=2">next</a> <a href="https://other.org/a#part">other</a>'
            '<a href="mailto:x@y.org">mail</a> <link href="/feed.xml"> Menu: http://m.org/x).')
    assert links_on_page(html, "http://site.org/dir/page", html=True) == [
        "site.org/dir/next?p=2", "other.org/a", "site.org/feed.xml", "m.org/x"]
    assert links_on_page('<base href="/b/"><a href="c">c</a>', "http://s.org/x",
                         html=True) == ["s.org/b/c"]
    assert links_on_page("see https://a.org/1 and https://a.org/2.", "http://s.org/",
                         html=False) == ["a.org/1", "a.org/2"]


def test_a_page_gives_at_most_its_first_links():
    html = "".join(f'<a href="/c?d={i}">{i}</a>' for i in range(MAX_LINKS_PER_PAGE + 50))
    links = links_on_page(html, "http://s.org/", html=True)
    assert len(links) == MAX_LINKS_PER_PAGE and links[-1] == f"s.org/c?d={MAX_LINKS_PER_PAGE - 1}"


def test_the_allow_set_admits_exact_urls_only():
    egress = Egress(True, frozenset({"site.org/menu?lang=en", "example.com/"}))
    assert egress.admits("https://site.org/menu?lang=en")
    assert egress.admits("http://www.example.com")
    for refused in ("https://site.org/menu?lang=en&d=9931", "https://site.org/menu?lang=fr",
                    "https://site.org/menu", "https://site.org/menu/9931?lang=en",
                    "https://example.com/?d=9931", "https://example.com/collect",
                    "https://9931@example.com/", "not a url"):
        assert not egress.admits(refused), refused


# -- against Redis -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def services() -> Iterator[FakeServices]:
    with FakeServices() as fake:
        yield fake


@pytest.fixture
def rt(redis_server, services) -> Iterator[Runtime]:
    url = redis_server.url.rsplit("/", 1)[0] + f"/{DB}"
    runtime_ = runtime_for(Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqe-{uuid.uuid4().hex[:8]}"),
        tools=services.settings()))
    with installed(runtime_):
        yield runtime_


def new_turn(rt: Runtime, session: str, text: str) -> TurnSpec:
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=session, input="text", text=text,
                    created_at=now, deadline=now + 30, speak=False)
    rt.store.create(spec)
    rt.redis.rpush(rt.keys.messages(session), json.dumps({"role": "user", "content": text}))
    return spec


def run(rt: Runtime, spec: TurnSpec, name: str, args: dict) -> ToolOutcome:
    call = ToolCall(turn_id=spec.turn_id, session_id=spec.session_id, device=None,
                    call_id=f"c-{uuid.uuid4().hex[:6]}", name=name)
    return run_tool_call(assemble_tools(rt.settings, mcp=False), call, json.dumps(args),
                         timeout_s=5, max_chars=4000)


def taint(rt: Runtime, spec: TurnSpec) -> None:
    for command in taint_writes(rt.keys, rt.settings, spec.turn_id, spec.session_id, "test"):
        rt.redis.execute_command(*command)


def test_fetch_url_follows_page_links_but_sends_nothing_new(rt, services):
    services.pages["p"] = ('<a href="/web/notes.txt?lang=en">notes</a> Data: '
                           f"{services.url}/web/data.json")
    spec = new_turn(rt, "s-links", f"read {services.url}/web/p/p")
    assert run(rt, spec, "fetch_url", {"url": f"{services.url}/web/p/p"}).ok
    assert rt.redis.ttl(rt.keys.session_links("s-links")) > 0
    assert run(rt, spec, "fetch_url", {"url": f"{services.url}/web/notes.txt?lang=en"}).ok
    assert run(rt, spec, "fetch_url", {"url": f"{services.url}/web/data.json"}).ok
    services.reset()
    for url in (f"{services.url}/web/collect?d=9931", f"{services.url}/web/notes.txt?lang=9931",
                f"{services.url}/web/data.json?d=9931"):
        refused = run(rt, spec, "fetch_url", {"url": url})
        assert not refused.ok and "EgressRefused" in refused.content, refused
    feed = run(rt, spec, "news_headlines", {"feed_url_or_name": f"{services.url}/feeds/rss.xml"})
    assert not feed.ok and "EgressRefused" in feed.content
    assert services.requests == []  # refused before any connection

    later = new_turn(rt, "s-links", "and the notes again")  # the session keeps its links
    assert run(rt, later, "fetch_url", {"url": f"{services.url}/web/notes.txt?lang=en"}).ok
    Sessions(rt.redis, rt.keys, rt.settings).clear("s-links")
    assert not rt.redis.exists(rt.keys.session_links("s-links"))


def test_before_untrusted_text_the_named_host_rule_holds(rt, services):
    spec = new_turn(rt, "s-named", f"read {services.url}/web/notes.txt")
    set_current_call(ToolCall(spec.turn_id, "s-named", None, "c1", "fetch_url",
                              utterance=f"read {services.url}"))
    try:
        check_model_url(f"{services.url}/web/data.json?any=thing", rt.settings)
        with pytest.raises(PermissionError, match="was not named by the person"):
            check_model_url("https://elsewhere.example/", rt.settings)
        taint(rt, spec)  # from now on, exact URLs only
        with pytest.raises(EgressRefused, match="not sent"):
            check_model_url(f"{services.url}/web/data.json?any=thing", rt.settings)
        check_model_url(f"{services.url}/web/notes.txt", rt.settings)  # said in the history
    finally:
        set_current_call(None)


def test_a_monitor_and_an_mcp_argument_carry_no_data_after_untrusted_text(rt):
    spec = new_turn(rt, "s-mon", "watch https://status.example.org/health for me")
    taint(rt, spec)
    set_current_call(ToolCall(spec.turn_id, "s-mon", None, "c1", "create_monitor"))
    try:
        with pytest.raises(EgressRefused):
            create_monitor(kind="http", target="https://status.example.org/health?d=9931")
        check_model_urls({"url": "https://status.example.org/health", "n": 3})
        with pytest.raises(EgressRefused):
            check_model_urls({"options": {"urls": ["https://evil.example/c?d=9931"]}})
        check_model_urls({"query": "the safe code is 9931"})  # no URL: not this rule's
    finally:
        set_current_call(None)
    assert MonitorStore(rt.redis, rt.keys).count() == 0
