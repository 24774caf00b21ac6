"""A Wyoming satellite (``wyoming-satellite`` on a Raspberry Pi) as a voxqueue edge.

``voxqueue satellite --uri tcp://HOST:10700`` connects to the satellite and does what Home
Assistant does (``describe``, ``run-satellite``, pings), turning its audio into turns: the ears
(``ears``: the edge's own wake word engine and end of speech, on the satellite's stream), a
turn's answer as Wyoming events (``answer``), and the connection with its reconnection
(``link``).
"""
