"""First audio through OpenAI's Chat Completions and Responses APIs, side by side on one system.

    .venv/bin/python -m bench.openai_apis             # 4 blocks of 8 turns per API and kind
    .venv/bin/python -m bench.openai_apis --quick     # 2 blocks of 4
    .venv/bin/python -m bench.openai_apis --wire      # and print what a tool turn sends
    .venv/bin/python -m bench.openai_apis --calls     # only CPU per model call (~20 s)

One system (a private Redis, the worker processes ``voxqueue up`` runs, the fake providers in
a process of their own with ``bench.latency``'s profile); its agent workers are restarted with
``VOXQUEUE_OPENAI_API`` set to one API, then the other, in alternating blocks, so both see the
same machine. Per API: first audio of a typed question answered at once, of one whose answer
first calls a tool, and the agent processes' CPU per turn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pydantic import SecretStr

from bench.harness import BenchSystem, bench_system, cpu_seconds
from bench.latency import PROFILE, REPLY, first_audio_ms
from testkit.fakes.provider_server import spawn
from voxqueue.settings import Settings
from voxqueue.settings_providers import ProviderSettings
from voxqueue.up.process_table import DEFAULT_PROCESSES
from workers.agent import messages as msg
from workers.agent.providers.openai_chat import OpenAIChat
from workers.agent.providers.openai_responses import OpenAIResponses, to_input, to_tools

if TYPE_CHECKING:
    from openai.types.responses import ResponseInputParam, ToolParam

APIS = ("chat", "responses")
TOOL_TURN = [{"match": "add", "tool_calls": [  # no preamble: first audio is after the tools
                 {"name": "add_numbers", "arguments": {"a": 20, "b": 22}},
                 {"name": "calculate", "arguments": {"expression": "6 * 7"}}]},
             {"after_tool": True, "content": REPLY}]


def use_api(system: BenchSystem, api: str) -> list[int]:
    """Restart every agent worker with ``VOXQUEUE_OPENAI_API=api``; their pids."""
    agents = [p for p in system.sup.procs if p.name.startswith("worker-agent")]
    for proc in agents:
        system.sup.stop(proc)
    started = [system.sup.start(p.name, p.argv, {"VOXQUEUE_OPENAI_API": api}) for p in agents]
    system.sup.wait_for_workers((), names=[p.name.removeprefix("worker-") for p in agents])
    return [p.popen.pid for p in started]


def block(system: BenchSystem, api: str, turns: int, tag: str) -> dict[str, list[float]]:
    """``turns`` plain and ``turns`` tool turns (after one of each to warm up)."""
    pids = use_api(system, api)
    out: dict[str, list[float]] = {"reply": [], "tool": [], "cpu": []}
    for i in range(turns + 1):
        system.fake.script_chat({"match": "weather", "content": REPLY})
        plain = system.client.ask("weather tomorrow", session=f"{tag}-p{i}")
        assert plain.wait(timeout=60).status == "ok"
        system.fake.script_chat(*TOOL_TURN)
        before = sum(cpu_seconds(pid) for pid in pids)
        tool = system.client.ask("add these", session=f"{tag}-t{i}")
        assert tool.wait(timeout=60).status == "ok"
        if i:
            out["reply"].append(first_audio_ms(plain))
            out["tool"].append(first_audio_ms(tool))
            out["cpu"].append((sum(cpu_seconds(pid) for pid in pids) - before) * 1000)
    return out


def wire(system: BenchSystem) -> dict[str, Any]:
    """What the second request of a tool turn holds, through each API."""
    shown: dict[str, Any] = {}
    for api in APIS:
        use_api(system, api)
        system.fake.reset()
        system.fake.script_chat(*TOOL_TURN)
        assert system.client.ask("add these", session=f"wire-{api}",
                                 speak=False).wait(timeout=60).status == "ok"
        route = "chat" if api == "chat" else "responses"
        body = system.fake.requests_for(route)[-1]["json"]
        shown[api] = body["messages" if api == "chat" else "input"][-5:]
    return shown


def cpu_per_call(rounds: int = 5, calls: int = 20) -> dict[str, float]:
    """CPU ms of one streamed model call (a two-sentence reply, twelve tools offered), median
    of ``rounds`` of ``calls``, the three ways taking turns."""
    proc, fake = spawn()
    try:
        settings = Settings(providers=ProviderSettings(
            openai_api_key=SecretStr("sk-bench"), openai_base_url=fake.openai_base_url,
            llm_model="o4-mini"))
        fake.script_chat({"content": REPLY, "repeat": True})
        history = [msg.system("You are a helpful voice assistant. " * 10), msg.user("weather")]
        tools = [{"type": "function", "function": {
            "name": f"tool_{i}", "description": "Does one thing. " * 5, "parameters": {
                "type": "object", "properties": {"a": {"type": "number"},
                                                 "b": {"type": "string"}}}}}
                 for i in range(12)]
        chat, responses = OpenAIChat(settings), OpenAIResponses(settings)

        def typed() -> None:
            with responses.client.responses.create(
                    model="o4-mini", input=cast("ResponseInputParam", to_input(history)),
                    tools=cast("list[ToolParam]", to_tools(tools)), stream=True, store=False,
                    include=["reasoning.encrypted_content"]) as events:
                for _event in events:
                    pass

        ways: dict[str, Callable[[], object]] = {
            "Chat Completions provider": lambda: chat.complete(
                history, tools, deadline=time.time() + 30),
            "Responses provider (events as JSON)": lambda: responses.complete(
                history, tools, deadline=time.time() + 30),
            "Responses through the SDK's typed client.responses.create": typed,
        }
        for way in ways.values():
            for _ in range(3):
                way()
        found: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, way in ways.items():
                start = time.process_time()
                for _ in range(calls):
                    way()
                found[name].append((time.process_time() - start) * 1000 / calls)
        return {name: statistics.median(v) for name, v in found.items()}
    finally:
        proc.terminate()
        proc.wait(10)


def print_calls(cpu: dict[str, float]) -> None:
    base = next(iter(cpu.values()))
    print("\n| one model call, CPU in the caller (median of 5 x 20) | ms | / chat |")
    print("|---|---|---|")
    for name, ms in cpu.items():
        print(f"| {name} | {ms:.2f} | {ms / base:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 blocks of 4 turns")
    parser.add_argument("--wire", action="store_true", help="print a tool turn's requests")
    parser.add_argument("--calls", action="store_true", help="only CPU per model call")
    args = parser.parse_args()
    if args.calls:
        print_calls(cpu_per_call())
        return
    blocks, turns = (2, 4) if args.quick else (4, 8)
    found: dict[str, dict[str, list[float]]] = {a: {"reply": [], "tool": [], "cpu": []}
                                                for a in APIS}
    print(f"fake profile: {PROFILE}")
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES) as system:
        for b in range(blocks):
            for api in APIS if b % 2 == 0 else APIS[::-1]:
                for kind, values in block(system, api, turns, f"{api}{b}").items():
                    found[api][kind] += values
        shown = wire(system) if args.wire else {}
    med = {a: {k: statistics.median(v) for k, v in found[a].items()} for a in APIS}
    n = len(found["chat"]["reply"])
    print()
    print(f"| {n} turns each, p50 | Chat Completions | Responses | responses / chat |")
    print("|---|---|---|---|")
    for kind, what in (("reply", "first audio, typed question answered at once"),
                       ("tool", "first audio, typed question answered after two tools"),
                       ("cpu", "agent processes' CPU per tool turn (two model calls)")):
        c, r = med["chat"][kind], med["responses"][kind]
        print(f"| {what} | {c:.0f} ms | {r:.0f} ms | {r / c:.3f} |")
    for api, items in shown.items():
        print(f"\n{api}: the last five items of a tool turn's second request")
        for item in items:
            print("  " + json.dumps(item))


if __name__ == "__main__":
    main()
