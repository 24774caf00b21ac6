"""Secrets out of logs: credential-named fields, environments, URL passwords and query strings.

``redact_event`` is a structlog processor; ``redact_text`` and ``redact_url`` serve messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

MASK = "***"

#: A credential's name, compared after lower-casing and turning ``-`` into ``_``:
#: ``Authorization``, ``X-Api-Key``, ``openai_api_key``, ``FLOWER_BASIC_AUTH``, ``Set-Cookie``...
#: (``max_tokens`` is not one: whole words only).
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:authorization|auth|cookies?|set_cookie|password|passwd|passphrase|pwd|secrets?"
    r"|token|api_?key|apikey|access_key|private_key|credentials?|bearer)(?:$|_)"
)
#: Mappings whose every value is hidden: environments hold keys and passwords under any name.
_ENVIRONMENTS = {"env", "environ", "environment", "extra_env"}
#: structlog's and logging's own fields, left as they are.
_UNTOUCHED = {"exc_info", "stack_info", "positional_args", "timestamp", "level", "logger"}

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)([^/?#@\s]*)@")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_-]*)(=|:[ \t]*)([^\s&;,'\"]+)")
_QUOTED_PAIR = re.compile(r"([\"'])([A-Za-z_][A-Za-z0-9_-]*)\1(\s*:\s*)([\"'])(.*?)(?<!\\)\4")


def is_secret_name(name: str) -> bool:
    """True for a header, field or variable name that holds a credential."""
    return bool(_SECRET_NAME.search(name.lower().replace("-", "_")))


def _params(part: str) -> str:
    return "&".join(
        f"{key}={MASK}" if sep else MASK
        for key, sep, _value in (p.partition("=") for p in part.split("&"))
    )


def redact_url(url: str) -> str:
    """``url`` with its password (or bare userinfo) and every query and fragment value hidden."""

    def userinfo(m: re.Match[str]) -> str:
        user, colon, _password = m.group(2).partition(":")
        return f"{m.group(1)}{user}:{MASK}@" if colon else f"{m.group(1)}{MASK}@"

    url = _USERINFO.sub(userinfo, url, count=1)
    head, hash_, fragment = url.partition("#")
    base, question, query = head.partition("?")
    out = base + (question + _params(query) if question else "")
    if hash_:
        out += hash_ + (_params(fragment) if "=" in fragment else fragment)
    return out


def redact_text(text: str) -> str:
    """``text`` with URLs redacted, and the values of ``Bearer``/``Basic`` credentials, of
    ``NAME=value``, ``Name: value`` and ``"name": "value"`` whose name is a credential's
    hidden."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _ASSIGNMENT.sub(
        lambda m: m.group(1) + m.group(2) + MASK if is_secret_name(m.group(1)) else m.group(0),
        text,
    )
    return _QUOTED_PAIR.sub(
        lambda m: m.group(1) + m.group(2) + m.group(1) + m.group(3) + m.group(4) + MASK
        + m.group(4) if is_secret_name(m.group(2)) else m.group(0),
        text,
    )


def redact_value(value: Any, name: str = "") -> Any:
    """A copy of ``value`` (a field named ``name``) that is safe to log."""
    unset = value is None or (isinstance(value, str) and not value)
    if name and is_secret_name(name) and not unset and not isinstance(value, bool):
        return MASK
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        if name.lower() in _ENVIRONMENTS:
            return {str(k): MASK for k in value}
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return (value[0], redact_value(value[1], value[0]))  # a (header, value) pair
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_value(v) for v in value]
    return value


def redact_event(logger: Any, name: str,
                 event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """structlog processor: every field of the event through :func:`redact_value` (the
    ``_``-prefixed and logging's own fields, such as ``exc_info``, are left alone)."""
    return {
        key: value if key.startswith("_") or key in _UNTOUCHED else redact_value(value, key)
        for key, value in event_dict.items()
    }
