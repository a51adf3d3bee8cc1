"""Light source inspection of Verilog/SystemVerilog text: module names, top module, instance
names, VHDL detection, `include and data-file scanning. Regex-based on comment-stripped text;
enough for choosing a top module, checking the DUT instance name and telling compilation units
from included files, not a parser."""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
#: A Verilog string literal (backslash escapes included).
STRING_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"')
_STRING_OR_COMMENT = re.compile(rf"(?P<s>{STRING_LITERAL.pattern})|{_COMMENT.pattern}", re.S)
_MODULE = re.compile(r"^\s*(?:module|program)\s+(?:automatic\s+|static\s+)?([A-Za-z_]\w*)", re.M)
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_VHDL = re.compile(r"^\s*(entity\s+\w+\s+is|architecture\s+\w+\s+of\s+\w+\s+is)\b", re.I | re.M)
#: Verilog headers: `include'd, or compiled as sources when nothing includes them (cocotb flow).
HEADER_SUFFIXES = (".vh", ".svh", ".inc")
HDL_SUFFIXES = (".v", ".sv", ".vams", ".svi") + HEADER_SUFFIXES
VHDL_SUFFIXES = (".vhd", ".vhdl")


#: Texts up to this many characters have their stripped forms remembered (:func:`strip_comments`).
_MEMO_CHARS = 1 << 17  # 64 entries x 2 caches x (key + result): ~32 MiB of ASCII at most


def strip_comments(text: str) -> str:
    """Text without // and /* */ comments and string literals."""
    return _strip_comments(text) if len(text) <= _MEMO_CHARS else _COMMENT.sub(" ", STRING_LITERAL.sub('""', text))


def strip_comments_only(text: str) -> str:
    """Text without // and /* */ comments; string literals kept as they are."""
    return _strip_comments_only(text) if len(text) <= _MEMO_CHARS else _strip_only(text)


# Remembered: a sample's files are stripped ~30 times on its way through the engine (prepare,
# the integrity check, the fast path's screens, the work dir's file lists), ~0.7 ms of CPU, and
# the design's text is the same for every sample of a problem.
@functools.lru_cache(maxsize=64)
def _strip_comments(text: str) -> str:
    return _COMMENT.sub(" ", STRING_LITERAL.sub('""', text))


@functools.lru_cache(maxsize=64)
def _strip_comments_only(text: str) -> str:
    return _strip_only(text)


def _strip_only(text: str) -> str:
    return _STRING_OR_COMMENT.sub(lambda m: m.group("s") or " ", text)


def module_names(text: str) -> list[str]:
    """Names of the modules (and programs) declared in ``text``, in order."""
    return _MODULE.findall(strip_comments(text))


def is_vhdl(name: str, text: str) -> bool:
    """Whether a file is VHDL, by suffix (.vhd/.vhdl) or by an entity/architecture header."""
    return name.lower().endswith(VHDL_SUFFIXES) or bool(_VHDL.search(strip_comments(text)))


def top_modules(texts: list[str]) -> list[str]:
    """Modules declared in ``texts`` that none of them instantiates (candidate tops), in order."""
    declared = [name for text in texts for name in module_names(text)]
    return [name for name in declared if not any(instance_names(text, name) for text in texts)]


def macros_read(texts: Iterable[str], names: Iterable[str]) -> list[str]:
    """The macro ``names`` that the HDL ``texts`` read (`` `ifdef``/`` `ifndef``/`` `elsif``
    or a use), in ``names`` order (comments ignored)."""
    clean = [strip_comments(t) for t in texts]
    return [
        n
        for n in names
        if any(re.search(rf"`(?:ifn?def|elsif)\s+{re.escape(n)}\b|`{re.escape(n)}\b", t) for t in clean)
    ]


def choose_top(stimulus_texts: list[str], design_modules: set[str]) -> str | None:
    """The testbench top: a stimulus module nobody instantiates; prefers names like tb*/test*."""
    tops = [t for t in top_modules(stimulus_texts) if t not in design_modules]
    if not tops:
        return None
    for name in tops:
        if re.match(r"(?i)^(tb|test)|_tb$|_test$|bench", name):
            return name
    return tops[0]


def instantiates(text: str, module: str | None, instance: str) -> bool:
    """Whether ``text`` holds an instance named ``instance`` (of ``module`` when given):
    ``module [#(...)] instance (`` allowing parameter overrides and arrays."""
    clean = strip_comments(text)
    mod = re.escape(module) if module else r"[A-Za-z_]\w*"
    pattern = (
        rf"\b{mod}\s*(?:#\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*)?\b{re.escape(instance)}\s*(?:\[[^\]]*\]\s*)*\("
    )
    return re.search(pattern, clean) is not None


