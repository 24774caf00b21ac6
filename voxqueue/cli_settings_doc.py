"""docs/settings.md, rendered from the settings classes' own fields.

``python -m voxqueue.cli_settings_doc > docs/settings.md`` refreshes the page;
``tests/unit/test_settings_doc.py`` fails when it is out of step. A part of the settings is a
section of the page, with the attribute each variable sets. A field's description is its
``Field(description=...)`` or, failing that, the docstring under it; its section is the
``# -- title ---`` comment above it in its class. A secret's default is never printed, nor one
made at run time by a named function (the host's name, say).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from edge.settings import EdgeSettings
from voxqueue.settings import (
    AgentSettings,
    ClientSettings,
    DashboardSettings,
    GatewaySettings,
    MonitorSettings,
    ObservabilitySettings,
    ProviderSettings,
    RedisSettings,
    Settings,
    ToolSettings,
    TurnSettings,
    WyomingSettings,
)
from voxqueue.wyoming.guard import WyomingPolicy

COMMAND = "python -m voxqueue.cli_settings_doc > docs/settings.md"
#: Every settings class, each with the fields it declares itself, in the page's order.
CLASSES: tuple[tuple[type[BaseSettings], str], ...] = (
    (RedisSettings, "Redis"),
    (TurnSettings, "Turns: deadlines, lifetimes and sizes"),
    (ProviderSettings, "Providers: speech to text, the language model, text to speech"),
    (AgentSettings, "The agent"),
    (ToolSettings, "Tools"),
    (MonitorSettings, "Monitors"),
    (WyomingSettings, "Home Assistant's Wyoming protocol"),
    (WyomingPolicy, "What Wyoming clients' turns may do"),
    (GatewaySettings, "The gateway, and a device's way in"),
    (DashboardSettings, "The dashboard"),
    (ObservabilitySettings, "Traces and logs"),
    (EdgeSettings, "The edge device"),
)
#: Where a part of :class:`Settings` is: its attribute (``redis``), and whether a client's
#: process (the gateway, the edge) loads it too.
PARTS: dict[type[BaseSettings], str] = {
    field.annotation: name for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, BaseSettings)}
CLIENT_PARTS = frozenset(ClientSettings.model_fields)
_SECTION = re.compile(r"^\s*# -- (.+?) -*\s*$")
_BOUNDS = ((Gt, ">", "gt"), (Ge, "≥", "ge"), (Lt, "<", "lt"), (Le, "≤", "le"))

HEADER = f"""# Settings

<!-- Generated from the settings classes by `{COMMAND}`:
     edit the fields' docstrings, not this page. -->

Every setting is an environment variable (or a line of a `.env` file in the working
directory). The settings come in parts, one small class each (`voxqueue/settings.py`): the
workers and the command line load them all (`Settings`, `get_settings()`); the gateway and
a device's client load only Redis, the turns, the gateway, traces and logs
(`ClientSettings`); the edge adds its own (`EdgeSettings`), the Wyoming server its policy.
In code a setting is its part's attribute (`settings.redis.url` is `VOXQUEUE_REDIS_URL`), and
an override names its part: `Settings(redis=RedisSettings(url=...))`, or
`settings.replace(redis={{"url": ...}})` for a copy.

