"""Instrument a design: parse the DUT files (pyslang), run every point kind over each module,
add the framework's items (flag declarations, generate-block existence marks, the ``final``
block that writes the flags) and the Icarus emulation rewrites; the testbench only gets the
emulation rewrites.

The result is cacheable per design (its texts hold :data:`TOKEN_PLACEHOLDER`, replaced by a
per-run token when written to disk, so a testbench cannot forge the flag file without it).
"""

from __future__ import annotations

import importlib
import logging
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyslang import Bag, SourceManager, ast, syntax
from pyslang.parsing import PreprocessorOptions, Token, TokenKind

from reward_service import hdl
from reward_service.fastcov import emulate
from reward_service.fastcov.blocks import BlocksKind
from reward_service.fastcov.clocks import steady_clocks
from reward_service.fastcov.unit import (
    FLAG_FILE,
    MAX_WIDTH,
    PREFIX,
    TOKEN_PLACEHOLDER,
    ModuleUnit,
    PointKind,
    PointSpec,
    SourceFile,
    Unsupported,
    instance_bodies,
)
from reward_service.fastcov.unit import walk as _walk

if TYPE_CHECKING:  # toggle.py imports the framework this module is part of
    from reward_service.fastcov.toggle import ToggleSignal

log = logging.getLogger(__name__)
_K = syntax.SyntaxKind


def _kinds(metrics: tuple[str, ...] | None = None) -> list[PointKind]:
    """The point kinds (all, or those producing one of ``metrics``)."""
    kinds: list[PointKind] = [BlocksKind()]
    try:  # expression coverage lives in its own module (another author); optional
        expr = importlib.import_module("reward_service.fastcov.expr")
        if getattr(expr, "KIND", None) is not None:
            kinds.append(expr.KIND)
    except ImportError:
        pass
    from reward_service.fastcov.toggle import ToggleKind

    kinds.append(ToggleKind())
    if metrics is not None:
        kinds = [k for k in kinds if set(k.metrics) & set(metrics)]
    return kinds


@dataclass
class ModuleTable:
    """What the flag line of one module's instance means: its points (flag ``i`` = ``points[i]``)
    with the generate scope each lives in, and its toggle signals."""

    module: str
    file: str
    points: list[PointSpec]
    scopes: list[int]  # scope index per point (0: module level)
    n_scopes: int
    toggles: list[ToggleSignal] = field(default_factory=list)


@dataclass
class Instrumented:
    """Instrumented DUT files (name -> text with :data:`TOKEN_PLACEHOLDER`) and the table of
    each instrumented module."""

    files: dict[str, str]
    tables: dict[str, ModuleTable]
    metrics: tuple[str, ...]


Defines = Mapping[str, "str | None"]


