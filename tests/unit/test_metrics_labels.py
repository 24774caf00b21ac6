"""The exporter's ``tool`` label takes known tool names only: any other name counts as "other"."""

from __future__ import annotations

import time
import uuid

from voxqueue.contracts import TurnSpec
from voxqueue.observability.metrics import OTHER_TOOL, Exporter, TurnMetrics
from voxqueue.settings import RedisSettings, Settings, ToolSettings
from workers.tool_registry.listing import offered_tool_names


def tool_series(metrics: TurnMetrics) -> dict[str, float]:
    """tool label -> observed count of ``voxqueue_tool_seconds``."""
    found: dict[str, float] = {}
    for family in metrics.registry.collect():
        if family.name != "voxqueue_tool_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_count"):
                tool = sample.labels["tool"]
                found[tool] = found.get(tool, 0) + sample.value
    return found


def new_turn(store, names: list[object]) -> str:
    turn_id = uuid.uuid4().hex
    now = time.time()
    store.create(TurnSpec(turn_id=turn_id, session_id="metrics-labels", input="text", text="hi",
                          created_at=now, deadline=now + 30))
    for i, name in enumerate(names):
        store.emit(turn_id, "tool-end", {"call_id": f"c{i}", "name": name, "ok": True, "ms": 5})
    store.emit(turn_id, "run-end", {"status": "ok"})
    return turn_id


def test_names_a_client_makes_up_are_counted_as_other(redis_server):
    settings = Settings(
        redis=RedisSettings(url=redis_server.url.rsplit("/", 1)[0] + "/5",
                            key_prefix=f"vqm-{uuid.uuid4().hex[:8]}"))
    exporter = Exporter(settings, tool_names={"get_weather", "add_numbers"})
    made_up: list[object] = [f"evil-{i}-{uuid.uuid4().hex}" for i in range(50)]
    made_up += ["", None, 42, "x" * 5000, 'get_weather"} 1\n# injected']
    exporter.observe(new_turn(exporter.store, ["get_weather", *made_up, "add_numbers"]))
    try:
        assert tool_series(exporter.metrics) == {
            "get_weather": 1, "add_numbers": 1, OTHER_TOOL: len(made_up)}
    finally:
        keys = list(exporter.redis.scan_iter(match=f"{settings.redis.key_prefix}:*"))
        if keys:
            exporter.redis.delete(*keys)
        exporter.redis.close()


def test_by_default_the_exporter_knows_what_the_workers_offer(redis_server):
    settings = Settings(
        redis=RedisSettings(url=redis_server.url),
        tools=ToolSettings(modules="testkit.probe_tools", deny="roll_dice"))
    exporter = Exporter(settings)
    try:
        known = exporter.metrics.tool_names
        assert {"get_weather", "set_timer", "add_numbers"} <= known  # built-ins and a module
        assert "roll_dice" not in known
        assert exporter.metrics.tool_label("add_numbers") == "add_numbers"
        assert exporter.metrics.tool_label("roll_dice") == OTHER_TOOL
    finally:
        exporter.redis.close()


def test_offered_tool_names_follow_allow_and_deny():
    allowed = Settings(tools=ToolSettings(allow="get_weather, my_mcp_tool", deny="my_mcp_tool"))
    assert offered_tool_names(allowed) == {"get_weather"}
    broken = offered_tool_names(Settings(tools=ToolSettings(modules="no_such_tool_module")))
    assert "get_weather" in broken  # a module that does not load: its tools are unknown