The providers' own variables are honoured as their SDKs document them: `OPENAI_API_KEY`,
`OPENAI_BASE_URL` and `ELEVENLABS_API_KEY`. Lists and mappings are JSON unless a description
says otherwise. Every worker and client must agree on
`VOXQUEUE_VISIBILITY_TIMEOUT` (see [crash consistency](crash-consistency.md#requirements)).
"""


@dataclass(frozen=True)
class Entry:
    """One field as the page shows it."""

    name: str
    annotation: str
    doc: str
    section: str


def _annotation(node: ast.expr) -> str:
    """The annotation as written, ``Annotated[X, ...]`` shown as ``X``."""
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id == "Annotated" and isinstance(node.slice, ast.Tuple)):
        node = node.slice.elts[0]
    return ast.unparse(node)


def declared(cls: type[BaseSettings]) -> list[Entry]:
    """The fields ``cls`` declares in its own body, in source order."""
    lines, _ = inspect.getsourcelines(cls)
    tree = ast.parse(textwrap.dedent("".join(lines))).body[0]
    assert isinstance(tree, ast.ClassDef)
    body, found, section = tree.body, [], ""
    for i, node in enumerate(body):
        start = (body[i - 1].end_lineno or 0) if i else 0
        for line in lines[start:node.lineno - 1]:
            if match := _SECTION.match(line):
                section = match.group(1)
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id in cls.model_fields):
            continue
        after = body[i + 1] if i + 1 < len(body) else None
        doc = ""
        if (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            doc = inspect.cleandoc(after.value.value)
        found.append(Entry(node.target.id, _annotation(node.annotation), doc, section))
    return found


def env_names(cls: type[BaseSettings], name: str, field: FieldInfo) -> list[str]:
    """The environment variables that set a field."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [choice for choice in alias.choices if isinstance(choice, str)]
    if isinstance(alias, str):
        return [alias]
    return [f"{cls.model_config.get('env_prefix', '')}{name}".upper()]


def every_name() -> set[str]:
    """Every environment variable of every settings class on the page."""
    return {name for cls, _ in CLASSES for field_name, field in cls.model_fields.items()
            for name in env_names(cls, field_name, field)}


def shown_default(field: FieldInfo) -> str:
    """A field's default as one would write it in the environment; a secret's is hidden."""
    factory = field.default_factory
    if factory is not None and getattr(factory, "__name__", "<lambda>") not in (
            "<lambda>", "list", "dict"):
        return f"made by `{factory.__name__}()`"
    value: Any = field.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        return "set (secret, not shown)"
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, dict | list):
        return code(json.dumps(value))
    return code(str(value))


def constraints(field: FieldInfo) -> str:
    """The field's bounds and pattern (``≥ 1``), if any."""
    found = []
    for meta in field.metadata:
        for kind, sign, attr in _BOUNDS:
            if isinstance(meta, kind):
                found.append(f"{sign} {getattr(meta, attr)}")
        if getattr(meta, "pattern", None):
            found.append(f"matching `{meta.pattern}`")
    return ", ".join(found)


def code(text: str) -> str:
    return f"`{text}`"


def cell(text: str) -> str:
    """Text fit for one cell of a markdown table (reStructuredText ````x```` becomes ```x```)."""
    return " ".join(text.replace("``", "`").replace("|", "\\|").split())


def render(classes: Sequence[tuple[type[BaseSettings], str]] = CLASSES) -> str:
    """The whole page: a section per class, a table per ``# --`` section of its fields."""
    out = [HEADER]
    for cls, title in classes:
        part = PARTS.get(cls)
        where = (f"`settings.{part}`" + (", also in `ClientSettings`" if part in CLIENT_PARTS
                                         else "")) if part else "loaded on its own"
        out += [f"## {title}", "", f"`{cls.__module__}.{cls.__name__}`: {where}"]
        section: str | None = None
        for entry in declared(cls):
            if entry.section != section:
                section = entry.section
                if section:
                    out.append(f"\n### {cell(section[0].upper() + section[1:])}")
                out += ["", "| variable | attribute | type | default | description |",
                        "|---|---|---|---|---|"]
            field = cls.model_fields[entry.name]
            attribute = code(f"{part}.{entry.name}" if part else entry.name)
            names = " or ".join(code(n) for n in env_names(cls, entry.name, field))
            kind = code(entry.annotation) + (f" ({limits})" if (limits := constraints(field))
                                             else "")
            out.append(f"| {names} | {attribute} | {cell(kind)} | {cell(shown_default(field))} | "
                       f"{cell(field.description or entry.doc)} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