def instance_names(text: str, module: str) -> list[str]:
    """Instance names of ``module`` in ``text``."""
    clean = strip_comments(text)
    pattern = rf"\b{re.escape(module)}\s*(?:#\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*)?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*\("
    return re.findall(pattern, clean)


_COVERGROUP = re.compile(r"\bcovergroup\s+([A-Za-z_]\w*)")


def covergroups(text: str) -> list[str]:
    """Names of the SystemVerilog covergroups declared in ``text``, in order (comments and
    strings ignored)."""
    return _COVERGROUP.findall(strip_comments(text))


# -- files that are not compilation units: data files and `include'd sources ---------------------

#: Data files read by the simulation (``$readmemh``, ``$fscanf``, ...): copied beside the
#: sources and into the simulation's cwd, never compiled. A list, not "any other suffix": a file
#: in the cocotb run dir is on Python's import path, so e.g. ``.pyc``/``.pth``/``.so`` stay out.
DATA_SUFFIXES = (
    ".hex",
    ".mem",
    ".dat",
    ".txt",
    ".bin",
    ".csv",
    ".tsv",
    ".coe",
    ".mif",
    ".vec",
    ".tv",
    ".in",
    ".out",
    ".ref",
    ".golden",
    ".data",
    ".init",
    ".json",
    ".yaml",
    ".yml",
)
_INCLUDE = re.compile(r'^[ \t]*`include[ \t]+"([^"\n]+)"', re.M)
#: ``$readmemh("f", ...)``/``$readmemb`` and ``$fopen("f", "r...")`` with a literal file name.
_READMEM = re.compile(r'\$readmem[hb]\s*\(\s*"([^"\n]+)"')
_FOPEN_READ = re.compile(r'\$fopen\s*\(\s*"([^"\n]+)"\s*,\s*"([rwa+b]+)"\s*\)')


def is_hdl_source(name: str) -> bool:
    """Whether ``name`` is an HDL file that is no header (a candidate compilation unit; data
    files, Python and headers are not)."""
    low = name.lower()
    return low.endswith(HDL_SUFFIXES) and not low.endswith(HEADER_SUFFIXES)


def is_data_file(name: str) -> bool:
    """Whether ``name`` is a data file (:data:`DATA_SUFFIXES`, any case)."""
    return name.lower().endswith(DATA_SUFFIXES)


def include_targets(text: str) -> list[str]:
    """The file names of the ``include "..."`` directives in ``text`` (comments ignored), in order."""
    return _INCLUDE.findall(strip_comments_only(text))


def search_dirs(names: list[str], extra: Sequence[str] = ()) -> list[str]:
    """Where ``include`` files are looked up, relative to the source root, in order: the root
    (``"."``), the ``extra`` dirs (the request's include dirs), then every folder holding an HDL
    file of ``names`` (sorted). These are the ``-I`` dirs every build gets, so that an include
    resolves as in the user's checkout (relative to the root, or beside the including file)."""
    dirs = [".", *extra]
    dirs += sorted({posixpath.dirname(n) for n in names if n.lower().endswith(HDL_SUFFIXES)} - {""})
    seen: list[str] = []
    for d in dirs:
        d = posixpath.normpath(d)
        if d not in seen:
            seen.append(d)
    return seen


def resolve_include(target: str, including: str, names: set[str], dirs: list[str]) -> str | None:
    """The given file that ``include "target"`` in file ``including`` names: looked up beside
    ``including``, then in each of ``dirs`` (:func:`search_dirs`); None when none is given."""
    for base in (posixpath.dirname(including), *dirs):
        candidate = posixpath.normpath(posixpath.join(base, target))
        if candidate in names:
            return candidate
    return None


def included_files(files: dict[str, str], dirs: list[str]) -> set[str]:
    """The files of ``files`` (name -> text) that another of them ``include`` s (transitively
    found: a header included by an included header counts too)."""
    names = set(files)
    found: set[str] = set()
    for name, text in files.items():
        if not name.lower().endswith(HDL_SUFFIXES):
            continue  # an `include inside a data file is never read
        for target in include_targets(text):
            hit = resolve_include(target, name, names, dirs)
            if hit is not None and hit != name:
                found.add(hit)
    return found


