"""SystemVerilog stimulus integrity: every write a testbench makes into the DUT's hierarchy.

The design and testbench files are elaborated together with pyslang (the request's defines and
include dirs, one compilation unit as the simulators compile them) and every write made by
code in a stimulus file is resolved to the symbol it writes: assignments of every kind
(blocking, nonblocking, continuous, ``assign``/``deassign``, ``force``/``release``), output and
``ref`` arguments, output port connections, system tasks that write an argument
(``$readmemh``, ``$sscanf``, ...), ``defparam``, calls of DUT subroutines that write DUT state,
and instances placed inside the DUT (``bind``, a testbench module standing in for a DUT
submodule). A written symbol is a DUT symbol when it lives inside an instance of a design
module (or a design package); the input ports of the outermost DUT instances are the DUT's own
drive and stay writable. Code in the design files is the DUT's and is not checked.

A syntax-level scan of the stimulus files runs beside the elaboration: `` `line `` directives
that name a DUT file, and, when pyslang reports errors (constructs it rejects but a simulator
may accept), hierarchical writes whose path goes through a DUT instance name; its findings are
added to the elaborated ones, so nothing pyslang cannot bind is let through silently.

What is not covered is listed in docs/integrity.md.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import posixpath
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyslang
from pyslang import ast, parsing, syntax

from reward_service import hdl
from reward_service.integrity import portnets, races
from reward_service.integrity.lvalues import (
    INCREMENTS,
    WRITING_SYSTEM_CALLS,
    node_writes,
    written_arguments,
    written_symbols,
)
from reward_service.models import IntegrityViolation, ParameterOverride

log = logging.getLogger(__name__)

_ROOT = "/rs/"  # where the in-memory files live (includes resolve among them, never on disk)
_SK = ast.SymbolKind
#: Verilator's inline C++ system functions and tasks ($c, $c8.., $cpure, $cpure8..)
_HOST_CALL = re.compile(r"\$c(?:pure)?\d*")
#: What a text holds where it makes a host call or a DPI import/export: a `$c` name, or the
#: `import`/`export` keyword and `DPI` string such a declaration needs, spelled in the text
#: itself or pasted together by a macro (``` `` ```); a stringified macro argument (`` `" ``)
#: makes a string, never a name. Texts without any of these make neither.
_HOST_HINT = re.compile(r"\$c|``|import|export|DPI")
_EK = ast.ExpressionKind
_SX = syntax.SyntaxKind


@dataclass(frozen=True)
class SvSources:
    """What the check elaborates: design and stimulus files (name -> text, as the user gave
    them), preprocessor ``defines`` (name -> value or None) and extra ``include_dirs``."""

    design: Mapping[str, str]
    stimulus: Mapping[str, str]
    defines: Mapping[str, str | None]
    include_dirs: Sequence[str] = ()

    def digest(self) -> str:
        """A hash of everything the check reads (its cache key)."""
        h = hashlib.sha256()
        for part in (self.design, self.stimulus, self.defines):
            for k in sorted(part):
                h.update(k.encode() + b"\0" + (part[k] or "").encode() + b"\0")
            h.update(b"\1")
        h.update("\0".join(self.include_dirs).encode())
        return h.hexdigest()


@dataclass(frozen=True)
class OverrideSite:
    """A :class:`ParameterOverride` and where the stimulus makes it (file and 1-based line of
    the DUT instantiation)."""

    override: ParameterOverride
    file: str
    line: int


@dataclass(frozen=True)
class SvCheck:
    """What :func:`check` found: the ``violations`` (writes into the DUT, in file and line
    order), the ``overrides`` of DUT instance parameters the stimulus makes, and its
    testbench-DUT ``races`` at clock edges with the ``schedule_edits`` that order them
    (:mod:`reward_service.integrity.races`; none when pyslang reported errors)."""

    violations: tuple[IntegrityViolation, ...]
    overrides: tuple[OverrideSite, ...]
    races: tuple[races.Race, ...] = ()
    schedule_edits: tuple[tuple[str, int], ...] = ()
    #: files an `include read from the host's disk that are not the request's: when any, the
    #: check found nothing else (no override is reported: it could carry such a file's text)
    foreign_files: tuple[str, ...] = ()
    #: host code the stimulus runs inside the simulator after preprocessing, ``(file, line,
    #: construct)``: Verilator's inline C++ (`$c`, `$cN`, `$cpure...`) or a DPI import/export,
    #: however macros spell it; when any, the check found nothing else
    host_code: tuple[tuple[str, int, str], ...] = ()


def check(sources: SvSources) -> SvCheck:
    """Every write into the DUT the stimulus files of ``sources`` make, and every parameter of a
    DUT instance they instantiate with another value than the design's. Each
    :class:`IntegrityViolation` has the stimulus ``file`` and 1-based ``line`` as given, the
    ``target`` (the DUT object's hierarchical path, or the DUT file name a `` `line `` directive
    claims) and its ``kind``: ``force``, ``release``, ``procedural_assign`` (``assign``/``deassign``
    in a procedure), ``continuous_assign``, ``assignment``, ``nonblocking_assignment``,
    ``argument`` (output/ref argument of a call), ``port_connection`` (output, inout or ref port
    of a testbench instance), ``net_alias``, ``event_trigger`` (``->`` a DUT event), ``disable``
    (of a DUT block), ``system_task``,
    ``dut_subroutine_call``, ``defparam``, ``bind``, ``stimulus_module`` (a testbench module
    instantiated inside the DUT), ``line_directive``. Results are cached per text hash (512
    entries); callers get copies. Never raises for bad HDL (pyslang reports errors; the syntax
    scan stands in)."""
    key = sources.digest()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
    if hit is None:
        hit = _Checker(sources).run()
        with _LOCK:
            _CACHE[key] = hit
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return SvCheck(
        violations=tuple(v.model_copy() for v in hit.violations),
        overrides=tuple(OverrideSite(o.override.model_copy(), o.file, o.line) for o in hit.overrides),
        races=hit.races,
        schedule_edits=hit.schedule_edits,
        foreign_files=hit.foreign_files,
        host_code=hit.host_code,
    )


def dut_writes(sources: SvSources) -> list[IntegrityViolation]:
    """:func:`check`'s violations alone."""
    return list(check(sources).violations)


