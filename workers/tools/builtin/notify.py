"""Notifications to a phone or a chat: a JSON webhook and/or an ntfy topic."""

from __future__ import annotations

import base64

from workers.tools.builtin._deps import runtime
from workers.tools.net import host_of, safe_request
from workers.tools.registry import tool

__all__ = ["send_notification"]


@tool(
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
    if not s.notify_webhook_url and not s.ntfy_url:
        raise RuntimeError(
            "notifications are not configured: set VOXQUEUE_NOTIFY_WEBHOOK_URL "
            "(JSON webhook) or VOXQUEUE_NTFY_URL (an ntfy topic URL)"
        )
    if s.notify_webhook_url:
        url = s.notify_webhook_url
        hook = safe_request(
            "POST",
            url,
            s,
            allow=[host_of(url)],
            json_body={"title": title, "message": text, "text": text},
        )
        if not hook.ok:
            raise RuntimeError(f"the notification webhook answered HTTP {hook.status}")
    if s.ntfy_url:
        url = s.ntfy_url
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        if title.strip():
            headers["Title"] = _header_text(title.strip())
        push = safe_request(
            "POST", url, s, allow=[host_of(url)], content=text.encode(), headers=headers
        )
        if not push.ok:
            raise RuntimeError(f"ntfy answered HTTP {push.status}")
    return "Notification sent."


def _header_text(value: str) -> str:
    """A header value as ASCII: RFC 2047 encoded-word when it has other characters (ntfy
    decodes it)."""
    if value.isascii():
        return value
    return "=?UTF-8?B?" + base64.b64encode(value.encode()).decode() + "?="
