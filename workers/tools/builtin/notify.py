"""Notifications to a phone or a chat: a JSON webhook and/or an ntfy topic.

Both URLs are the operator's and may carry credentials (a webhook's secret path, a topic's
user and password): the message is posted to them only, no redirect is followed.
"""

from __future__ import annotations

import base64
from typing import Any

from voxqueue.settings import Settings
from workers.tool_registry.context import runtime
from workers.tool_registry.net import FetchResult, RedirectRefusedError, host_of, safe_request
from workers.tool_registry.registry import tool

__all__ = ["send_notification"]


@tool(
    service="the notification service",
    side_effects=True,
    examples=(
        "send me a notification saying {message}",
        "notify me that {message}",
        "send a message saying {message}",
    ),
)
def send_notification(message: str, title: str = "") -> str:
    """Send a notification (to the configured webhook and/or ntfy topic).

    Args:
        message: The text of the notification.
        title: An optional short title.
    """
    text = message.strip()
    if not text:
        raise ValueError("the notification needs a message")
    s = runtime().settings
    if not s.tools.notify_webhook_url and not s.tools.ntfy_url:
        raise RuntimeError(
            "notifications are not configured: set VOXQUEUE_NOTIFY_WEBHOOK_URL "
            "(JSON webhook) or VOXQUEUE_NTFY_URL (an ntfy topic URL)"
        )
    if s.tools.notify_webhook_url:
        hook = _post(
            s.tools.notify_webhook_url,
            "VOXQUEUE_NOTIFY_WEBHOOK_URL",
            s,
            json_body={"title": title, "message": text, "text": text},
        )
        if not hook.ok:
            raise RuntimeError(f"the notification webhook answered HTTP {hook.status}")
    if s.tools.ntfy_url:
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        if title.strip():
            headers["Title"] = _header_text(title.strip())
        push = _post(s.tools.ntfy_url, "VOXQUEUE_NTFY_URL", s, content=text.encode(),
                     headers=headers)
        if not push.ok:
            raise RuntimeError(f"ntfy answered HTTP {push.status}")
    return "Notification sent."


def _post(url: str, setting: str, s: Settings, **kwargs: Any) -> FetchResult:
    """POST to the configured ``url`` only: a redirect is an error naming ``setting``."""
    try:
        return safe_request("POST", url, s, allow=[host_of(url)], follow_redirects=False, **kwargs)
    except RedirectRefusedError as exc:
        hint = f"set {setting} to the address it points to"
        raise RedirectRefusedError(exc.url, exc.status, exc.location, hint=hint) from None


def _header_text(value: str) -> str:
    """A header value as ASCII: RFC 2047 encoded-word when it has other characters (ntfy
    decodes it)."""
    if value.isascii():
        return value
    return "=?UTF-8?B?" + base64.b64encode(value.encode()).decode() + "?="
