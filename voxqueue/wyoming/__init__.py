"""Home Assistant's Wyoming protocol in front of the queues (``voxqueue wyoming``).

One module per job, as in the ``wyoming`` library itself: what the server says it is
(``describe``), the audio a client sends (``audio_in``), speech sent back (``speech_out``),
conversation turns (``conversation``), the guard on what a client may do (``guard``: its
networks, event sizes, rate, device and tools), one connection's events (``handler``) and the
listening server (``server``). The protocol itself is the ``wyoming`` library's; the queues are
reached through :class:`voxqueue.client.direct.Client`.
"""
