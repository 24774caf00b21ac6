"""Flower's basic-auth credentials: the configured password, or one made up per machine and
kept in a file only its owner can read."""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from voxqueue.settings import Settings

#: Flower's password before it was made up per machine: refused wherever it is set.
OLD_FLOWER_PASSWORD = "voxqueue"  # noqa: S105 (the value to refuse, not a credential)


@dataclass(frozen=True)
class FlowerCredentials:
    """Flower's basic-auth user and password, and where the password came from: the setting
    ``VOXQUEUE_FLOWER_PASSWORD`` or the path of the file that keeps a made-up one."""

    user: str
    password: str = field(repr=False)
    source: str


def flower_password_file(settings: Settings) -> Path:
    """``VOXQUEUE_FLOWER_PASSWORD_FILE``, else ``$XDG_CONFIG_HOME/voxqueue/flower-password``
    (``~/.config/voxqueue/flower-password``)."""
    if settings.dashboard.flower_password_file is not None:
        return settings.dashboard.flower_password_file.expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "voxqueue" / "flower-password"


def flower_credentials(settings: Settings) -> FlowerCredentials:
    """The configured password, unless it is unset or the old default: then a random one,
    made on the first run and kept (mode 0600) in :func:`flower_password_file`."""
    password = settings.dashboard.flower_password
    chosen = password.get_secret_value() if password else ""
    if chosen and chosen != OLD_FLOWER_PASSWORD:
        return FlowerCredentials(settings.dashboard.flower_user, chosen, "VOXQUEUE_FLOWER_PASSWORD")
    path = flower_password_file(settings)
    return FlowerCredentials(settings.dashboard.flower_user, _kept_password(path), str(path))


def _kept_password(path: Path) -> str:
    """The password in ``path``; a new one written there first when it has none."""
    for _attempt in range(3):
        with contextlib.suppress(FileNotFoundError):
            kept = path.read_text().strip()
            if kept and kept != OLD_FLOWER_PASSWORD:
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)
                return kept
            path.unlink()  # empty or the old default: replaced
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(24) + "\n")
        try:
            os.link(draft, path)  # whole or not at all; a concurrent first run's wins
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: a rename, the last one wins
            os.replace(draft, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                draft.unlink()
    raise RuntimeError(f"could not keep a Flower password in {path}")
