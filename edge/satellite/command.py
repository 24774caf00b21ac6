"""``voxqueue satellite``: serve a running ``wyoming-satellite`` as a voxqueue edge."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from edge.announcements import Announcement, AnnouncementListener, feed_for
from edge.link import Link
from edge.pipeline import Listener
from edge.satellite.ears import Ears
from edge.satellite.link import SatelliteLink
from edge.settings import EdgeSettings, direct_redis_problem
from voxqueue.client.gateway import connect_client
from voxqueue.settings import ClientSettings, get_client_settings

app = typer.Typer(add_completion=False, help="Serve a Wyoming satellite as a voxqueue edge.")


@app.command()
def satellite_command(
    uri: Annotated[str, typer.Option(help="The satellite: tcp://HOST:10700.")],
    device: Annotated[str | None, typer.Option(
        help="Device id: its announcements and timers are spoken on the satellite "
             "(default: the host name).")] = None,
    wake_word: Annotated[list[str] | None, typer.Option(
        "--wake-word", "-w",
        help="For a satellite with no wake word of its own: okay_nabu, hey_jarvis, "
             "hey_mycroft or alexa; repeat for several.")] = None,
    language: Annotated[str, typer.Option(help="The language sent with transcribe.")] = "en",
    announcements: Annotated[bool, typer.Option(
        help="Speak the device's announcements and timers on the satellite.")] = True,
    trusted_host: Annotated[bool, typer.Option(
        "--trusted-host", help="This host may hold the Redis password: reach a Redis on "
        "another machine without the gateway (VOXQUEUE_EDGE_DIRECT_REDIS).")] = False,
) -> None:
    """Connect to the satellite, run its commands through the queues, reconnect when it
    restarts."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides: dict[str, Any] = {"device": device, "wake_words": wake_word,
                                 "direct_redis": trusted_host or None}
    try:
        edge = EdgeSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        for problem in exc.errors():
            print(f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}",
                  file=sys.stderr)
        raise typer.Exit(2) from exc
    settings = get_client_settings()
    refusal = direct_redis_problem(settings.redis.url, settings.gateway.url, edge.direct_redis)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        raise typer.Exit(2)
    client = connect_client(settings)
    link = SatelliteLink(uri, client, Ears(Listener.from_settings(edge)), edge,
                         language=language)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(link, settings, announcements))


async def _serve(link: SatelliteLink, settings: ClientSettings, announcements: bool) -> None:
    """Serve the satellite; the device's announcements are read in a thread and queued."""
    loop = asyncio.get_running_loop()
    unasked = None
    if announcements:
        def deliver(item: Announcement) -> None:
            loop.call_soon_threadsafe(link.announce, item)

        state = Link("redis", lambda name, why: None, lambda name: None)
        unasked = AnnouncementListener(feed_for(link.client, settings, link.edge.device),
                                       state, deliver)
        unasked.start()
    try:
        await link.run()
    finally:
        if unasked is not None:
            unasked.close()


def main(args: list[str] | None = None) -> None:
    app(args=args, prog_name="voxqueue satellite")
