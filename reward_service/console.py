"""The rich consoles of the command-line tools (``score``, ``rescore``, ``eval-cvdp``).

Output that is not a terminal (a pipe, a file, CI logs) gets :data:`PIPE_WIDTH` columns unless
``COLUMNS`` says otherwise: rich's default of 80 wraps table cells and sentences mid-word there
("difficu/lty").
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPE_WIDTH = 200


def make_console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr): a terminal's own width; ``COLUMNS`` when set;
    else :data:`PIPE_WIDTH`."""
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and not os.environ.get("COLUMNS")
    return Console(stderr=stderr, width=PIPE_WIDTH if wide else None)