_CACHE: OrderedDict[str, SvCheck] = OrderedDict()
_CACHE_SIZE = 512
_LOCK = threading.Lock()


class _Checker:
    """One check of ``sources``. ``shortcuts=False`` walks the design's code too and has the
    race analysis read the DUT's code whatever the testbench does: the same result, slower
    (tests/test_races.py compares the two)."""

    def __init__(self, sources: SvSources, *, shortcuts: bool = True) -> None:
        self.sources = sources
        self.shortcuts = shortcuts
        self.sm = pyslang.SourceManager()
        self.design_names = {n for n in sources.design if n.lower().endswith(hdl.HDL_SUFFIXES)}
        self.stimulus_names = {n for n in sources.stimulus if n.lower().endswith(hdl.HDL_SUFFIXES)}
        self.found: dict[tuple[str, int, str], IntegrityViolation] = {}
        self.overrides: list[tuple[str, str, str, str, str, int]] = []  # module, instance, name, value, where
        self.design_buffers: list[Any] = []
        self.bag: Any = None
        self.names: dict[int, str | None] = {}  # source buffer id -> given file name
        # pyslang offsets count bytes
        self.data = {n: t.encode("utf-8") for n, t in {**sources.design, **sources.stimulus}.items()}
        self.newlines: dict[str, list[int]] = {}
        self.design_modules = {m for n in self.design_names for m in hdl.module_names(sources.design[n])}
        self.design_code_is_designs = False
        self.parts: races.Parts | None = None
        #: writes to testbench symbols (kind, where, path, via): a write to a net or variable
        #: an output port of the DUT instance drives is a write of that port (_port_drivers)
        self.testbench_writes: list[tuple[str, tuple[str, int], str, str | None]] = []
        self.trees: list[Any] = []
        self.directions: dict[str, portnets.Ports] | None = None  # port directions from the syntax
        #: output connections of DUT instances pyslang did not elaborate (symbol path, port path)
        self.uninstantiated_driven: list[tuple[str, str]] = []

    # -- driver --------------------------------------------------------------------------------
    def run(self) -> SvCheck:
        trees, parse_errors = self._parse()
        self.trees = trees
        foreign = hdl.foreign_files(self.sm, [_ROOT + n for n in self.data])
        if foreign:  # nothing read from such a file may reach the result
            return SvCheck(violations=(), overrides=(), foreign_files=tuple(foreign))
        self.design_code_is_designs = self.shortcuts and self._design_code_is_designs()
        host_code = self._host_code(trees)
        if host_code:
            return SvCheck(violations=(), overrides=(), host_code=host_code)
        self._line_directives()
        compilation = ast.Compilation()
        for tree in trees:
            compilation.addSyntaxTree(tree)
        root = compilation.getRoot()
        errors = parse_errors or any(
            d.isError() and d.code not in _BINDING_NEUTRAL for d in compilation.getAllDiagnostics()
        )
        try:
            self._elaborated(root)
            self._port_drivers()
        except Exception:  # a pyslang binding we do not know: the syntax scan still names the writes
            log.exception("integrity check: the elaborated design could not be walked; syntax scan only")
            errors = True
        found_races = races.Analysis(races=(), edits=())
        if not errors:  # what the simulators compile is what pyslang bound
            try:
                parts = self.parts if self.shortcuts else None
                found_races = races.analyse(root, self._sites(), parts, shortcuts=self.shortcuts)
            except Exception:  # a construct the analysis does not know: no race reported, none ordered
                log.exception("race analysis failed; the stimulus is simulated as written")
        if errors:  # what pyslang could not bind may still be a write: scan the text too
            for tree in trees:
                self._syntax_scan(tree.root, root)
            self._syntax_port_nets()
        violations = sorted(self.found.values(), key=lambda v: (v.file or "", v.line or 0, v.target, v.kind))
        return SvCheck(
            violations=tuple(violations),
            overrides=tuple(self._with_defaults()),
            races=found_races.races,
            schedule_edits=found_races.edits,
        )

    def _host_code(self, trees: list[Any]) -> tuple[tuple[str, int, str], ...]:
        """Host code the stimulus runs in the simulator, found on the preprocessed token stream
        (a raw-text screen misses `` `define HC $c `` or a macro-made `import`): each `$c...`
        system name and each DPI import/export whose expansion site is a stimulus file (a
        design's own use is the design's), ``(file, line, construct)``."""
        if self.shortcuts and not any(_HOST_HINT.search(text) for text in self._texts()):
            return ()
        found: list[tuple[str | None, int, str]] = []
        # called for every token and node of design and stimulus on each sample: the names it
        # reads are bound here once (module attribute lookups were half its cost)
        token_type, system_identifier = parsing.Token, parsing.TokenKind.SystemIdentifier
        dpi = (syntax.SyntaxKind.DPIImport, syntax.SyntaxKind.DPIExport)
        advance, host_call = ast.VisitAction.Advance, _HOST_CALL.fullmatch

        def visit(node: Any) -> Any:
            if isinstance(node, token_type):
                if node.kind == system_identifier and host_call(node.valueText):
                    found.append((*self._where(node.location), node.valueText))
                return advance
            if node.kind in dpi:
                found.append((*self._where(node.sourceRange.start), "a DPI import/export"))
            return advance

        for tree in trees:
            if not self.design_code_is_designs:
                tree.root.visit(visit)
                continue
            for member in tree.root.members:
                # a member that begins and ends in design files is design code alone (the design
                # files come first and none includes a stimulus file), where nothing found is
                # reported: most of the tokens on a large DUT
                ends = (member.getFirstToken(), member.getLastToken())
                if not all(t is not None and self._in_design(t.location) for t in ends):
                    member.visit(visit)
        return tuple(sorted({(f, line, what) for f, line, what in found if f is not None and f in self.stimulus_names}))

    def _texts(self) -> list[str]:
        """Every text the preprocessor reads: the request's files and its defines."""
        defines = self.sources.defines
        return [
            *self.sources.design.values(),
            *self.sources.stimulus.values(),
            *defines,
            *(v or "" for v in defines.values()),
        ]

    def _parse(self) -> tuple[list[Any], bool]:
        """One syntax tree of every compilation unit (design files first, as the builds order
        them); headers and included files are in the source manager for ``include``."""
        files = {**self.sources.design, **self.sources.stimulus}
        hdl_files = {n: t for n, t in files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)}
        dirs = hdl.search_dirs(list(files), self.sources.include_dirs)
        included = hdl.included_files(hdl_files, dirs)
        options = parsing.PreprocessorOptions()
        options.predefines = [k if v is None else f"{k}={v}" for k, v in self.sources.defines.items()]
        options.additionalIncludePaths = [posixpath.normpath(_ROOT + d) for d in dirs]
        self.bag = pyslang.Bag([options])
        buffers = []
        for name, text in hdl_files.items():
            buffer = self.sm.assignText(_ROOT + name, text)
            if hdl.is_hdl_source(name) and name not in included:
                buffers.append(buffer)
                if name in self.sources.design:
                    self.design_buffers.append(buffer)
        tree = syntax.SyntaxTree.fromBuffers(buffers, self.sm, self.bag)
        errors = any(d.isError() for d in tree.diagnostics)
        return [tree], errors

    # -- parameter overrides -------------------------------------------------------------------
    def _note_overrides(self, inst: Any, where: tuple[str, int]) -> None:
        """The parameters of a DUT instance the stimulus makes that it sets (``#(...)``)."""
        for param in inst.body.parameters:
            if param.kind == _SK.Parameter and param.isOverridden and not param.isLocalParam:
                self.overrides.append(
                    (inst.definition.name, str(inst.hierarchicalPath), param.name, str(param.value), *where)
                )

    def _with_defaults(self) -> list[OverrideSite]:
        """The noted overrides with the design's own values (the design elaborated alone, where
        the module is a top of it); those equal to the default are dropped."""
        if not self.overrides:
            return []
        compilation = ast.Compilation()
        compilation.addSyntaxTree(syntax.SyntaxTree.fromBuffers(self.design_buffers, self.sm, self.bag))
        defaults: dict[tuple[str, str], str] = {}
        for top in compilation.getRoot().topInstances:
            for param in top.body.parameters:
                if param.kind == _SK.Parameter:
                    defaults[(top.definition.name, param.name)] = str(param.value)
        sites = []
        for module, instance, name, value, file, line in self.overrides:
            default = defaults.get((module, name))
            if default != value:
                sites.append(
                    OverrideSite(
                        ParameterOverride(instance=instance, name=name, value=value, default=default), file, line
                    )
                )
        return sites

    # -- locations -----------------------------------------------------------------------------
    def _where(self, loc: Any) -> tuple[str | None, int]:
        """The given file name and 1-based line of ``loc`` (a macro expansion: where it is
        expanded), raw: `` `line `` directives move neither."""
        loc = self.sm.getFullyExpandedLoc(loc)
        buffer = loc.buffer.id
        if buffer not in self.names:
            raw = str(self.sm.getFullPath(loc.buffer))
            self.names[buffer] = raw[len(_ROOT) :] if raw.startswith(_ROOT) else None
        name = self.names[buffer]
        data = self.data.get(name) if name is not None else None
        if name is None or data is None:
            return name, 0
        newlines = self.newlines.get(name)
        if newlines is None:  # the offsets of a file's newlines, once: a line is a bisection
            newlines = self.newlines[name] = [m.start() for m in re.finditer(b"\n", data)]
        return name, bisect.bisect_left(newlines, loc.offset) + 1

    def _offset(self, loc: Any) -> tuple[str, int] | None:
        """(stimulus file, byte offset) of ``loc`` when it is written in a stimulus file (not
        produced by a macro), else None: where the race analysis may edit the text."""
        if self.sm.isMacroLoc(loc):
            return None
        name, _ = self._where(loc)
        if name is None or name not in self.stimulus_names:
            return None
        return name, loc.offset

    def _sites(self) -> races.Sites:
        return races.Sites(
            in_stimulus=self._in_stimulus, dut_body=self._outer_dut_body, offset=self._offset, where=self._where
        )

    def _in_design(self, loc: Any) -> bool:
        name, _ = self._where(loc)
        return name is not None and name in self.design_names

    def _in_stimulus(self, loc: Any) -> tuple[str, int] | None:
        name, line = self._where(loc)
        if name is None or name not in self.stimulus_names:
            return None
        return name, line

    def _add(self, kind: str, where: tuple[str, int], target: str, message: str) -> None:
        """Record one write; of several kinds on one line and target the most specific stays
        (pyslang binds an output argument of a call as an assignment too)."""
        file, line = where
        key = (file, line, target)
        old = self.found.get(key)
        if old is None or old.kind in _GENERIC_KINDS:
            self.found[key] = IntegrityViolation(kind=kind, file=file, line=line, target=target, message=message)

    # -- DUT membership ------------------------------------------------------------------------
    def _is_design_definition(self, definition: Any) -> bool:
        if definition is None or definition.name not in self.design_modules:
            return False
        name, _ = self._where(definition.location)
        return name in self.design_names

    def _outer_dut_body(self, scope: Any) -> Any:
        """The outermost instance body of a design module (no interface) that ``scope`` (a
        pyslang Scope) lies in, else None."""
        inside = None
        body = scope.containingInstance if scope is not None else None
        while body is not None:
            inst = body.parentInstance
            if self._is_design_definition(body.definition) and not (inst is not None and inst.isInterface):
                inside = body
            if inst is None or inst.parentScope is None:
                break
            body = inst.parentScope.containingInstance
        return inside

    def _dut_path(self, symbol: Any) -> str | None:
        """The hierarchical path of ``symbol`` when it lives inside an instance of a design
        module (not an interface the testbench instantiates) or in a design file outside any
        instance (a package, ``$unit``); None when it does not, or when it is an input port of
        an outermost DUT instance (the DUT's own drive)."""
        scope = symbol.parentScope
        if scope is None:
            return None
        if scope.containingInstance is None:
            name, _ = self._where(symbol.location)
            return str(symbol.hierarchicalPath) if name in self.design_names else None
        inside = self._outer_dut_body(scope)
        if inside is None:
            return None
        path = str(symbol.hierarchicalPath)
        for port in inside.portList:
            internal = getattr(port, "internalSymbol", None)
            if port.kind == _SK.Port and internal is not None and internal.hierarchicalPath == path:
                return None if port.direction == ast.ArgumentDirection.In else path
        return path

    def _design_code_is_designs(self) -> bool:
        """Whether every line of code located in a design file is the design's: no file is
        both a design and a stimulus file, and no design file (or header it includes)
        includes a stimulus file. Then nothing the walk reports can lie in such code."""
        if self.design_names & self.stimulus_names:
            return False
        for buffer in self.sm.getAllBuffers():
            if self.sm.getBufferKind(buffer).name != "IncludeFile":
                continue
            raw = str(self.sm.getFullPath(buffer))
            if raw.startswith(_ROOT) and raw[len(_ROOT) :] in self.stimulus_names:
                name, _ = self._where(self.sm.getIncludedFrom(buffer))
                if name is None or name not in self.stimulus_names:
                    return False
        return True

    def _elaborated(self, root: Any) -> None:
        """Walk the elaboration for writes into the DUT, collecting on the way the
        :class:`races.Parts` the race analysis starts from (``self.parts``)."""
        parts = self.parts = races.Parts([], [], [])

        def visit(node: Any) -> Any:
            kind = getattr(node, "kind", None)
            if isinstance(kind, ast.SymbolKind):
                if kind == _SK.ProceduralBlock:
                    parts.blocks.append(node)
                elif kind == _SK.ContinuousAssign:
                    parts.assigns.append(node)
                elif kind == _SK.Instance:
                    parts.instances.append(node)
                if kind in _CODE_SYMBOLS and self.design_code_is_designs and self._in_design(node.location):
                    # the design's own code: every write in it is located in a design file,
                    # where nothing is reported (most of the walk on a large DUT)
                    return ast.VisitAction.Skip
                return self._symbol(node)
            if kind == _EK.Assignment:
                self._assignment(node)
            elif kind == _EK.Call:
                self._call(node)
            elif kind == _EK.UnaryOp and node.op in INCREMENTS:
                self._targets("assignment", node, node.operand)
            elif kind == ast.StatementKind.ProceduralAssign:
                self._targets("force" if node.isForce else "procedural_assign", node, _assign_lhs(node.assignment))
                return ast.VisitAction.Skip
            elif kind == ast.StatementKind.ProceduralDeassign:
                self._targets("release" if node.isRelease else "procedural_assign", node, node.lvalue)
            elif kind == ast.StatementKind.EventTrigger:  # `-> uut.ev` wakes the DUT's waiting processes
                self._targets("event_trigger", node, node.target)
            elif kind == ast.StatementKind.Disable:  # `disable uut.blk` stops a DUT process
                self._targets("disable", node, node.target)
            return ast.VisitAction.Advance

        root.visit(visit)

    def _symbol(self, node: Any) -> Any:
        kind = node.kind
        if kind == _SK.Instance:
            self._instance(node)
        elif kind == _SK.PrimitiveInstance:
            self._primitive(node)
        elif kind == _SK.DefParam:
            where = self._in_stimulus(node.location)
            target = node.target
            path = self._dut_path(target) if target is not None else None
            if where and path:
                self._add("defparam", where, path, f"defparam {path} changes the DUT")
        elif kind == _SK.Net:
            self._net(node)
        elif kind == _SK.UninstantiatedDef:
            self._uninstantiated(node)
        elif kind == _SK.NetAlias:
            for expr in node.netReferences:
                self._targets("net_alias", expr, expr, where_node=node)
        elif kind == _SK.ClockVar and node.direction in (ast.ArgumentDirection.Out, ast.ArgumentDirection.InOut):
            # `output w = dut.u_core.state_q`: every `cb.w <= v` writes the item's expression (an
            # item without one names the signal of that name in the block's scope, which pyslang
            # gives as its expression too); refused at the item, whether or not it is driven
            self._targets("clocking_output", node, node.initializer, where_node=node)
        elif kind == _SK.ContinuousAssign:
            expr = node.assignment
            if expr.kind == _EK.Assignment:
                self._targets("continuous_assign", expr, expr.left)
                self._reads_only(expr.right)
                return ast.VisitAction.Skip
        return ast.VisitAction.Advance

    def _instance(self, inst: Any) -> None:
        """An instance inside the DUT that the stimulus made (``bind``) or whose module the
        stimulus declares; output port connections of testbench instances are writes."""
        parent_path = self._outer_dut_body(inst.parentScope) is not None
        where_inst = self._in_stimulus(inst.location)
        if parent_path:
            if where_inst:
                self._add(
                    "bind", where_inst, inst.hierarchicalPath, f"instance {inst.hierarchicalPath} bound into the DUT"
                )
            else:
                where_def = self._in_stimulus(inst.definition.location)
                if where_def:
                    self._add(
                        "stimulus_module",
                        where_def,
                        inst.hierarchicalPath,
                        f"the testbench declares module {inst.definition.name}, which the DUT instantiates",
                    )
        if where_inst is None:
            return
        if not parent_path and self._is_design_definition(inst.definition):
            self._note_overrides(inst, where_inst)
        # the DUT's own output connections drive the nets _port_drivers protects: not writes of
        # the testbench's (any other instance's output or inout connection on them is)
        dut = not parent_path and self._is_design_definition(inst.definition)
        for conn in inst.portConnections:
            expr = conn.expression
            if expr is None:
                continue
            if expr.kind == _EK.Assignment:  # an output port
                self._targets("port_connection", expr, expr.left, record=not dut)
            elif getattr(conn.port, "direction", None) in (ast.ArgumentDirection.InOut, ast.ArgumentDirection.Ref):
                self._targets("port_connection", expr, expr, where_node=inst, record=not dut)

    def _primitive(self, prim: Any) -> None:
        """A gate or switch primitive of the stimulus (``buf (supply1, supply0) b(y, t);``,
        ``pullup p(y);``, ``tran t(y, a);``) drives its output terminals (pyslang gives them as
        assignments), a switch all of its terminals: each is a write of what it connects."""
        if self._in_stimulus(prim.location) is None:
            return
        switch = prim.primitiveType.name.lstrip("r").startswith("tran")
        for expr in prim.portConnections:
            if expr is None:
                continue
            if expr.kind == _EK.Assignment:
                self._targets("port_connection", expr, expr.left, where_node=prim)
            elif switch:
                self._targets("port_connection", expr, expr, where_node=prim)

    def _net(self, net: Any) -> None:
        """A net the stimulus declares that drives itself: a net declaration assignment (``wire
        (supply1, supply0) y = t;``, a continuous assignment) or a supply/pull net type
        (``supply1 y;``, ``tri1 y;``): a write of that net, for :meth:`_port_drivers`."""
        where = self._in_stimulus(net.location)
        if where is None:
            return
        path = str(net.hierarchicalPath)
        if net.initializer is not None:
            self.testbench_writes.append(("continuous_assign", where, path, "a net declaration assignment"))
        net_type = net.netType.name
        if net_type in portnets.DRIVING_NET_TYPES:
            self.testbench_writes.append(("net_type", where, path, f"a {net_type} net type"))

    def _uninstantiated(self, node: Any) -> None:
        """An instance pyslang did not elaborate (in a generate block whose condition it could
        not evaluate, e.g. a parameter used before its declaration; the simulators may build
        it): its connections to output, inout or ref ports (by the definition's syntax; a port
        of unknown direction counts) are writes; a DUT module's output connections drive."""
        where = self._in_stimulus(node.location)
        if where is None:
            return
        if self.directions is None:
            self.directions = portnets.port_directions(t.root for t in self.trees)
        ports = self.directions.get(node.definitionName)
        by_name = dict(ports or [])
        dut = node.definitionName in self.design_modules
        for i, (name, conn) in enumerate(zip(node.portNames, node.portConnections, strict=False)):
            expr = getattr(conn, "expr", None)
            if expr is None:
                continue
            if name:
                direction = by_name.get(name, "")
            else:
                name, direction = ports[i] if ports is not None and i < len(ports) else ("", "")
            if dut:
                if direction == "output":
                    port = f"{node.hierarchicalPath}.{name}"
                    self.uninstantiated_driven.extend((str(s.hierarchicalPath), port) for s in written_symbols(expr))
            elif direction not in ("input", "interface"):
                self._targets("port_connection", expr, expr, where_node=node)

    def _syntax_port_nets(self) -> None:
        """The port-net rule on the syntax (pyslang reported errors: what it left unbound)."""
        roots = [t.root for t in self.trees]
        for kind, where, port, message in portnets.port_net_writes(roots, self.design_modules, self._in_stimulus):
            self._add(kind, where, port, message)

    def _port_drivers(self) -> None:
        """Writes of the testbench to what an output port of an outermost DUT instance drives
        (``wire [3:0] q; top dut(.q(q));`` then ``force q = 15``, ``cb.q <= 15`` through a
        clocking block, ``assign q = ...``): the DUT's output port is DUT state (its toggle points
        count), so such a write is one into the DUT, reported as the port."""
        if not self.testbench_writes or self.parts is None:
            return
        driven: dict[str, str] = dict(self.uninstantiated_driven)
        for inst in self.parts.instances:
            if not self._is_design_definition(inst.definition) or self._outer_dut_body(inst.parentScope) is not None:
                continue
            if self._in_stimulus(inst.location) is None:
                continue
            for conn in inst.portConnections:
                expr = conn.expression
                if expr is None or expr.kind != _EK.Assignment:  # output ports only
                    continue
                for symbol in written_symbols(expr.left):
                    driven.setdefault(str(symbol.hierarchicalPath), f"{inst.hierarchicalPath}.{conn.port.name}")
        for kind, where, path, via in self.testbench_writes:
            port = driven.get(path)
            if port is not None:
                what = f"{via} writes" if via else _VERB.get(kind, "writes")
                self._add(kind, where, port, f"{what} {path}, which output port {port} drives")

    def _assignment(self, expr: Any) -> None:
        right = expr.right
        while right.kind == _EK.Conversion:  # `.*` / `.q(q)` of another type than the port's
            right = right.operand
        if right.kind == _EK.EmptyArgument:
            # an output port connection (`.q(q)`) or output argument (`t(q)`): _instance and
            # _call report those with their own kinds (a testbench signal an output port drives
            # is no write of the testbench's)
            return
        kind = "nonblocking_assignment" if expr.isNonBlocking else "assignment"
        self._targets(kind, expr, expr.left)

    def _call(self, call: Any) -> None:
        where = self._in_stimulus(call.sourceRange.start)
        if where is None:
            return
        for lhs, _ in written_arguments(call):
            if call.isSystemCall:
                self._targets("system_task", call, lhs, via=call.subroutineName)
            else:
                self._targets("argument", call, lhs, via=call.subroutine.name)
        sub = call.subroutine
        if call.isSystemCall or sub is None:
            return
        path = self._dut_path(sub)
        if path is not None:
            written = _writes_outside(sub)
            dut_written = sorted({p for p in (self._dut_path(s) for s in written) if p})
            if dut_written:
                self._add(
                    "dut_subroutine_call",
                    where,
                    ", ".join(dut_written),
                    f"calls {path}, which writes {', '.join(dut_written)}",
                )

    def _targets(
        self, kind: str, node: Any, lhs: Any, via: str | None = None, where_node: Any = None, record: bool = True
    ) -> None:
        """Record a violation for each DUT symbol among the written roots of ``lhs`` (located at
        ``node``'s start, or at the symbol ``where_node``); the other written symbols are the
        testbench's, kept for :meth:`_port_drivers` unless ``record`` is false."""
        if where_node is not None:
            where = self._in_stimulus(where_node.location)
        else:
            where = self._in_stimulus(node.sourceRange.start)
        if where is None or lhs is None:
            return
        for symbol in written_symbols(lhs):
            path = self._dut_path(symbol)
            if path is not None:
                what = f"{via} writes" if via else _VERB.get(kind, "writes")
                self._add(kind, where, path, f"{what} {path}")
            elif record:  # judged once every DUT output connection is known
                self.testbench_writes.append((kind, where, str(symbol.hierarchicalPath), via))

    def _reads_only(self, expr: Any) -> None:
        """Visit ``expr`` (a right-hand side) for the calls inside it."""

        def visit(node: Any) -> Any:
            if getattr(node, "kind", None) == _EK.Call:
                self._call(node)
            elif getattr(node, "kind", None) == _EK.Assignment:
                self._assignment(node)
            return ast.VisitAction.Advance

        expr.visit(visit)

    # -- text-level checks ---------------------------------------------------------------------
    def _line_directives(self) -> None:
        """`` `line `` directives in stimulus files naming a DUT file (by base name; a name
        given by a macro is taken as one)."""
        design_bases = {posixpath.basename(n).lower() for n in self.design_names}
        for name in sorted(self.stimulus_names):
            text = hdl.strip_comments_only(self.sources.stimulus[name])
            for m in _LINE_DIRECTIVE.finditer(text):
                claimed = m.group(1) if m.group(1) is not None else m.group(2)
                literal = m.group(1) is not None
                if ":" in claimed:  # a tool's message forged into its error lines (file:line: ...)
                    line = text.count("\n", 0, m.start()) + 1
                    self._add(
                        "line_directive",
                        (name, line),
                        claimed,
                        f"`line names a file {claimed!r} with a colon: the simulators' messages would "
                        "carry it where the tool names itself",
                    )
                elif not literal or posixpath.basename(claimed).lower() in design_bases:
                    line = text.count("\n", 0, m.start()) + 1
                    self._add(
                        "line_directive",
                        (name, line),
                        claimed,
                        f"`line makes stimulus code carry the DUT file name {claimed!r}",
                    )

    def _syntax_scan(self, root: Any, design: Any) -> None:
        """Hierarchical writes whose path goes through a DUT instance name, found on the
        syntax of stimulus files (the fallback for what the elaboration could not bind);
        ``design`` is the elaboration's root, which still resolves the names it can."""
        instances = self._dut_instance_names()
        if not instances:
            return

        def into_dut(lhs_text: str) -> str | None:
            for part in _lvalue_parts(lhs_text):
                path = [p.strip() for p in re.split(r"\s*\.\s*", re.sub(r"\[[^\]]*\]", "", part))]
                if len(path) < 2:
                    continue
                start = path[1:] if path[0] == "$root" else path
                # uut.x, tb.uut.x (a top module's instance) or $root.tb.uut.x
                through = (start[0] in instances and len(start) > 1) or (len(start) > 2 and start[1] in instances)
                target = self._fallback_target(".".join(start), design) if through else None
                if target is not None:
                    return target
            return None

        def visit(node: Any) -> Any:
            kind = node.kind
            text = None
            what = None
            if kind in _SYNTAX_ASSIGNMENTS:
                text, what = str(node.left), _SYNTAX_ASSIGNMENTS[kind]
            elif kind in _SYNTAX_INCREMENTS:
                text, what = str(node.operand), "assignment"
            elif kind in _SYNTAX_PROCEDURAL:
                # `release x;` / `deassign x;` hold their target as `variable` (reading `expr`
                # raised: a sample with a release and any pyslang error was a sandbox_error)
                target = getattr(node, "expr", None) or node.variable
                text, what = str(target), _SYNTAX_PROCEDURAL[kind]
                if kind in (_SX.ProceduralAssignStatement, _SX.ProceduralForceStatement):
                    text = str(getattr(target, "left", target))
            elif kind == _SX.DefParam:
                for assignment in node.assignments:
                    path = into_dut(str(assignment.name))
                    where = self._in_stimulus(assignment.sourceRange.start)
                    if path and where:
                        self._add("defparam", where, path, f"defparam {path} changes the DUT")
            elif kind == _SX.InvocationExpression:
                name = str(node.left).strip()
                spec = WRITING_SYSTEM_CALLS.get(name)
                if spec is not None and node.arguments is not None:
                    args = [str(a) for a in node.arguments.parameters if isinstance(a.kind, syntax.SyntaxKind)]
                    picked = args[spec:] if isinstance(spec, int) else [args[i] for i in spec if i < len(args)]
                    for arg in picked:
                        path = into_dut(arg)
                        where = self._in_stimulus(node.sourceRange.start)
                        if path and where:
                            self._add("system_task", where, path, f"{name} writes {path}")
            elif kind == _SX.ClockingItem and "out" in str(node.direction):  # output, inout
                for decl in node.decls:
                    value = getattr(decl, "value", None)
                    path = into_dut(str(value.expr)) if value is not None else None
                    where = self._in_stimulus(decl.sourceRange.start)
                    if path and where:
                        self._add("clocking_output", where, path, f"{_VERB['clocking_output']} {path}")
            elif kind in (_SX.HierarchyInstantiation, _SX.PrimitiveInstantiation):
                for text, inst in self._written_connections(node):
                    path = into_dut(text)
                    where = self._in_stimulus(inst.sourceRange.start)
                    if path and where:
                        self._add("port_connection", where, path, f"{_VERB['port_connection']} {path}")
            elif kind == _SX.BindDirective:
                target = str(node.target).strip()
                where = self._in_stimulus(node.sourceRange.start)
                if where and (target in self.design_modules or into_dut(target + ".x")):
                    self._add("bind", where, target, f"bind into the DUT ({target})")
            if text is not None and what is not None:
                path = into_dut(text)
                where = self._in_stimulus(node.sourceRange.start)
                if path and where:
                    self._add(what, where, path, f"{_VERB.get(what, 'writes')} {path}")
            return ast.VisitAction.Advance

        root.visit(visit)

    def _written_connections(self, node: Any) -> list[tuple[str, Any]]:
        """(connection text, instance syntax) of each connection of an instantiation syntax
        that the instance drives: a testbench module's output, inout or ref port (or one of
        unknown direction), a primitive's output or switch terminal; the DUT's own are not."""
        out: list[tuple[str, Any]] = []
        if node.kind == _SX.PrimitiveInstantiation:
            gate = node.type.valueText
            for inst in portnets.items(node.instances):
                terms = [c.expr for c in portnets.items(inst.connections) if c.kind == _SX.OrderedPortConnection]
                out.extend((str(terms[i]), inst) for i in portnets.driven_terminals(gate, len(terms)))
            return out
        type_name = node.type.valueText
        if type_name in self.design_modules:
            return out
        if self.directions is None:
            self.directions = portnets.port_directions(t.root for t in self.trees)
        ports = self.directions.get(type_name)
        for inst in portnets.items(node.instances):
            for _, direction, expr in portnets.connections(inst, ports):
                if direction not in ("input", "interface"):
                    out.append((str(expr), inst))
        return out

    def _fallback_target(self, path: str, design: Any) -> str | None:
        """How the syntax scan reports a write to ``path`` (a hierarchical name as written):
        the DUT path where the elaboration resolves it (None when the symbol is no DUT state:
        an input port of the DUT instance, a testbench signal), else ``path`` itself."""
        for name in (path, *(f"{top.name}.{path}" for top in design.topInstances)):
            symbol = design.lookupName(name)
            if symbol is not None:
                return self._dut_path(symbol)
        return path

    def _dut_instance_names(self) -> set[str]:
        return {
            i
            for n in self.stimulus_names
            for m in self.design_modules
            for i in hdl.instance_names(self.sources.stimulus[n], m)
        }


