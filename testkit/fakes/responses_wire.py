"""The fake's OpenAI Responses wire (``POST /v1/responses``): a request's input items read as
chat messages (so ``script_chat`` scripts answer through either API), and a scripted answer
written as the typed SSE events OpenAI streams, in its order.

An answer's output items come in the order a model emits them: a reasoning item (when the
script has ``reasoning``: its summary text; the item carries ``encrypted_content`` when the
request's ``include`` asks for it), the
message (``content``), then one ``function_call`` item per scripted tool call.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def chat_view(body: Json) -> list[Json]:
    """The request's ``instructions`` and ``input`` as chat-completions messages: messages by
    role, ``function_call`` items as an assistant's ``tool_calls``, ``function_call_output``
    items as ``tool`` messages; reasoning items are left out."""
    out: list[Json] = []
    if isinstance(body.get("instructions"), str):
        out.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role"), "content": _text_of(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if out and out[-1].get("role") == "assistant" and "tool_calls" in out[-1]:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": _text_of(item.get("output"))})
    return out


#: Models the fake knows do not reason: OpenAI refuses encrypted reasoning for them.
NOT_REASONING = ("gpt-4o", "gpt-4.1", "gpt-3.5", "gpt-5-chat")
ENCRYPTED = "reasoning.encrypted_content"


def invalid(body: Json) -> str | None:
    """Why the API would refuse this request body (400), or None."""
    if not body.get("model") or not isinstance(body.get("input"), (str, list)):
        return "'model' and 'input' are required."
    if ENCRYPTED in (body.get("include") or []) and str(body["model"]).startswith(NOT_REASONING):
        return "Encrypted content is not supported with this model."
    for item in body["input"] if isinstance(body["input"], list) else []:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind not in ("message", "function_call", "function_call_output", "reasoning"):
            return f"Invalid input item: {str(item)[:80]}"
        if kind in ("function_call", "function_call_output") and not item.get("call_id"):
            return f"Missing required parameter: 'input[].call_id' ({kind})."
        if kind == "reasoning" and not (item.get("id") and "summary" in item):
            return "A reasoning item needs its 'id' and 'summary'."
    return None


def encrypted(summary: str) -> str:
    """The fake's ``encrypted_content`` of a reasoning item: opaque to the client, readable
    by tests (``decrypted``)."""
    return "enc_" + base64.urlsafe_b64encode(summary.encode()).decode()


def decrypted(content: str) -> str:
    return base64.urlsafe_b64decode(content.removeprefix("enc_").encode()).decode()


@dataclass
class Stream:
    """An answer's events; ``paced[i]``: whether event ``i`` costs a token's time."""

    events: list[Json] = field(default_factory=list)
    paced: list[bool] = field(default_factory=list)
    response: Json = field(default_factory=dict)

    def add(self, event: Json, paced: bool = False) -> None:
        self.events.append({**event, "sequence_number": len(self.events)})
        self.paced.append(paced)

    def frames(self) -> list[bytes]:
        return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in self.events]


def answer_stream(body: Json, content: str | None, calls: list[Json], words: list[str],
                  fragments: list[list[str]], reasoning: str | None) -> Stream:
    """The SSE events of one answer. ``calls``: chat-shaped tool calls (``id``, ``function``),
    their ``arguments`` streamed as ``fragments``; ``words``: the text's tokens."""
    s = Stream()
    base: Json = {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
        "status": "in_progress", "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "metadata": {}, "model": body["model"],
        "output": [], "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature", 1.0), "tool_choice": "auto",
        "tools": body.get("tools", []), "top_p": 1.0, "store": body.get("store", True),
        "usage": None,
    }
    s.add({"type": "response.created", "response": base})
    s.add({"type": "response.in_progress", "response": base})
    output: list[Json] = []

    def item_added(item: Json) -> int:
        index = len(output)
        s.add({"type": "response.output_item.added", "output_index": index, "item": item})
        return index

    def item_done(index: int, item: Json, paced: bool = False) -> None:
        output.append(item)
        s.add({"type": "response.output_item.done", "output_index": index, "item": item}, paced)

    if reasoning is not None:
        rs: Json = {"id": f"rs_{uuid.uuid4().hex}", "type": "reasoning", "summary": []}
        index = item_added(rs)
        summary = [{"type": "summary_text", "text": reasoning}] if reasoning else []
        if ENCRYPTED in (body.get("include") or []):
            rs_done = {**rs, "summary": summary, "encrypted_content": encrypted(reasoning)}
        else:
            rs_done = {**rs, "summary": summary}
        item_done(index, rs_done, paced=True)  # its tokens come before anything is said
    if content:
        msg_id = f"msg_{uuid.uuid4().hex}"
        msg: Json = {"id": msg_id, "type": "message", "status": "in_progress",
                     "role": "assistant", "content": []}
        index = item_added(msg)
        where = {"item_id": msg_id, "output_index": index, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        s.add({"type": "response.content_part.added", **where, "part": empty})
        for word in words:
            s.add({"type": "response.output_text.delta", **where, "delta": word,
                   "logprobs": []}, paced=True)
        s.add({"type": "response.output_text.done", **where, "text": content, "logprobs": []})
        part = {**empty, "text": content}
        s.add({"type": "response.content_part.done", **where, "part": part})
        item_done(index, {**msg, "status": "completed", "content": [part]})
    for call, frags in zip(calls, fragments, strict=True):
        fc_id = f"fc_{uuid.uuid4().hex}"
        fc: Json = {"id": fc_id, "type": "function_call", "status": "in_progress",
                    "arguments": "", "call_id": call["id"], "name": call["function"]["name"]}
        index = item_added(fc)
        where = {"item_id": fc_id, "output_index": index}
        for frag in frags:
            s.add({"type": "response.function_call_arguments.delta", **where, "delta": frag},
                  paced=True)
        arguments = call["function"]["arguments"]
        s.add({"type": "response.function_call_arguments.done", **where,
               "arguments": arguments})
        item_done(index, {**fc, "status": "completed", "arguments": arguments})
    p = max(1, len(json.dumps(body.get("input"))) // 4)
    r = len(reasoning.split()) if reasoning else 0
    n = len(words) + sum(len(f) for f in fragments) + r
    usage = {"input_tokens": p, "input_tokens_details": {"cached_tokens": 0,
                                                         "cache_write_tokens": 0},
             "output_tokens": n, "output_tokens_details": {"reasoning_tokens": r},
             "total_tokens": p + n}
    s.response = {**base, "status": "completed", "output": output, "usage": usage}
    s.add({"type": "response.completed", "response": s.response}, paced=True)
    return s