def parse(
    files: dict[str, str],
    context: dict[str, str] | None = None,
    defines: Defines | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[list[SourceFile], Any]:
    """Parse HDL files into :class:`SourceFile` s sharing one source manager, plus a pyslang
    compilation of them and of the ``context`` files (name -> text: a testbench whose
    instances give the DUT its parameter values; parsed with the same source manager, not
    returned as sources). ``defines`` (name -> value, None: defined without one) are
    predefined as the build's ``-D`` options define them, so the code parsed (and
    instrumented) is the one the simulators compile: the text of an inactive `` `ifdef``
    branch stays as it is, never instrumented. ``headers``: the files an `` `include`` may
    name (name -> text), found as the builds find them (:func:`reward_service.hdl.search_dirs`);
    an `` `include`` of anything else is refused (pyslang would read the service's own disk).
    Raises :class:`Unsupported` on a syntax error or such an include."""
    headers = headers or {}
    every = {**headers, **(context or {}), **files}
    dirs = hdl.search_dirs(sorted(every))
    including = False
    for name, text in every.items():
        including = _check_includes(name, text, set(every), dirs) or including
    if not including:  # nothing to read from disk (the common case: no folder to make)
        return _parse(files, context, defines, None, [])
    with tempfile.TemporaryDirectory(prefix="rs-fastcov-include-") as tmp:
        # pyslang reads included files from disk: the request's files only, under their names
        for name, text in every.items():
            path = Path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return _parse(files, context, defines, tmp, [str(Path(tmp, d)) for d in dirs])


def _parse(
    files: dict[str, str], context: dict[str, str] | None, defines: Defines | None, folder: str | None, dirs: list[str]
) -> tuple[list[SourceFile], Any]:
    sm = SourceManager()
    options = _preprocessor_options(defines, dirs)
    # each file's path is inside the folder, so an include beside it resolves there too
    sources = [SourceFile(name, text, _tree(name, text, sm, options, folder)) for name, text in files.items()]
    compilation = ast.Compilation()
    for s in sources:
        compilation.addSyntaxTree(s.tree)
    for name, text in (context or {}).items():
        compilation.addSyntaxTree(_tree(name, text, sm, options, folder))
    given = [*files, *(context or {})]
    # the folder holds the request's files only (parse writes them there)
    paths = [str(p) for p in Path(folder).rglob("*") if p.is_file()] if folder else given
    foreign = hdl.foreign_files(sm, paths)
    if foreign:  # an `include the text check did not see (macro pasting): never used nor reported
        raise Unsupported(f"an `include reads {foreign[0]}, a file that is not part of the request")
    return sources, compilation


def headers_of(files: Mapping[str, str]) -> dict[str, str]:
    """The header files of ``files`` (name -> text): what an `` `include`` may name (:func:`parse`)."""
    return {n: t for n, t in files.items() if n.lower().endswith(hdl.HEADER_SUFFIXES)}


_INCLUDE_ANY = re.compile(r"`include\b")


def _check_includes(name: str, text: str, names: set[str], dirs: list[str]) -> bool:
    """Whether ``name`` has an `` `include``; raises :class:`Unsupported` for one that is not a
    literal naming one of ``names``."""
    code = hdl.strip_comments(text)
    if "`include" not in code:
        return False
    targets = hdl.include_targets(text)
    if len(_INCLUDE_ANY.findall(code)) != len(targets):
        raise Unsupported(f"{name}: an `include whose file name is not a literal on its own line")
    for target in targets:
        if hdl.resolve_include(target, name, names, dirs) is None:
            raise Unsupported(f'{name}: `include "{target}" names no file of the request')
    return True


def _preprocessor_options(defines: Defines | None, include_dirs: list[str] | None = None) -> Any:
    options = PreprocessorOptions()
    options.additionalIncludePaths = list(include_dirs or [])
    options.predefines = [name if value is None else f"{name}={value}" for name, value in (defines or {}).items()]
    return Bag([options])


def _tree(name: str, text: str, sm: Any, options: Any, folder: str | None = None) -> Any:
    tree = syntax.SyntaxTree.fromText(text, sm, name, str(Path(folder, name)) if folder else name, options)
    errors = [d for d in tree.diagnostics if d.isError()]
    if errors:
        raise Unsupported(f"{name}:{sm.getLineNumber(errors[0].location)}: pyslang cannot parse it ({errors[0].code})")
    return tree


def modules_of(source: SourceFile) -> list[Any]:
    root = source.tree.root
    members = list(root.members) if isinstance(root, syntax.CompilationUnitSyntax) else [root]
    for m in members:
        if m.kind in (_K.InterfaceDeclaration, _K.ClassDeclaration, _K.ProgramDeclaration):
            raise Unsupported(f"{source.name}: {m.kind.name} in the design is not instrumented")
        if (
            isinstance(m, syntax.ModuleDeclarationSyntax)
            and m.kind == _K.PackageDeclaration
            and any(c.kind in (_K.FunctionDeclaration, _K.TaskDeclaration) for c in m.members)
        ):
            raise Unsupported(f"{source.name}: functions in a package are not instrumented")
    return [m for m in members if m.kind == _K.ModuleDeclaration]


EMULATIONS = ("two_state", "zero_init")


def instrument(
    design: dict[str, str],
    metrics: tuple[str, ...] | None = None,
    emulation: str = "two_state",
    toplevel: str | None = None,
    context: dict[str, str] | None = None,
    defines: Defines | None = None,
) -> Instrumented:
    """Instrument the DUT files ``design`` (name -> text; headers are left as they are) for the
    point kinds of ``metrics`` (default: all), with the Icarus emulation rewrites ``emulation``
    (``two_state`` for SV testbenches, ``zero_init`` for cocotb with HDL ``toplevel``; see
    :mod:`.emulate`). ``context``: testbench files (name -> text; its headers are read where an `` `include`` names them) to
    elaborate the DUT under, when they give it other parameter values than its own
    (:mod:`.params`): the points are then enumerated from the instances the testbench makes (a
    DUT module it does not instantiate keeps its own elaboration). ``defines``: the build's
    macros (:func:`parse`). Raises :class:`Unsupported` when the design cannot be instrumented
    exactly."""
    if emulation not in EMULATIONS:
        raise ValueError(f"unknown emulation {emulation!r}")
    hdl_files = {n: t for n, t in design.items() if hdl.is_hdl_source(n)}  # no headers, no data files
    # headers are read where an `include names them; code from one is refused where a flag would go
    headers = headers_of(design)
    hdl_files = _assertions_out(hdl_files, defines, headers, cocotb=emulation != "two_state")
    sources, compilation = parse(hdl_files, defines=defines, headers=headers)
    bodies = _instance_bodies(compilation)
    compilations = dict.fromkeys(bodies, compilation)
    if context:
        units = {n: t for n, t in context.items() if hdl.is_hdl_source(n)}
        sources, compilation = parse(hdl_files, units, defines, {**headers, **headers_of(context)})
        own = ast.Compilation()  # the DUT alone, from the same syntax trees
        for s in sources:
            own.addSyntaxTree(s.tree)
        own_bodies = _instance_bodies(own)
        bodies = _instance_bodies(compilation, strict=True)
        compilations = {**dict.fromkeys(own_bodies, own), **dict.fromkeys(bodies, compilation)}
        bodies = {**own_bodies, **bodies}
    kinds = _kinds(metrics)
    big = _big_arrays(compilations.values()) if emulation == "two_state" else {}
    tables: dict[str, ModuleTable] = {}
    for source in sources:
        wrapped = emulate.name_generate_blocks(source)
        for module in modules_of(source):
            name = module.header.name.valueText
            unit = ModuleUnit(source, module, compilations.get(name, compilation), bodies.get(name))
            unit.wrapped_bodies = wrapped
            unit.constant_functions = _split_constant_functions(unit)
            if unit.name in tables:
                raise Unsupported(f"module {unit.name} is declared twice")
            for kind in kinds:
                kind.instrument(unit)
            tables[unit.name] = _finish_module(unit)
        _emulate(source, emulation, toplevel, bodies, big)
        # the DUT's only: the testbench's points do not count, and its text stays as written
        emulate.case_selectors_two_state(source)
    files = dict(design)
    files.update({s.name: s.apply() for s in sources})
    metrics = tuple(dict.fromkeys(m for k in kinds for m in k.metrics))
    return Instrumented(files=files, tables=tables, metrics=metrics)


#: Words that start a concurrent assertion item (a cheap test before parsing for them).
_ASSERTION_WORDS = re.compile(r"\b(?:property|sequence|assert|assume|cover|restrict|clocking)\b")


def _assertions_out(
    files: dict[str, str], defines: Defines | None, headers: dict[str, str], cocotb: bool = False
) -> dict[str, str]:
    """``files`` with their concurrent assertions taken out (:func:`.emulate.assertions_out`),
    before the point kinds see them. Raises :class:`Unsupported`, and for a ``cocotb`` run
    when there is any: a failed assertion ends Verilator's cocotb run (the SV testbench run
    goes on), which the fast path without them would not."""
    if not any(_ASSERTION_WORDS.search(hdl.strip_comments(t)) for t in files.values()):
        return files
    sources, _ = parse(files, defines=defines, headers=headers)
    out = dict(files)
    for source in sources:
        if emulate.assertions_out(source):
            if cocotb:
                raise Unsupported(
                    f"{source.name}: concurrent assertions under cocotb (a failing one ends Verilator's "
                    "cocotb run, and Icarus 11 cannot evaluate them)"
                )
            out[source.name] = source.apply()
    return out


def emulate_testbench(files: dict[str, str], headers: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The testbench files with the emulation rewrites and their covergroups taken out
    (:func:`.emulate.strip_covergroups`); a file pyslang cannot parse, or whose covergroups
    cannot be taken out, is left as it is (returned in the second list, for the result's
    message). ``headers``: the files an `` `include`` of theirs may name (name -> text)."""
    out, skipped = dict(files), []
    sources: list[SourceFile] = []
    for name, text in files.items():
        if not name.lower().endswith(hdl.HDL_SUFFIXES) or name.lower().endswith(hdl.HEADER_SUFFIXES):
            continue
        try:
            (source,), _ = parse({name: text}, headers=headers)
            if emulate.strip_covergroups(source):  # Icarus 11 rejects them; Verilator ignores them
                (source,), _ = parse({name: source.apply()}, headers=headers)  # the rewrites below see none
            sources.append(source)
        except Unsupported:
            skipped.append(name)
    # a file left as written could write any clock: then every wait keeps its guard
    steady = frozenset() if skipped else steady_clocks(sources)
    for source in sources:
        try:
            _emulate(source, "two_state", steady=steady)
            out[source.name] = source.apply()
        except Unsupported:
            skipped.append(source.name)
    return out, skipped


def _emulate(
    source: SourceFile,
    emulation: str,
    toplevel: str | None = None,
    bodies: dict[str, Any] | None = None,
    big: dict[str, set[str]] | None = None,
    steady: frozenset[str] = frozenset(),
) -> None:
    arrays = emulate.procedural_arrays(source, big or {})
    if emulation == "two_state":
        emulate.two_state(source, bit_arrays=arrays)
    else:  # cocotb: 4-state, zeroed; inputs of modules below the toplevel 2-state (X -> 0)
        emulate.zero_init(source, bodies)
        emulate.two_state(source, inputs_only_except=toplevel or "")
    if emulation == "two_state":  # a cocotb test could read the parameter, a string on Verilator
        emulate.string_parameters(source)
        # cocotb's writes of one time step land together (the last one wins): no pulse to see
        emulate.edge_processes(source, steady)
    emulate.zero_arrays(source, skip=arrays)
    emulate.vector_selects(source, bodies)
    emulate.array_indices(source, bodies)
    emulate.comb_at_time_zero(source)
    emulate.mark_endings(source)
    emulate.jumps_as_disable(source)


def _big_arrays(compilations: Any) -> dict[str, set[str]]:
    """Module name -> its unpacked-array variables with more than :data:`.unit.MAX_WIDTH`
    bits in every elaborated instance of every compilation in ``compilations`` (these have no
    toggle points, so no watcher waits on their elements: :func:`.emulate.procedural_arrays`).
    An elaboration that fails gives nothing."""
    widths: dict[str, dict[str, int]] = {}
    try:
        for compilation in {id(c): c for c in compilations}.values():
            for body in instance_bodies(compilation):
                seen = widths.setdefault(body.definition.name, {})
                for member in body:
                    if member.kind == ast.SymbolKind.Variable and member.type.canonicalType.isUnpackedArray:
                        width = member.type.canonicalType.bitstreamWidth
                        seen[member.name] = min(width, seen.get(member.name, width))
    except Exception as exc:
        log.debug("pyslang elaboration failed: %s", exc)
        return {}
    return {m: {n for n, w in seen.items() if w > MAX_WIDTH} for m, seen in widths.items()}


def _instance_bodies(compilation: Any, strict: bool = False) -> dict[str, Any]:
    """One elaborated instance body per module definition (first found, depth first).
    ``strict``: an elaboration failure raises :class:`Unsupported` (the testbench's parameter
    values would be unknown) instead of costing the semantic model only."""
    bodies: dict[str, Any] = {}
    try:
        for body in instance_bodies(compilation):
            bodies.setdefault(body.definition.name, body)
    except Exception as exc:
        if strict:
            raise Unsupported(f"pyslang cannot elaborate the design with the testbench: {exc}") from exc
        log.debug("pyslang elaboration failed: %s", exc)
    return bodies


#: Syntax whose expressions are evaluated at elaboration (constant context).
_CONSTANT_CONTEXTS = {
    _K.ParameterDeclaration,
    _K.TypeParameterDeclaration,
    _K.ParameterDeclarationStatement,
    _K.TypedefDeclaration,
    _K.VariableDimension,
    _K.ParameterValueAssignment,
    _K.GenvarDeclaration,
}
_RUNTIME_CONTEXTS = {
    _K.ContinuousAssign,
    _K.FunctionDeclaration,
    _K.TaskDeclaration,
    *emulate.PROCEDURES,
    _K.NetDeclaration,
    _K.HierarchicalInstance,
}


def _constant_call(call: Any) -> bool:
    """Whether a call is evaluated at elaboration (a parameter, a dimension, a generate
    condition or loop header)."""
    child, node = call, call.parent
    while node is not None:
        if node.kind in _CONSTANT_CONTEXTS:
            return True
        if node.kind in (_K.IfGenerate, _K.CaseGenerate, _K.LoopGenerate):
            return not (isinstance(child, syntax.MemberSyntax) or child.kind == _K.GenerateBlock)
        if node.kind in _RUNTIME_CONTEXTS or node.kind == _K.ModuleDeclaration:
            return False
        child, node = node, node.parent
    return False


def _split_constant_functions(unit: ModuleUnit) -> frozenset[str]:
    """Functions of the module that are called at elaboration get a flag-free copy
    ``__rs_c_<name>`` (Icarus cannot evaluate a constant function that writes module variables,
    and Verilator does not count elaboration-time calls); those calls are redirected to it.
    Returns the names of the copied functions."""
    funcs = {
        f.prototype.name.getLastToken().valueText: f for f in _walk(unit.syntax) if f.kind == _K.FunctionDeclaration
    }
    calls = [
        c
        for c in _walk(unit.syntax)
        if c.kind == _K.InvocationExpression
        and c.left.kind == _K.IdentifierName
        and c.left.identifier.valueText in funcs
    ]
    constant = {c.left.identifier.valueText for c in calls if _constant_call(c)}
    pending = list(constant)
    while pending:  # functions called by constant functions are constant too
        for c in _walk(funcs[pending.pop()]):
            if c.kind == _K.InvocationExpression and c.left.kind == _K.IdentifierName:
                name = c.left.identifier.valueText
                if name in funcs and name not in constant:
                    constant.add(name)
                    pending.append(name)
    for call in calls:
        if call.left.identifier.valueText in constant and _constant_call(call):
            unit.source.replace(call.left.identifier, f"{PREFIX}c_{call.left.identifier.valueText}")
    for name in constant:
        unit.insert_after(funcs[name], " " + _flag_free_copy(funcs[name], constant))
    return frozenset(constant)


def _flag_free_copy(func: Any, constant: set[str]) -> str:
    """One line of the function's own tokens (no comments), renamed ``__rs_c_<name>``, its
    calls of the other constant functions renamed the same way."""
    out = []
    for token in _tokens(func):
        text = token.rawText
        if token.kind == TokenKind.Identifier and text in constant:
            text = f"{PREFIX}c_{text}"
        out.append(text)
    return " ".join(t for t in out if t)


def _tokens(node: Any):
    for child in node:
        if isinstance(child, Token):
            yield child
        elif isinstance(child, syntax.SyntaxNode):
            yield from _tokens(child)


def _parameters(unit: ModuleUnit) -> list[str]:
    """The module's (non-local) value parameters: Verilator makes one copy of a module per
    distinct set of parameter values and merges points only within a copy."""
    if unit.body is None:
        return []
    names = []
    for member in unit.body:
        if member.kind == ast.SymbolKind.TypeParameter:
            raise Unsupported(f"{unit.file}: type parameter {member.name} of module {unit.name}")
        if member.kind == ast.SymbolKind.Parameter and not member.isLocalParam:
            names.append(member.name)
    return names


def _finish_module(unit: ModuleUnit) -> ModuleTable:
    """Declare the flags, mark the generate scopes, and add the final block writing the line
    ``<token> F <module> <instance path> <flag bits> <scope bits>``."""
    flags = unit.flags
    n_scopes = len(unit.scopes)
    decls = []
    if flags:
        decls.append("bit " + ", ".join(f.name for f in flags) + ";")
    if n_scopes > 1:
        decls.append("bit " + ", ".join(f"{PREFIX}e{i}" for i in range(1, n_scopes)) + ";")
    decls.extend(unit.declarations)
    if decls:
        unit.insert_after(unit.syntax.header, " " + " ".join(decls))
    for index, scope in enumerate(unit.scopes[1:], start=1):
        mark = f"initial {PREFIX}e{index} = 1'b1;"
        if scope.kind == _K.GenerateBlock:
            unit.insert_before(scope.end, f" {mark} ")
        elif unit.source.offsets(scope) in unit.wrapped_bodies:  # already in `begin : genblkN`
            unit.insert_after(scope, f" {mark}")
        else:
            raise Unsupported(f"{unit.file}:{unit.location(scope)[0]}: points in a directly nested generate construct")
    bits = "{1'b1" + "".join(f", {f.name}" for f in flags) + "}"
    scope_bits = "{1'b1" + "".join(f", {PREFIX}e{i}" for i in range(1, n_scopes)) + "}"
    params = _parameters(unit)
    param_fmt = ",".join("%0d" for _ in params) or "-"
    param_args = "".join(f", {p}" for p in params)
    unit.tail.insert(
        0,
        f'final begin {PREFIX}fd = $fopen("{FLAG_FILE}", "a"); '
        f'$fwrite({PREFIX}fd, "{TOKEN_PLACEHOLDER} F {unit.name} %m {param_fmt} %b %b\\n"{param_args}, '
        f"{bits}, {scope_bits}); $fclose({PREFIX}fd); end",
    )
    unit.insert_before(unit.syntax.endmodule, f"int {PREFIX}fd; " + " ".join(unit.tail) + " ")
    return ModuleTable(
        module=unit.name,
        file=unit.file,
        points=[f.spec for f in flags],
        scopes=[f.scope for f in flags],
        n_scopes=n_scopes,
        toggles=list(unit.toggles),
    )
