"""The ways in: ``voxqueue gateway`` and ``voxqueue devices`` (the devices' way in, and their
tokens), and ``voxqueue wyoming`` (the queues as Home Assistant's speech to text, text to speech
and conversation agent, over the Wyoming protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.table import Table

from voxqueue.gateway.devices import DeviceError, DeviceRegistry
from voxqueue.gateway.rules import session_of
from voxqueue.keys import Keys
from voxqueue.redis_conn import connect
from voxqueue.sessions import Sessions
from voxqueue.settings import Settings, get_client_settings, get_settings

out = Console()

err = Console(stderr=True)

devices_app = typer.Typer(help="Devices and their tokens (for the gateway).",
                          invoke_without_command=True)


def _registry() -> DeviceRegistry:
    settings = get_settings()
    return DeviceRegistry(connect(settings), Keys(settings.redis.key_prefix))


@devices_app.callback()
def devices_list(ctx: typer.Context) -> None:
    """List the devices (no tokens: only their hashes are kept)."""
    if ctx.invoked_subcommand is not None:
        return
    table = Table("device", "added", "last seen")
    for device in _registry().list():
        table.add_row(device.name, _when(device.created_at), _when(device.last_seen))
    out.print(table)


@devices_app.command("add")
def devices_add(
    name: str,
    link: Annotated[bool, typer.Option(
        "--link", help="Print the browser page's address with the token in it, and its QR code "
        "(point a phone's camera at it).")] = False,
    url: Annotated[str | None, typer.Option(
        help="The gateway's address as the browser reaches it (default: "
        "VOXQUEUE_GATEWAY_PUBLIC_URL, else http://<gateway host>:<port>).")] = None,
) -> None:
    """Register a device and print its token (shown once: put it in the device's
    VOXQUEUE_DEVICE_TOKEN), or with --link the browser page's pairing link."""
    try:
        token = _registry().add(name)
    except DeviceError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    if not link:
        print(token)
        return
    address = pairing_link(url or _public_url(), token)
    print(address)
    if out.is_terminal:
        import segno

        segno.make(address, error="l").terminal(compact=True)
    host = urlsplit(address).hostname or ""
    if address.startswith("http://") and host not in ("127.0.0.1", "localhost", "::1"):
        err.print("[yellow]A browser gives the microphone only to https:// pages (or "
                  "localhost): put the gateway behind TLS (docs/browser.md).[/]")


def _public_url() -> str:
    gateway_settings = get_client_settings().gateway
    if gateway_settings.public_url:
        return gateway_settings.public_url
    host = gateway_settings.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # listening everywhere
    return f"http://{f'[{host}]' if ':' in host else host}:{gateway_settings.port}"


def pairing_link(base: str, token: str) -> str:
    """The page's address with the token in its fragment (a browser never sends a fragment)."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/", "",
                       f"token={token}"))


@devices_app.command("revoke")
def devices_revoke(
    name: str,
    keep_data: Annotated[bool, typer.Option(
        "--keep-data", help="Keep the device's memory, sessions, timers and monitors (a name "
        "added again then inherits them).")] = False,
) -> None:
    """Forget a device's token (the gateway refuses it at once, open connections included)
    and, unless --keep-data, everything it left: its timers, monitors, memory, sessions with
    their pending actions, announcements and alerts."""
    try:
        _registry().revoke(name)
    except DeviceError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    out.print(f"revoked {name}")
    if not keep_data:
        forgotten = forget_device(get_settings(), name)
        out.print("forgot " + ", ".join(f"{n} {what}" for what, n in forgotten.items()))


def forget_device(settings: Settings, name: str) -> dict[str, int]:
    """Delete what device ``name`` left behind; returns how many of each kind."""
    from workers.monitor.monitors import MonitorStore
    from workers.tool_registry.timer_store import TimerStore

    r, keys = connect(settings), Keys(settings.redis.key_prefix)
    owner = f"device:{name}"
    timers = TimerStore(r, keys)
    cancelled = sum(timers.cancel(item) for item in timers.pending(owner))
    monitors = MonitorStore(r, keys)
    deleted = sum(monitors.delete(m.name) for m in monitors.all() if m.owner == owner)
    sessions = Sessions(r, keys, settings)
    cleared = sum(sessions.clear(s.session_id) for s in sessions.all()
                  if s.session_id.startswith(session_of(name, None).removesuffix("default")))
    r.delete(keys.memory(owner), keys.memory(name), keys.owner_timers(owner),
             keys.monitor_creates(owner), keys.announcements(name), keys.device_alerts(name))
    r.hdel(keys.device_seen(), name)
    return {"timers": cancelled, "monitors": deleted, "sessions": cleared}


def gateway(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    certfile: Annotated[str | None, typer.Option(help="TLS certificate (PEM).")] = None,
    keyfile: Annotated[str | None, typer.Option(help="TLS private key (PEM).")] = None,
) -> None:
    """Serve the devices' gateway (HTTP; TLS with --certfile/--keyfile, or behind a proxy)."""
    from voxqueue.gateway.server import serve

    settings = get_client_settings()
    updates = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    serve(settings.replace(gateway=updates), certfile=certfile, keyfile=keyfile)


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def wyoming(
    uri: Annotated[str | None, typer.Option(
        help="Where to listen: tcp://HOST:PORT or unix:///path "
             "(default VOXQUEUE_WYOMING_URI, tcp://127.0.0.1:10300).")] = None,
    zeroconf: Annotated[str | None, typer.Option(
        help="Advertise _wyoming._tcp so Home Assistant discovers the server, under this "
             "name ('' for the machine's MAC address).")] = None,
) -> None:
    """Serve Home Assistant (and any Wyoming client) from the queues: STT, TTS, agent."""
    from voxqueue.wyoming.server import quiet_library_logs, serve
    from workers.runtime.lifecycle import configure_logging

    settings = get_settings()
    if uri is not None:
        settings = settings.replace(wyoming={"uri": uri})
    configure_logging()
    quiet_library_logs()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, zeroconf_name=zeroconf))
