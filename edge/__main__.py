"""``python -m edge``: the same as ``voxqueue edge``."""

from edge.cli import main

main()
