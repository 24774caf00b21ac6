"""Every built-in tool, happy path and errors, against a real Redis and local HTTP fakes."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from testkit.fakes.http_services import FakeServices
from tests.unit.runtimes import installed
from voxqueue.settings import RedisSettings, Settings
from workers.runtime.resources import Runtime
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.context import ToolCall, owner, runtime, set_current_call, use_runtime
from workers.tool_registry.net import BlockedURLError, RedirectRefusedError
from workers.tool_registry.timer_store import TimerStore
from workers.tools.builtin import (
    chance,
    feeds,
    home,
    knowledge,
    math_tools,
    memory,
    notify,
    system,
    time_tools,
    timers,
    weather,
    web,
)
from workers.tools.executor import run_tool_call
from workers.wiring import runtime_for


@pytest.fixture(scope="module")
def services():
    with FakeServices() as fake:
        yield fake


def make_runtime(redis_url: str, services: FakeServices, **extra) -> Runtime:
    url = redis_url.rsplit("/", 1)[0] + "/3"  # DB 3: this suite's own
    return runtime_for(Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqt-{uuid.uuid4().hex[:8]}"),
        tools=services.settings(**{"timezone": "Europe/Paris", **extra})))


@pytest.fixture
def rt(redis_server, services):
    services.reset()
    with installed(make_runtime(redis_server.url, services)) as runtime_:
        yield runtime_


@contextmanager
def in_call(device: str | None = "kitchen", session: str = "s-1", name: str = "tool"):
    set_current_call(
        ToolCall(
            turn_id="t-1",
            session_id=session,
            device=device,
            call_id=f"c-{uuid.uuid4().hex[:6]}",
            name=name,
        )
    )
    try:
        yield
    finally:
        set_current_call(None)


def announcements(rt: Runtime, device: str) -> list[dict]:
    return [
        json.loads(fields[b"e"]) for _id, fields in rt.redis.xrange(rt.keys.announcements(device))
    ]


# -- the seam -----------------------------------------------------------------------------------
def test_use_runtime_and_owner(rt):
    assert runtime() is rt
    assert owner() == "local"
    with in_call(device="hall"):
        assert owner() == "device:hall"
    with in_call(device=None, session="sess-9"):
        assert owner() == "session:sess-9"


# -- time ---------------------------------------------------------------------------------------
def test_get_current_time(rt):
    tokyo = time_tools.get_current_time("Tokyo")
    # The model reads the zone and offset; the ear hears the time of day and the city.
    assert "Asia/Tokyo" in tokyo.data and "UTC+0900" in tokyo.data
    assert re.fullmatch(r"It's (?:\d{1,2}:\d\d|\d{1,2} o'clock) (?:in the (?:morning|afternoon|"
                        r"evening)|at night) in Tokyo\.|It's (?:noon|midnight) in Tokyo\.",
                        tokyo.say), tokyo.say
    here = time_tools.get_current_time("")  # the configured zone, not named when spoken
    assert "Europe/Paris" in here.data and "Paris" not in here.say
    with pytest.raises(ValueError, match="unknown timezone"):
        time_tools.get_current_time("Atlantis")


def test_convert_time(rt):
    assert (
        time_tools.convert_time("15:00", "UTC", "Tokyo")
        == "15:00 in UTC is 00:00 the next day in Asia/Tokyo."
    )
    assert (
        time_tools.convert_time("3 pm", "Asia/Tokyo", "UTC")
        == "15:00 in Asia/Tokyo is 06:00 in UTC."
    )
    with pytest.raises(ValueError, match="could not understand the time"):
        time_tools.convert_time("teatime", "UTC", "Tokyo")


def test_days_until(rt):
    today = datetime.now(ZoneInfo("Europe/Paris")).date()
    assert time_tools.days_until("tomorrow").startswith("There is 1 day until")
    target = today + timedelta(days=40)
    assert time_tools.days_until(target.isoformat()).startswith("There are 40 days until")
    assert time_tools.days_until(today.isoformat()).endswith("is today.")
    with pytest.raises(ValueError, match="could not understand the date"):
        time_tools.days_until("someday")


# -- maths --------------------------------------------------------------------------------------
def test_convert_units():
    assert math_tools.convert_units(10, "km", "miles") == "10 km is 6.214 miles."
    assert (
        math_tools.convert_units(100, "celsius", "fahrenheit") == "100 celsius is 212 fahrenheit."
    )
    assert (
        math_tools.convert_units(60, "miles per hour", "km/h") == "60 miles per hour is 96.56 km/h."
    )
    assert math_tools.convert_units(1, "cup", "ml") == "1 cup is 236.6 ml."
    with pytest.raises(ValueError, match="cannot convert kg to meters"):
        math_tools.convert_units(1, "kg", "meters")
    with pytest.raises(ValueError, match="unknown unit 'blorps'"):
        math_tools.convert_units(1, "blorps", "m")


def test_calculate_still_works():
    assert math_tools.calculate("12 * 13") == "12 times 13 is 156."
    assert math_tools.calculate("2 ** 10 - 24 / 2") == (
        "2 to the power of 10 minus 24 divided by 2 is 1012.")


# -- timers and reminders ------------------------------------------------------------------------
def test_set_list_and_cancel_timers(rt):
    with in_call(device="kitchen"):
        first = timers.set_timer("five minutes", "pasta")
        assert first.data.startswith("Pasta timer set for 5 minutes (id ")  # to cancel it by
        assert first.say == "Pasta timer set for 5 minutes."
        assert timers.set_timer("90 seconds").say == "Timer set for 1 minute 30 seconds."
        listed = timers.list_timers()
        assert listed.startswith("You have 2:")
        assert (
            "the pasta timer with 4 minutes" in listed or "the pasta timer with 5 minutes" in listed
        )
        assert "the 1 minute 30 seconds timer" in listed
        with pytest.raises(ValueError, match="several timers"):
            timers.cancel_timer("")
        assert timers.cancel_timer("the pasta timer") == "Cancelled the pasta timer."
        assert timers.cancel_timer("90 seconds") == "Cancelled the 1 minute 30 seconds timer."
        assert timers.list_timers() == "You have no timers or reminders."
        assert timers.cancel_timer("pasta") == "There is no timer or reminder to cancel."
    with in_call(device="hall"):  # another device sees none of the kitchen's timers
        assert timers.list_timers() == "You have no timers or reminders."


def test_timer_errors(rt):
    with in_call():
        with pytest.raises(ValueError, match="could not understand the duration"):
            timers.set_timer("a while")
        timers.set_timer("1 minute", "tea")
        with pytest.raises(ValueError, match="no timer or reminder matches 'eggs'"):
            timers.cancel_timer("eggs")
        assert timers.cancel_timer("all") == "Cancelled the tea timer."


def test_reminder(rt):
    with in_call(device="kitchen"):
        reply = timers.set_reminder("in 10 minutes", "to call mum")
        said = reply.say
        assert "(id " in reply.data and "id" not in said.split()
        # (After 23:50 the reminder is due after midnight: "... tomorrow at 00:05".)
        assert said.startswith(("I will remind you to call mum at ",
                                "I will remind you to call mum tomorrow at "))
        assert "the reminder to call mum" in timers.list_timers()
        assert timers.cancel_timer("reminder to call mum") == "Cancelled the reminder to call mum."
        with pytest.raises(ValueError, match="in the past"):
            timers.set_reminder("2001-01-01 10:00", "party")
        with pytest.raises(ValueError, match="what to be reminded"):
            timers.set_reminder("in 5 minutes", " ")


def test_timer_fires_once_on_the_device_that_asked(rt):
    with in_call(device="kitchen"):
        timers.set_timer("5 minutes", "pasta")
        timers.set_reminder("in 10 minutes", "call mum")
    store = TimerStore(rt.redis, rt.keys)
    assert store.fire_due(now=time.time() + 60) == []
    fired = store.fire_due(now=time.time() + 301)
    assert [i.label for i in fired] == ["pasta"]
    assert store.fire_due(now=time.time() + 301) == []
    store.fire_due(now=time.time() + 601)
    events = announcements(rt, "kitchen")
    assert [(e["type"], e["kind"], e["text"]) for e in events] == [
        ("announcement", "timer", "Your pasta timer is done."),
        ("announcement", "reminder", "Reminder: call mum."),
    ]
    assert all(e["v"] == 1 and e["ts"] > 0 and e["device"] == "kitchen" for e in events)
    with in_call(device="kitchen"):
        assert timers.list_timers() == "You have no timers or reminders."


def test_without_a_device_the_session_hears_it(rt):
    with in_call(device=None, session="sess-42"):
        timers.set_timer("1 second")
    TimerStore(rt.redis, rt.keys).fire_due(now=time.time() + 2)
    said = rt.redis.xrange(rt.keys.session_announcements("sess-42"))
    assert [json.loads(f[b"e"])["text"] for _id, f in said] == ["Your 1 second timer is done."]
    assert announcements(rt, "sess-42") == []  # not a device that shares the session's name


def test_two_sweepers_fire_each_timer_exactly_once(rt):
    store = TimerStore(rt.redis, rt.keys)
    past = time.time() - 1
    for i in range(300):
        store.new("timer", f"dev{i % 3}", f"t{i}", f"timer {i}", past + i / 1000)
    fired: list[list[str]] = [[], []]
    start = threading.Barrier(2)
    cap = 175  # neither sweeper may fire them all (a thread can run alone for a long while)

    def sweep(slot: int) -> None:
        mine = TimerStore(runtime_for(rt.settings).redis, rt.keys)
        start.wait()
        while len(fired[slot]) < cap:
            got = mine.fire_due(limit=min(7, cap - len(fired[slot])))
            if not got:
                return  # none due: the other sweeper took the rest
            fired[slot].extend(i.id for i in got)

    threads = [threading.Thread(target=sweep, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = fired[0] + fired[1]
    assert len(ids) == 300 and len(set(ids)) == 300
    assert fired[0] and fired[1], "both sweepers should have claimed some"
    texts = [e["text"] for d in range(3) for e in announcements(rt, f"dev{d}")]
    assert sorted(texts) == sorted(f"timer {i}" for i in range(300))
    assert rt.redis.zcard(rt.keys.timers_due()) == 0
    assert rt.redis.hlen(rt.keys.timer_items()) == 0


def test_cancel_loses_to_a_fired_timer(rt):
    with in_call():
        timers.set_timer("1 second", "egg")
        store = TimerStore(rt.redis, rt.keys)
        (item,) = store.pending("device:kitchen")
        store.fire_due(now=time.time() + 2)
        assert store.cancel(item) is False


# -- memory -------------------------------------------------------------------------------------
def test_remember_recall_forget(rt):
    with in_call(device="kitchen"):
        assert (
            memory.remember("that my car is on level 3")
            == "OK, I'll remember that my car is on level 3."
        )
        memory.remember("Anna's birthday is on June 5")
        assert (
            memory.remember("my car is on level 3") == "I already know that my car is on level 3."
        )
        assert memory.recall("where is my car") == "You told me: my car is on level 3."
        assert memory.recall("Anna birthday") == "You told me: Anna's birthday is on June 5."
        assert memory.recall("the weather") == "I don't remember anything about the weather."
        assert memory.recall("").startswith("You told me: ")
        assert memory.forget("the car") == "Forgot: my car is on level 3."
        assert memory.recall("car") == "I don't remember anything about car."
        assert memory.forget("bicycles") == "I had nothing about bicycles to forget."
    with in_call(device="hall"):  # per device
        assert memory.recall("Anna") == "I don't remember anything about Anna."
    with in_call(device="kitchen"):
        assert memory.forget("everything") == "I forgot everything (1 fact)."
        assert memory.recall("") == "I have nothing remembered yet."
        with pytest.raises(ValueError):
            memory.remember("   ")
        with pytest.raises(ValueError):
            memory.forget("")


def test_memory_is_per_session_without_a_device(rt):
    with in_call(device=None, session="s-a"):
        memory.remember("the code is 1234")
    with in_call(device=None, session="s-b"):
        assert memory.recall("code") == "I don't remember anything about code."
    with in_call(device=None, session="s-a"):
        assert memory.recall("code") == "You told me: the code is 1234."


# -- weather ------------------------------------------------------------------------------------
def test_get_weather(rt, services):
    said = weather.get_weather("Paris")
    assert said == (
        "In Paris, France it is 18 degrees and partly cloudy, feeling like "
        "17 degrees, wind 13 km/h and humidity 61%."
    )
    (geo,) = services.requests_to("/geo/")
    assert geo["query"]["name"] == "Paris"
    (forecast,) = services.requests_to("/meteo/")
    assert forecast["query"]["latitude"] == "48.85341"
    assert "temperature_2m" in forecast["query"]["current"]


def test_get_forecast(rt, services):
    said = weather.get_forecast("Springfield, Missouri", 3)
    assert said.startswith(
        "Forecast for Springfield, United States: today clear sky, "
        "11 to 20 degrees, 0% chance of rain; tomorrow light rain"
    )
    assert said.count(";") == 2
    (forecast,) = services.requests_to("/meteo/")
    assert forecast["query"]["latitude"] == "37.21533"  # Missouri, not Illinois
    assert forecast["query"]["forecast_days"] == "3"


def test_weather_errors(rt, redis_server, services):
    with pytest.raises(ValueError, match="could not find a place called 'Atlantis'"):
        weather.get_weather("Atlantis")
    with pytest.raises(ValueError, match="between 1 and 16"):
        weather.get_forecast("Paris", 30)
    broken = make_runtime(
        redis_server.url, services, weather_forecast_url=f"{services.url}/web/missing"
    )
    with use_runtime(broken), pytest.raises(RuntimeError, match="HTTP 404"):
        weather.get_weather("Paris")


# -- knowledge ----------------------------------------------------------------------------------
def test_wikipedia_summary(rt, services):
    assert knowledge.wikipedia_summary("Ada Lovelace").startswith(
        "Augusta Ada King, Countess of Lovelace, was an English mathematician"
    )
    assert services.requests_to("/wiki/")[0]["path"] == "/wiki/page/summary/Ada_Lovelace"
    assert knowledge.wikipedia_summary("Mercury").startswith("Mercury can mean several things")
    assert (
        knowledge.wikipedia_summary("Zzyzx Nowhere")
        == "Wikipedia has no article called Zzyzx Nowhere."
    )
    long = knowledge.wikipedia_summary("Long Article")
    assert len(long) <= knowledge.MAX_SUMMARY_CHARS and long.endswith(".")


def test_wikipedia_title_cannot_leave_the_summary_path(rt, services):
    knowledge.wikipedia_summary("../../admin")
    assert services.requests_to("/wiki/")[-1]["raw_path"] == "/wiki/page/summary/..%2F..%2Fadmin"


# -- web ----------------------------------------------------------------------------------------
def test_fetch_url_html(rt, services):
    text = web.fetch_url(f"{services.url}/web/page.html")
    assert text.splitlines()[0] == "Test Page"
    assert "Hello reader" in text and "The first paragraph & more." in text
    assert "Second bold paragraph." in text
    assert "secret" not in text and "color" not in text and "enable js" not in text


def test_fetch_url_text_json_and_errors(rt, services):
    assert web.fetch_url(f"{services.url}/web/notes.txt") == "plain notes\nline two"
    assert json.loads(web.fetch_url(f"{services.url}/web/data.json")) == {"answer": 42}
    with pytest.raises(ValueError, match="image/png"):
        web.fetch_url(f"{services.url}/web/image.png")
    with pytest.raises(RuntimeError, match="HTTP 404"):
        web.fetch_url(f"{services.url}/web/missing")


def test_fetch_url_is_capped(redis_server, services):
    with use_runtime(make_runtime(redis_server.url, services, fetch_max_bytes=100_000)):
        big = web.fetch_url(f"{services.url}/web/big.txt")
    assert big.startswith("x" * 1000)
    assert big.endswith("[the page is larger than 100000 bytes; only its start was read]")


def test_fetch_url_refuses_private_addresses(redis_server, services):
    strict = make_runtime(redis_server.url, services, url_allowlist="")
    with use_runtime(strict):
        for url in (
            f"{services.url}/web/notes.txt",
            "http://169.254.169.254/latest/",
            "http://10.0.0.1/",
            "file:///etc/passwd",
        ):
            with pytest.raises((BlockedURLError, ValueError)):
                web.fetch_url(url)


# -- feeds --------------------------------------------------------------------------------------
def test_news_headlines(rt, services):
    assert feeds.news_headlines("test") == (
        "Headlines from Test News: 1. Markets rally & bonds slip. 2. Local team wins the cup. "
        "3. Rain expected all week."
    )
    assert feeds.news_headlines("", 1) == "Headlines from Test News: 1. Markets rally & bonds slip."
    assert feeds.news_headlines(f"{services.url}/feeds/atom.xml") == (
        "Headlines from Atom Times: 1. First atom story. 2. Second atom story."
    )


def test_news_errors(rt, services, redis_server):
    with pytest.raises(ValueError, match="no feed named 'sport'; configured feeds: test, atom"):
        feeds.news_headlines("sport")
    with pytest.raises(ValueError, match="not a readable RSS or Atom feed"):
        feeds.news_headlines(f"{services.url}/feeds/broken.xml")
    with pytest.raises(ValueError, match="between 1 and 20"):
        feeds.news_headlines("test", 50)
    strict = make_runtime(redis_server.url, services, url_allowlist="")
    with use_runtime(strict):
        # A configured feed is trusted; the same host given by the model is not.
        assert feeds.news_headlines("test").startswith("Headlines from Test News")
        with pytest.raises(BlockedURLError):
            feeds.news_headlines(f"{services.url}/feeds/rss.xml")


# -- home assistant -----------------------------------------------------------------------------
def test_home_assistant(rt, services):
    assert home.home_assistant_state("light.kitchen") == "Kitchen Light is off."
    assert (
        home.home_assistant_state("sensor.outside_temperature") == "Outside Temperature is 12.5 °C."
    )
    said = home.home_assistant_call("light", "turn_on", "light.kitchen", {"brightness": 200})
    assert said == "Done: light.turn_on on light.kitchen. Now Kitchen Light is on (brightness 200)."
    call = services.requests_to("/ha/api/services")[0]
    assert call["headers"]["Authorization"] == "Bearer ha-test-token"
    assert json.loads(call["body"]) == {"brightness": 200, "entity_id": "light.kitchen"}
    assert home.home_assistant_state("light.kitchen").startswith("Kitchen Light is on")


def test_home_assistant_errors(rt, redis_server, services):
    with pytest.raises(ValueError, match=r"no entity 'light\.garage'"):
        home.home_assistant_state("light.garage")
    with pytest.raises(PermissionError, match=r"vacuum\.explode is not allowed"):
        home.home_assistant_call("vacuum", "explode", "vacuum.robot")
    everything = make_runtime(
        redis_server.url, services, ha_allowed_services="*", ha_exposed_entities="*"
    )
    with use_runtime(everything):
        with pytest.raises(ValueError, match=r"no service vacuum\.explode"):
            home.home_assistant_call("vacuum", "explode", "vacuum.robot")
        with pytest.raises(ValueError, match="invalid domain"):
            home.home_assistant_call("../admin", "x")
    bad_token = make_runtime(redis_server.url, services, home_assistant_token="wrong")
    with use_runtime(bad_token), pytest.raises(PermissionError, match="refused the token"):
        home.home_assistant_state("light.kitchen")
    unset = make_runtime(redis_server.url, services, home_assistant_url="")
    with use_runtime(unset), pytest.raises(RuntimeError, match="VOXQUEUE_HOME_ASSISTANT_URL"):
        home.home_assistant_state("light.kitchen")


@pytest.mark.parametrize("where", ["another origin", "the same origin"])
def test_home_assistant_does_not_follow_a_redirect(redis_server, services, where):
    """The token and the body go to the configured URL only; a 3xx is an error to act on."""
    with FakeServices() as other:
        target = other if where == "another origin" else services
        services.reset()
        moved = make_runtime(
            redis_server.url, services, home_assistant_url=f"{services.url}/moved/{target.port}/ha"
        )
        with use_runtime(moved):
            with pytest.raises(RedirectRefusedError, match="VOXQUEUE_HOME_ASSISTANT_URL"):
                home.home_assistant_call("light", "turn_on", "light.kitchen")
            with pytest.raises(ConnectionError, match="HTTP 307"):
                home.home_assistant_state("light.kitchen")
        assert other.requests == []
        assert services.requests_to("/ha/") == []
        assert len(services.requests_to("/moved/")) == 2


# -- notify -------------------------------------------------------------------------------------
def test_send_notification(rt, services):
    assert notify.send_notification("Dinner is ready", "Kitchen") == "Notification sent."
    (hook,) = services.requests_to("/hook")
    assert json.loads(hook["body"]) == {
        "title": "Kitchen",
        "message": "Dinner is ready",
        "text": "Dinner is ready",
    }
    (push,) = services.requests_to("/ntfy/")
    assert push["path"] == "/ntfy/voxqueue-test"
    assert push["body"] == "Dinner is ready" and push["headers"]["Title"] == "Kitchen"
    notify.send_notification("Café", "Crème brûlée")
    assert services.requests_to("/ntfy/")[-1]["headers"]["Title"].startswith("=?UTF-8?B?")


def test_notification_errors(rt, redis_server, services):
    with pytest.raises(ValueError, match="needs a message"):
        notify.send_notification("  ")
    unset = make_runtime(redis_server.url, services, notify_webhook_url="", ntfy_url="")
    with use_runtime(unset), pytest.raises(RuntimeError, match="VOXQUEUE_NOTIFY_WEBHOOK_URL"):
        notify.send_notification("hello")
    failing = make_runtime(
        redis_server.url, services, ntfy_url="", notify_webhook_url=f"{services.url}/web/missing"
    )
    with use_runtime(failing), pytest.raises(RuntimeError, match=r"HTTP (404|405)"):
        notify.send_notification("hello")


def test_notifications_do_not_follow_a_redirect(redis_server, services):
    with FakeServices() as other:
        for setting, name in (("notify_webhook_url", "hook"), ("ntfy_url", "ntfy/topic")):
            urls = {"notify_webhook_url": "", "ntfy_url": ""}
            urls[setting] = f"{services.url}/moved/{other.port}/{name}"
            wanted = f"VOXQUEUE_{setting.upper()}"
            with (
                use_runtime(make_runtime(redis_server.url, services, **urls)),
                pytest.raises(RedirectRefusedError, match=wanted),
            ):
                notify.send_notification("the door is open")
        assert other.requests == []


# -- system -------------------------------------------------------------------------------------
def test_system_status(rt):
    rt.redis.rpush("tools", b"job-1", b"job-2")
    rt.redis.rpush("tts\x06\x163", b"job-3")
    rt.redis.zadd(rt.keys.active_turns(), {"t-live": time.time() + 30})
    rt.redis.set(rt.keys.ended("t-done"), b"ok")
    rt.redis.xadd(
        rt.keys.events("t-done"),
        {
            "e": json.dumps(
                {
                    "v": 1,
                    "type": "run-end",
                    "turn_id": "t-done",
                    "ts": 1.0,
                    "data": {"status": "ok", "ms": 1234.5},
                }
            )
        },
    )
    try:
        said = system.system_status()
    finally:
        rt.redis.delete("tools", "tts\x06\x163")
    assert "Waiting in queues: stt 0, agent 0, tools 2, tts 1, monitor 0." in said
    assert "Workers: stt 0, agent 0, tools 0, tts 0, monitor 0." in said  # none on this DB
    assert "1 turn in progress." in said
    assert "Recent turns (1) took 1.2 s median, 1.2 s at most." in said


def test_system_status_counts_only_the_callers_timers(rt):
    """Another device's timers are none of this one's business (#44)."""
    store = TimerStore(rt.redis, rt.keys)
    store.new("timer", "device:hall", "tea", "Tea.", time.time() + 600, 600)
    assert "0 of your timers or reminders pending." in system.system_status()
    store.new("timer", owner(), "eggs", "Eggs.", time.time() + 600, 600)
    assert "1 of your timer or reminder pending." in system.system_status()


def test_system_status_prefers_recorded_latencies(rt):
    rt.redis.lpush(rt.keys.recent_turn_ms(), 800, 1200, 3000)
    assert system.recent_turn_ms(rt) == [3000.0, 1200.0, 800.0]


# -- small things -------------------------------------------------------------------------------
def test_chance():
    for _ in range(50):
        value = int(chance.roll_dice(6).removeprefix("You rolled a ").rstrip("."))
        assert 1 <= value <= 6
    many = chance.roll_dice(20, 3)
    rolls, total = many.removeprefix("You rolled ").rstrip(".").split(": ")
    assert sum(int(r) for r in rolls.split(", ")) == int(total.split()[0])
    assert chance.flip_coin() in ("It's heads.", "It's tails.")
    assert chance.random_number(5, 5) == "I picked 5."
    assert chance.random_number(10, 1) in {f"I picked {n}." for n in range(1, 11)}
    with pytest.raises(ValueError):
        chance.roll_dice(1)
    with pytest.raises(ValueError):
        chance.roll_dice(6, 100)


# -- through the executor, as a worker runs them -----------------------------------------------
def test_tools_through_the_executor(rt, services):
    registry = assemble_tools(rt.settings)
    call = ToolCall(turn_id="t-9", session_id="s-9", device="den", call_id="c-1", name="set_timer")
    done = run_tool_call(
        registry,
        call,
        json.dumps({"duration": "2 minutes", "label": "tea"}),
        timeout_s=10,
        max_chars=4000,
    )
    assert done.ok and done.content.startswith("Tea timer set for 2 minutes")
    assert rt.redis.zcard(rt.keys.owner_timers("device:den")) == 1
    failed = run_tool_call(
        registry,
        ToolCall("t-9", "s-9", "den", "c-2", "get_weather"),
        json.dumps({"location": "Atlantis"}),
        timeout_s=10,
        max_chars=4000,
    )
    assert not failed.ok
    assert failed.content.startswith("Error: get_weather failed: ValueError: I could not find")
