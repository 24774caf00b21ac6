"""``voxqueue up`` and ``voxqueue demo``: the processes of one machine, their supervisor, their
restarts, an embedded Redis when none answers, and Flower's credentials."""
