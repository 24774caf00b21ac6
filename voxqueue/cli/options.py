"""Command-line options that commands in more than one module declare the same way."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
