"""The rich consoles of the command-line tools (``score``, ``rescore``, ``eval-cvdp``).

Output that is not a terminal (a pipe, a file, CI logs) is laid out for ``COLUMNS`` columns when
it is set, else for the width of a terminal the command still runs in (stderr or stdout is one,
or the process has a controlling terminal, ``/dev/tty``: ``reward-service score --help | less``),
else for :data:`PIPE_WIDTH` columns (rich's default of 80 wraps table cells and sentences
mid-word in a CI log: "difficu/lty"). It keeps every printed line whole (rich's ``soft_wrap``): a
line longer than the width stays one line for grep and for the terminal or pager it ends up in,
which wraps it there without inserting a newline. A table too wide for the width, on a terminal
too, is printed as one block of lines per row (:func:`print_table`).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 200

#: Width offered to a table to measure the width it needs with no cell wrapped.
_UNBOUNDED = 10_000


def pipe_width(stream: TextIO) -> int | None:
    """The width to lay out ``stream`` for: ``None`` (rich then takes the terminal's width, or
    ``COLUMNS``) when it is a terminal or ``COLUMNS`` is set; else the width of another terminal
    of the process (:func:`terminal_width`), or :data:`PIPE_WIDTH` when it has none."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    if tty or os.environ.get("COLUMNS"):
        return None
    return terminal_width() or PIPE_WIDTH


def terminal_width() -> int | None:
    """The columns of the terminal on stdout or stderr, else of the controlling terminal
    (``/dev/tty``: both streams redirected, as in ``cmd 2>&1 | less``); ``None`` without one
    (CI, a service, a detached process) or when it reports no width."""
    for fd in (1, 2):
        try:
            if os.isatty(fd) and (columns := os.get_terminal_size(fd).columns) > 0:
                return columns
        except OSError:
            pass
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:  # no controlling terminal
        return None
    try:
        return os.get_terminal_size(fd).columns or None
    except OSError:
        return None
    finally:
        os.close(fd)


def make_console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr): a terminal's own width, wrapping as rich does;
    else ``COLUMNS`` or :data:`PIPE_WIDTH` columns with lines kept whole (``soft_wrap``)."""
    stream = sys.stderr if stderr else sys.stdout
    console = Console(stderr=stderr, width=pipe_width(stream))
    console.soft_wrap = not console.is_terminal
    return console


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` as a table only when its cells fit the console's width unwrapped; else one
    block of lines per row (:func:`_records`): folded to a width its words do not fit, a table
    breaks them ("difficu/lty") and every row spans lines, in a terminal as in a pipe."""
    need = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
    if need > console.width:
        for line in _records(table):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    console.print(table)


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _records(table: Table) -> list[str]:
    """The rows of ``table`` as blocks: the first column's cell, then an indented
    ``header  value`` line for each other column, ``-`` for an empty cell (every block names
    every column)."""
    headers = [_plain(c.header) for c in table.columns]
    cells = [[_plain(cell) for cell in c.cells] for c in table.columns]
    pad = max(map(len, headers[1:]), default=0)
    lines: list[str] = []
    for row in range(table.row_count):
        lines.append(cells[0][row])
        for header, column in zip(headers[1:], cells[1:], strict=True):
            lines.append(f"  {header:<{pad}}  {column[row] or '-'}")
    return lines
