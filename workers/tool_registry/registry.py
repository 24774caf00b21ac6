"""The tool model: plain typed functions whose name, docstring and type hints become an OpenAI tool,
and the registry of a worker's tools by name (assembled in ``workers.tool_registry.assembly``).

The function's parameters become a pydantic model; its JSON schema is the tool's ``parameters``
and it validates the model's arguments before the call. A tool may answer in two forms
(:class:`ToolReply`): the data the model reads, and a sentence for the ear.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

_OPTIONS = "__voxqueue_tool__"


@dataclass(frozen=True)
class ToolOptions:
    name: str | None = None
    timeout_s: float | None = None
    side_effects: bool = False
    examples: tuple[str, ...] = ()
    response: str | None = None
    reads_untrusted: bool = False
    idempotent: bool = False
    service: str | None = None


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         timeout_s: float | None = None, side_effects: bool = False,
         examples: Iterable[str] = (), response: str | None = None,
         reads_untrusted: bool = False, idempotent: bool = False,
         service: str | None = None) -> Any:
    """Optional decorator: set a tool's name, timeout, side-effect flag and example sentences.

    ``examples`` are hassil sentence templates whose ``{slots}`` are argument names, used by the
    local intent matcher; ``response`` is the template it answers with (``{result}`` and the
    arguments). ``reads_untrusted`` marks a tool whose result carries text others wrote (web
    pages, feeds, remote state): once it returns, the turn is tainted and side effects wait for
    the person's spoken yes. ``idempotent`` marks a side-effecting tool that does its effect
    at most once per ``current_call().idempotency_key`` (by itself, or through a service that
    accepts such a key): after a crash it is run again with the same key, so its effect
    happens once; any other side-effecting tool runs at most once, and the model is told when
    it may or may not have run. ``service`` is what a person calls what the tool reaches
    ("the weather service"), for the sentence said when it cannot be reached. A plain function
    is a tool without this decorator.
    """
    options = ToolOptions(name, timeout_s, side_effects, tuple(examples), response,
                          reads_untrusted, idempotent, service)

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, _OPTIONS, options)
        return f

    return mark(fn) if fn is not None else mark


@dataclass
class Tool:
    """A callable the model can ask for, with its argument model and options."""

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    timeout_s: float | None = None
    side_effects: bool = False
    examples: tuple[str, ...] = ()
    response: str | None = None
    reads_untrusted: bool = False
    """Its result carries text others wrote: it taints the turn (see workers.tools.guard)."""
    idempotent: bool = False
    """Its effect happens once per call's idempotency key: run again after a crash."""
    service: str | None = None
    """What a person calls the service it reaches ("the weather service"), if any."""
    schema: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        self.schema = {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": params}}

    @classmethod
    def from_function(cls, fn: Callable[..., Any]) -> Tool:
        """Build a tool from a typed function (every parameter must have a type hint)."""
        options: ToolOptions = getattr(fn, _OPTIONS, ToolOptions())
        name = options.name or fn.__name__
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        described = {p.arg_name: p.description for p in doc.params}
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {name}: *args/**kwargs are not supported")
            if pname not in hints:
                raise TypeError(f"tool {name}: parameter {pname!r} needs a type hint")
            default = ... if param.default is inspect.Parameter.empty else param.default
            text = described.get(pname)
            fields[pname] = (hints[pname], Field(default, description=text) if text else default)
        model = create_model(
            f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
        description = " ".join(
            part for part in (doc.short_description, doc.long_description) if part
        ) or name.replace("_", " ")
        return cls(name=name, description=description, fn=fn, args_model=model,
                   timeout_s=options.timeout_s, side_effects=options.side_effects,
                   examples=options.examples, response=options.response,
                   reads_untrusted=options.reads_untrusted, idempotent=options.idempotent,
                   service=options.service)


class ToolRegistry:
    """The tools a worker offers, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        t = item if isinstance(item, Tool) else Tool.from_function(item)
        if not t.name.replace("_", "").replace("-", "").isalnum() or len(t.name) > 64:
            raise ValueError(f"invalid tool name {t.name!r}: letters, digits, _ and - only")
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [self._tools[n].schema for n in self.names]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Any:
        return iter(self._tools[n] for n in self.names)

    def load_module(self, module_name: str) -> list[Tool]:
        """Register a module's tools: the callables in ``__all__``, else its public functions."""
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        if exported is not None:
            candidates = [getattr(module, n) for n in exported]
        else:
            candidates = [obj for n, obj in vars(module).items() if not n.startswith("_")
                          and inspect.isfunction(obj) and obj.__module__ == module.__name__]
        return [self.add(fn) for fn in candidates if callable(fn)]


@dataclass(frozen=True)
class ToolReply:
    """Return this from a tool whose result is not what a person would say.

    ``data`` is what the model sees in the ``role: tool`` message (ids, zones and units kept,
    e.g. to cancel a timer later); ``say`` is one short sentence for a listener ("Timer set for
    10 minutes."), which the offline agent speaks as is. A model writes its own reply from
    ``data``.
    """

    data: Any
    say: str
