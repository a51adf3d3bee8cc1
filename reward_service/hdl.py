"""Light source inspection of Verilog/SystemVerilog text: module names, top module, instance
names, VHDL detection, `include and data-file scanning. Regex-based on comment-stripped text;
enough for choosing a top module, checking the DUT instance name and telling compilation units
from included files, not a parser."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

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


def strip_comments(text: str) -> str:
    """Text without // and /* */ comments and string literals."""
    return _COMMENT.sub(" ", STRING_LITERAL.sub('""', text))


def strip_comments_only(text: str) -> str:
    """Text without // and /* */ comments; string literals kept as they are."""
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
#: ```include `NAME`` (the file name is a macro; group 2 set: the macro takes arguments).
_INCLUDE_MACRO = re.compile(r"^[ \t]*`include[ \t]+`([A-Za-z_]\w*)([ \t]*\()?", re.M)
#: ```define NAME body``: group 2 a string literal's text, group 3 another macro's name, both
#: None for any other body (a macro with arguments, a `" string, a concatenation, ...).
_DEFINE = re.compile(r'^[ \t]*`define[ \t]+([A-Za-z_]\w*)(?:[ \t]+(?:"([^"\n]+)"|`([A-Za-z_]\w*)))?([^\n]*)$', re.M)
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


def _macro_bodies(codes: Sequence[str]) -> dict[str, list[str | None]]:
    """macro -> what each ```define`` of it in ``codes`` (comment-stripped texts) says: a file
    name (a string literal body: ``"x.vh"``), ```OTHER`` (the name of another macro), or None
    for any other body. Every definition counts, whatever ```ifdef`` it stands under."""
    out: dict[str, list[str | None]] = {}
    for code in codes:
        for name, literal, other, rest in _DEFINE.findall(code):
            plain = not rest.strip()
            value = (literal or (f"`{other}" if other else None)) if plain else None
            out.setdefault(name, []).append(value)
    return out


def _expand_include(
    macro: str, bodies: dict[str, list[str | None]], seen: frozenset[str] = frozenset()
) -> list[str] | None:
    """The file names ```include `macro`` can name by the ```define`` s in ``bodies``
    (:func:`_macro_bodies`, followed through macros naming macros); None when one of them is
    unknown: a macro no file defines (a ``-D`` build define, or none), another body, a cycle."""
    if macro in seen or macro not in bodies:
        return None
    names: list[str] = []
    for value in bodies[macro]:
        if value is None:
            return None
        if value.startswith("`"):
            more = _expand_include(value[1:], bodies, seen | {macro})
            if more is None:
                return None
            names += more
        else:
            names.append(value)
    return names


def included_files(files: dict[str, str], dirs: list[str]) -> set[str]:
    """The files of ``files`` (name -> text) that another of them ``include`` s (transitively
    found: a header included by an included header counts too).

    ```include `NAME`` (the file name is a macro, as Icarus and Verilator expand it) counts
    as an include of the file(s) a ```define NAME "file"`` of the given texts names (every such
    define, under any ```ifdef``). When the name cannot be told from the texts (a macro set by
    a ``-D`` build define, one with arguments or another body), every header of ``files``
    (:data:`HEADER_SUFFIXES`) counts as included: it may be the one the directive reads, and a
    header compiled as a source as well would declare its contents twice (Icarus: "'f' has
    already been declared"), while one that no file includes can be listed nowhere else. So
    :func:`compilation_units` compiles no header of such a design; a non-header file stays a
    compilation unit (compiling every ``.v`` is the default, not an inference)."""
    names = set(files)
    codes = {n: strip_comments_only(t) for n, t in files.items() if n.lower().endswith(HDL_SUFFIXES)}
    # (an `include inside a data file is never read)
    bodies = _macro_bodies(list(codes.values()))
    found: set[str] = set()
    unknown = False
    for name, code in codes.items():
        targets = _INCLUDE.findall(code)
        for macro, args in _INCLUDE_MACRO.findall(code):
            expanded = None if args else _expand_include(macro, bodies)
            if expanded is None:
                unknown = True
            else:
                targets += expanded
        for target in targets:
            hit = resolve_include(target, name, names, dirs)
            if hit is not None and hit != name:
                found.add(hit)
    if unknown:
        found |= {n for n in codes if n.lower().endswith(HEADER_SUFFIXES)}
    return found


def compilation_units(names: list[str], included: set[str], headers: bool = False) -> list[str]:
    """The HDL files of ``names`` the compiler gets on its command line, in order: not a data
    file, and not ``include`` d by another file (it is compiled where it is included; compiled
    alone too it would declare everything twice). A header (:data:`HEADER_SUFFIXES`) that no
    file includes is one only with ``headers`` (the design's files), where it stands in ``names``.

    Why design headers only: a design header nobody includes holds compilation-unit
    declarations (``$unit`` functions, parameters) of the files given with it, and the CVDP
    harnesses list it as a source (cocotb ``VERILOG_SOURCES="... rtl/prince_core.v
    rtl/prince_round_functions.vh"``, the `include commented out), all files in one simulator
    call: Icarus and Verilator compile the files of one call as one compilation unit, so
    ``prince_core``'s calls of the header's functions resolve. A testbench header is only ever
    included (cid012's ``xrun /src/*.sv /code/verif/*.sv`` compiles no ``.svh``)."""
    return [
        n
        for n in names
        if n.lower().endswith(HDL_SUFFIXES)
        and n not in included
        and (headers or not n.lower().endswith(HEADER_SUFFIXES))
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