_GENERIC_KINDS = ("assignment", "nonblocking_assignment")

#: Symbols that hold code and no instance, skipped by the walk when written in a design file
#: (a tuple: pyslang's kinds are Python enums, whose hash a set would call at every symbol).
_CODE_SYMBOLS = (_SK.ProceduralBlock, _SK.ContinuousAssign, _SK.Subroutine)

#: pyslang errors that leave every name bound (no reason for the syntax scan): a design file
#: without `timescale beside a testbench with one, which the simulators accept.
_BINDING_NEUTRAL = frozenset({pyslang.Diags.MissingTimeScale})

_VERB = {
    "force": "forces",
    "release": "releases",
    "procedural_assign": "assign/deassign of",
    "continuous_assign": "continuously assigns",
    "port_connection": "a port of a testbench instance drives",
    "net_alias": "aliases",
    "event_trigger": "triggers",
    "disable": "disables",
    "argument": "an output/ref argument writes",
    "clocking_output": "a clocking block output drives",
    "net_type": "a supply or pull net type drives",
}

#: `line <n> "<file>" <level>, or a `line whose file name is not a literal (a macro).
_LINE_DIRECTIVE = re.compile(r'`line\b[ \t]+\S+[ \t]+(?:"([^"\n]*)"|(`\w+))')