def compilation_units(names: list[str], included: set[str], design_included: set[str] | None = None) -> list[str]:
    """The HDL files of ``names`` the compiler gets on its command line, in order: not a data
    file, and not ``include`` d by another file (``included``: it is compiled where it is
    included; compiled alone too it would declare everything twice). A header
    (:data:`HEADER_SUFFIXES`) is one only for the design's files: given ``design_included``
    (:func:`included_files` of the design's files alone), a design header that no *design*
    file includes is compiled where it stands in ``names``.

    Why design headers only: a design header nobody includes holds compilation-unit
    declarations (``$unit`` functions, parameters) of the files given with it, and the CVDP
    harnesses list it as a source (cocotb ``VERILOG_SOURCES="... rtl/prince_core.v
    rtl/prince_round_functions.vh"``, the `include commented out), all files in one simulator
    call: Icarus and Verilator compile the files of one call as one compilation unit, so
    ``prince_core``'s calls of the header's functions resolve. A testbench header is only ever
    included (cid012's ``xrun /src/*.sv /code/verif/*.sv`` compiles no ``.svh``).

    Why the design's own includes decide: the design must build the same whatever the
    stimulus says. Were a stimulus's include enough to drop a design header (an `include
    under an ```ifdef`` never defined counts, the scan does not preprocess), a testbench could
    drop the design's ``$unit`` functions and declare its own for the DUT to call."""
    return [
        n
        for n in names
        if n.lower().endswith(HDL_SUFFIXES)
        and (
            n not in design_included
            if design_included is not None and n.lower().endswith(HEADER_SUFFIXES)
            else n not in included and not n.lower().endswith(HEADER_SUFFIXES)
        )
    ]


def files_read(text: str) -> list[str]:
    """File names an HDL text reads by literal: ``$readmemh``/``$readmemb`` and ``$fopen`` with
    a read mode (``"r"``, ``"rb"``, ``"r+"``, ...). Comments are ignored; computed names are not seen."""
    code = strip_comments_only(text)
    out = _READMEM.findall(code)
    out += [name for name, mode in _FOPEN_READ.findall(code) if "r" in mode or "+" in mode]
    return list(dict.fromkeys(out))


_MACRO_SET = re.compile(r"`(?:define|undef)\s+([A-Za-z_]\w*)")


def design_macros_set_by(stimulus: dict[str, str], design: dict[str, str], dirs: list[str]) -> dict[str, list[str]]:
    """design file -> the macros that stimulus files ``define``/``undef`` and that design file
    reads (```ifdef``/```ifndef``/```elsif``/```NAME``), for each design file a stimulus file
    ``include`` s (it is then preprocessed after the stimulus's own text, so those macros would
    change the DUT). Both dicts map file name -> text; ``dirs`` as :func:`search_dirs`. Textual:
    a macro set under any condition, or after the include, counts too."""
    names = set(stimulus) | set(design)
    set_by_stimulus = {
        m
        for n, t in stimulus.items()
        if n.lower().endswith(HDL_SUFFIXES)
        for m in _MACRO_SET.findall(strip_comments_only(t))
    }
    out: dict[str, list[str]] = {}
    for name, text in stimulus.items():
        if not name.lower().endswith(HDL_SUFFIXES):
            continue
        for target in include_targets(text):
            hit = resolve_include(target, name, names, dirs)
            if hit not in design:
                continue
            code = strip_comments_only(design[hit])
            read = [m for m in sorted(set_by_stimulus) if re.search(rf"`(?:ifn?def|elsif)\s+{m}\b|`{m}\b", code)]
            if read:
                out[hit] = read
    return out


_UNNAMED_BUFFER = re.compile(r"<unnamed_buffer\d+>")


def foreign_files(source_manager: Any, request_paths: Iterable[str]) -> list[str]:
    """The paths of the files a pyslang ``source_manager`` holds that are none of
    ``request_paths`` (the paths the request's own files were given to it under): files an
    `` `include`` pulled from the host's disk (an absolute path, ``..``, or a name built by
    macro pasting that no text check sees). Macro expansion buffers are not files. A non-empty
    answer means the parse read a file that is not part of the request: its result must not be
    used nor reported (its text could leak through it)."""
    given_paths = set(request_paths)
    allowed: set[str] | None = None
    foreign = []
    for buffer in source_manager.getAllBuffers():
        if source_manager.getBufferKind(buffer).name in ("Macro", "MacroArg"):
            continue
        given = str(source_manager.getFullPath(buffer))
        if given in given_paths:  # the very path a request file was given under
            continue
        if source_manager.getBufferKind(buffer).name != "IncludeFile" and _UNNAMED_BUFFER.fullmatch(given):
            continue  # pyslang's own text (the predefines), never a file
        # realpath (a walk of the disk per path, so only for the other paths): a temporary
        # folder's path may reach pyslang through a symlink
        if allowed is None:
            allowed = {os.path.realpath(p) for p in given_paths}
        path = os.path.realpath(given)
        if path not in allowed:
            foreign.append(path)
    return foreign
