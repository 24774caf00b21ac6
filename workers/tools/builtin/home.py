"""Home Assistant through its REST API: call a service, read an entity's state (only what is
allowed, below).

What the assistant may do in Home Assistant: services in ``VOXQUEUE_HA_ALLOWED_SERVICES``
on entities matching ``VOXQUEUE_HA_EXPOSED_ENTITIES`` (like Home Assistant's "exposed
entities"; locks, alarms and covers are not in the defaults). Refusals are PermissionErrors,
which reach the model as tool errors before any request is made.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from voxqueue.settings import Settings
from workers.tool_registry.context import runtime
from workers.tool_registry.net import FetchResult, RedirectRefusedError, host_of, safe_request
from workers.tool_registry.policy import matches_any, split_list
from workers.tool_registry.registry import tool

#: Service data keys that pick targets: a target is given as ``entity_id``, and checked.
TARGET_KEYS = frozenset({"entity_id", "device_id", "area_id", "floor_id", "label_id"})


def require_exposed(entity_id: str, s: Settings) -> None:
    """Refuse an entity that ``VOXQUEUE_HA_EXPOSED_ENTITIES`` does not expose."""
    if not matches_any(entity_id, split_list(s.tools.ha_exposed_entities)):
        raise PermissionError(
            f"{entity_id.strip()!r} is not exposed to the assistant "
            "(VOXQUEUE_HA_EXPOSED_ENTITIES); tell the person it cannot be reached")


def require_allowed_service(domain: str, service: str, s: Settings) -> None:
    """Refuse a service that ``VOXQUEUE_HA_ALLOWED_SERVICES`` does not list."""
    name = f"{domain.strip()}.{service.strip()}"
    if not matches_any(name, split_list(s.tools.ha_allowed_services)):
        raise PermissionError(
            f"the service {name} is not allowed for the assistant "
            "(VOXQUEUE_HA_ALLOWED_SERVICES); tell the person it cannot do that")


def checked_targets(domain: str, service: str, entity_id: str, data: dict[str, Any] | None,
                    s: Settings) -> list[str]:
    """The call's target entities, once the service and each target are allowed; targets
    hidden in ``data`` (entity, device, area, floor, label) are refused."""
    require_allowed_service(domain, service, s)
    hidden = sorted(TARGET_KEYS & set(data or {}))
    if hidden:
        raise PermissionError(f"give the target as entity_id, not in data ({', '.join(hidden)})")
    targets = [e.strip() for e in entity_id.split(",") if e.strip()]
    for target in targets:
        require_exposed(target, s)
    return targets


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
    service="Home Assistant",
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
    service="Home Assistant",
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
