"""``voxqueue wyoming``: the queues as Home Assistant's speech to text, text to speech and
conversation agent, over the Wyoming protocol."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer

from voxqueue.settings import get_settings


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