_SYNTAX_ASSIGNMENTS = {
    _SX.AssignmentExpression: "assignment",
    _SX.NonblockingAssignmentExpression: "nonblocking_assignment",
    _SX.AddAssignmentExpression: "assignment",
    _SX.SubtractAssignmentExpression: "assignment",
    _SX.MultiplyAssignmentExpression: "assignment",
    _SX.DivideAssignmentExpression: "assignment",
    _SX.ModAssignmentExpression: "assignment",
    _SX.AndAssignmentExpression: "assignment",
    _SX.OrAssignmentExpression: "assignment",
    _SX.XorAssignmentExpression: "assignment",
    _SX.LogicalLeftShiftAssignmentExpression: "assignment",
    _SX.LogicalRightShiftAssignmentExpression: "assignment",
    _SX.ArithmeticLeftShiftAssignmentExpression: "assignment",
    _SX.ArithmeticRightShiftAssignmentExpression: "assignment",
}
_SYNTAX_INCREMENTS = frozenset(
    {_SX.PostincrementExpression, _SX.PostdecrementExpression}
    | {_SX.UnaryPreincrementExpression, _SX.UnaryPredecrementExpression}
)
_SYNTAX_PROCEDURAL = {
    _SX.ProceduralAssignStatement: "procedural_assign",
    _SX.ProceduralForceStatement: "force",
    _SX.ProceduralDeassignStatement: "procedural_assign",
    _SX.ProceduralReleaseStatement: "release",
}


