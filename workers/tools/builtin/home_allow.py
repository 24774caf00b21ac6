"""What the assistant may do in Home Assistant: services in ``VOXQUEUE_HA_ALLOWED_SERVICES``
on entities matching ``VOXQUEUE_HA_EXPOSED_ENTITIES`` (like Home Assistant's "exposed
entities"; locks, alarms and covers are not in the defaults). Refusals are PermissionErrors,
which reach the model as tool errors before any request is made."""

from __future__ import annotations

from typing import Any

from voxqueue.settings import Settings
from workers.toolkit.policy import matches_any, split_list

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
