"""Home Assistant through its REST API: call a service, read an entity's state (only what
:mod:`workers.tools.builtin.home_allow` allows)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from voxqueue.settings import Settings
from workers.toolkit.context import runtime
from workers.toolkit.net import FetchResult, RedirectRefusedError, host_of, safe_request
from workers.toolkit.registry import tool
from workers.tools.builtin.home_allow import checked_targets, require_exposed

__all__ = ["home_assistant_call", "home_assistant_state"]

_HINT = "Home Assistant moved: set VOXQUEUE_HOME_ASSISTANT_URL to its new address"


def _configured(s: Settings) -> tuple[str, str]:
    token = s.tools.home_assistant_token.get_secret_value() if s.tools.home_assistant_token else ""
    if not s.tools.home_assistant_url or not token:
        raise RuntimeError(
            "Home Assistant is not configured: set VOXQUEUE_HOME_ASSISTANT_URL "
            "and VOXQUEUE_HOME_ASSISTANT_TOKEN (a long-lived access token)"
        )
    return s.tools.home_assistant_url.rstrip("/"), token


def _request(method: str, path: str, body: Any = None) -> FetchResult:
    s = runtime().settings
    base, token = _configured(s)
    try:  # the token and the body go to the configured URL only: no redirect is followed
        result = safe_request(
            method,
            f"{base}{path}",
            s,
            json_body=body,
            allow=[host_of(base)],
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            follow_redirects=False,
        )
    except RedirectRefusedError as exc:
        raise RedirectRefusedError(exc.url, exc.status, exc.location, hint=_HINT) from None
    if result.status == 401:
        raise PermissionError(
            "Home Assistant refused the token (check VOXQUEUE_HOME_ASSISTANT_TOKEN)"
        )
    return result


def _segment(value: str, what: str) -> str:
    cleaned = value.strip()
    if not cleaned or "/" in cleaned or cleaned in (".", ".."):
        raise ValueError(f"invalid {what} {value!r}")
    return quote(cleaned, safe="")


#: State attributes others can write (a song's title): left out of a service call's result,
#: which, unlike home_assistant_state, does not taint the turn.
_FREE_TEXT = frozenset({"media_title"})


def _describe(state: dict[str, Any], free_text: bool = True) -> str:
    attrs = state.get("attributes") or {}
    name = attrs.get("friendly_name") or state.get("entity_id", "it")
    value = state.get("state", "unknown")
    unit = attrs.get("unit_of_measurement")
    text = f"{name} is {value}{' ' + str(unit) if unit else ''}"
    shown = {
        k: attrs[k]
        for k in (
            "brightness",
            "temperature",
            "current_temperature",
            "hvac_action",
            "percentage",
            "volume_level",
            "media_title",
        )
        if attrs.get(k) is not None and (free_text or k not in _FREE_TEXT)
    }
    if shown:
        text += " (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items()) + ")"
    return text + "."


@tool(
    side_effects=True,
    examples=(
        "turn on the {entity_id}",
        "switch off the {entity_id}",
        "call {domain} {service} on {entity_id}",
    ),
)
def home_assistant_call(
    domain: str, service: str, entity_id: str = "", data: dict[str, Any] | None = None
) -> str:
    """Call a Home Assistant service, such as light.turn_on for light.kitchen.

    Args:
        domain: The service's domain, such as "light", "switch", "climate" or "script".
        service: The service, such as "turn_on", "turn_off", "toggle" or "set_temperature".
        entity_id: The target entity, such as "light.kitchen"; empty when the service needs none.
        data: More service data, such as {"brightness_pct": 50} or {"temperature": 21}.
    """
    targets = checked_targets(domain, service, entity_id, data, runtime().settings)
    body: dict[str, Any] = dict(data or {})
    if targets:
        body["entity_id"] = ", ".join(targets)
    path = f"/api/services/{_segment(domain, 'domain')}/{_segment(service, 'service')}"
    result = _request("POST", path, body)
    if result.status in (400, 404):
        raise ValueError(
            f"Home Assistant has no service {domain}.{service} "
            f"(HTTP {result.status}): {result.text()[:200]}"
        )
    if not result.ok:
        raise RuntimeError(f"Home Assistant answered HTTP {result.status}: {result.text()[:200]}")
    target = f" on {entity_id.strip()}" if entity_id.strip() else ""
    try:
        changed = json.loads(result.content) if result.content else []
    except ValueError:
        changed = []
    states = [_describe(c, free_text=False) for c in changed if isinstance(c, dict)][:5]
    return f"Done: {domain}.{service}{target}." + (" Now " + " ".join(states) if states else "")


@tool(
    examples=(
        "is the {entity_id} on",
        "what is the state of {entity_id}",
        "is the {entity_id} off",
    ),
    reads_untrusted=True,
)
def home_assistant_state(entity_id: str) -> str:
    """Read the current state of a Home Assistant entity, such as sensor.outside_temperature.

    Args:
        entity_id: The entity, such as "light.kitchen" or "sensor.living_room_temperature".
    """
    require_exposed(entity_id, runtime().settings)
    result = _request("GET", f"/api/states/{_segment(entity_id, 'entity id')}")
    if result.status == 404:
        raise ValueError(f"Home Assistant has no entity {entity_id!r}")
    if not result.ok:
        raise RuntimeError(f"Home Assistant answered HTTP {result.status}")
    try:
        state = result.json()
    except ValueError:
        raise RuntimeError("Home Assistant sent an answer that is not JSON") from None
    return _describe(state)