def _lvalue_parts(text: str) -> list[str]:
    """The parts of a left-hand side's text: a concatenation's operands, else the text."""
    text = text.strip().removeprefix("'")
    if text.startswith("{") and text.endswith("}"):
        return [p for p in re.split(r"[{},]", text) if p.strip()]
    return [text]


def _assign_lhs(expr: Any) -> Any:
    return expr.left if expr is not None and expr.kind == _EK.Assignment else expr


def _writes_outside(sub: Any) -> list[Any]:
    """The symbols a subroutine's body writes that are not its own locals or arguments."""
    written: list[Any] = []

    def visit(node: Any) -> Any:
        kind = getattr(node, "kind", None)
        if kind == ast.StatementKind.ProceduralAssign:
            written.extend(written_symbols(_assign_lhs(node.assignment)))
        elif kind == ast.StatementKind.ProceduralDeassign:
            written.extend(written_symbols(node.lvalue))
        else:
            for lhs, _ in node_writes(node):
                written.extend(written_symbols(lhs))
        return ast.VisitAction.Advance

    sub.visit(visit)
    return [s for s in written if not _declared_within(s, sub)]


def _declared_within(symbol: Any, sub: Any) -> bool:
    return str(symbol.hierarchicalPath).startswith(str(sub.hierarchicalPath) + ".")
