"""Parser for Verilator's ``coverage.dat`` (``# SystemC::Coverage-3`` format).

Each record is ``C '<key/value pairs>' <count>``; the pairs are ``\\x01key\\x02value``. Keys used
(Verilator's ``verilated_cov_key.h``): ``f`` file, ``l`` line, ``n`` column, ``t`` point type
(our metric), ``page``, ``o`` comment (signal/bit for toggle, condition text for branch/expr),
``S`` first:last line range, ``h`` hierarchy. Verilator writes the short key letters; long ones
(``filename``, ``lineno``, ...) are accepted too.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from reward_service.coverage.points import CoveragePoint
from reward_service.errors import RewardServiceError
from reward_service.safe_io import read_output_text

_RECORD = re.compile(r"^C '(?P<key>.*)' (?P<count>\d+)\s*$")
#: Longest line number or count read (Verilator writes 64-bit counts: 20 digits).
_MAX_DIGITS = 40
_PAIR = re.compile(r"\x01([^\x02]*)\x02([^\x01]*)")
_LONG = {"filename": "f", "lineno": "l", "column": "n", "type": "t", "comment": "o", "hier": "h"}
# Verilator's point types that we report under another key.
_TYPE_ALIASES = {"block": "line"}


class CoverageFileError(RewardServiceError, ValueError):
    """The file is not a well-formed Verilator coverage file."""


def parse_coverage_dat(path: Path, dut_files: set[str] | None = None) -> list[CoveragePoint]:
    """Parse ``coverage.dat`` into points, keeping only records whose file is in ``dut_files``.

    ``dut_files`` holds file names as passed to Verilator (relative paths, normalised); ``None``
    keeps every record. Records of the same key are summed (Verilator may write duplicates when
    several models share a file). Each point's ``identity`` is its record key without ``h``: a
    file written per instance (rs_main.cpp) has one point per instance, which
    :func:`~reward_service.coverage.instances.merge_instances` keeps to the DUT's hierarchy and
    merges. Raises :class:`CoverageFileError` on a malformed file and
    :class:`~reward_service.safe_io.UnsafeOutput` on a link or an oversized file.
    """
    wanted = {posixpath.normpath(f) for f in dut_files} if dut_files is not None else None
    merged: dict[tuple, CoveragePoint] = {}
    lines = read_output_text(Path(path)).splitlines()
    if not lines or not lines[0].startswith("# SystemC::Coverage"):
        raise CoverageFileError(f"{Path(path).name}: not a Verilator coverage file")
    for raw in lines[1:]:
        m = _RECORD.match(raw)
        if not m:
            continue
        fields = {_LONG.get(k, k): v for k, v in _PAIR.findall(m.group("key"))}
        file = posixpath.normpath(fields.get("f", ""))
        if wanted is not None and file not in wanted:
            continue
        metric = fields.get("t", "")
        metric = _TYPE_ALIASES.get(metric, metric)
        identity = (file, fields.get("l"), fields.get("n"), metric, fields.get("page"), fields.get("o"))
        key = (identity, fields.get("h"))
        line = fields.get("l") or "0"
        # ASCII digits only: str.isdigit() also accepts "²", and int() refuses numbers of more
        # than 4300 digits (sys.int_info.str_digits_check_threshold); both must be this error.
        if not (line.isascii() and line.isdigit()) or len(line) > _MAX_DIGITS:
            raise CoverageFileError(f"{Path(path).name}: bad line number {line[:20]!r}")
        if len(m.group("count")) > _MAX_DIGITS:
            raise CoverageFileError(f"{Path(path).name}: count of {len(m.group('count'))} digits")
        count = int(m.group("count"))  # digits by the regex (int() reads any Unicode decimal digit)
        if key in merged:
            count += merged[key].count
        merged[key] = CoveragePoint(
            metric=metric,
            file=file,
            line=int(line),
            detail=fields.get("o", ""),
            hier=fields.get("h", ""),
            count=count,
            identity=identity,
        )
    return list(merged.values())
