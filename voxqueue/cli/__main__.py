"""``python -m voxqueue.cli``: the ``voxqueue`` command."""

from voxqueue.cli.main import main

main()
