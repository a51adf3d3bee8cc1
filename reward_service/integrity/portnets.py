"""The port-net rule where pyslang's elaboration cannot apply it (docs/integrity.md).

A testbench net that an output port of the DUT instance drives holds the DUT's output value:
its toggle points count what is on that net. Any other driver the testbench puts on it (a
helper module's output or inout port, a gate or pull primitive, a switch, a net declaration
assignment ``wire (supply1, supply0) y = t;``, a ``supply1``/``tri1`` net type, ``assign``,
``force``, a procedural write) is a write of that DUT port.

The elaborated check (``sv.py``) applies the rule on pyslang's bound symbols. This module gives
it what pyslang leaves unbound:

- :func:`port_directions`: each module's, interface's, program's and UDP's ports in order with
  their direction, read from the syntax (for an instance pyslang did not elaborate: an
  ``UninstantiatedDef`` in a generate block whose condition it could not evaluate);
- :func:`port_net_writes`: the syntax-level rule, for the fallback that runs when pyslang
  reports errors (a net used before its declaration, ``h hh(.o(y)); wire y;``, leaves both
  port connections unbound: Icarus and Verilator accept it): in each module of a stimulus
  file, the simple names connected to the DUT instance's output ports, and every write of one
  of those names in the same module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from pyslang import ast, syntax

_SX = syntax.SyntaxKind

#: gate and switch primitives whose every terminal is driven (pulls, bidirectional switches)
_ALL_DRIVEN = frozenset({"pullup", "pulldown", "tran", "rtran", "tranif0", "tranif1", "rtranif0", "rtranif1"})
#: gates with several outputs and one input (the last terminal)
_LAST_IN = frozenset({"buf", "not"})
#: net types that drive the net by themselves (supply) or pull it (tri0/tri1)
DRIVING_NET_TYPES = frozenset({"supply0", "supply1", "tri0", "tri1"})

_DECLARATIONS = (_SX.ModuleDeclaration, _SX.InterfaceDeclaration, _SX.ProgramDeclaration)

Ports = list[tuple[str, str]]  # (name, "input" | "output" | "inout" | "ref" | "")


def items(separated: Any) -> list[Any]:
    return [p for p in separated if isinstance(getattr(p, "kind", None), syntax.SyntaxKind)]


def _direction(token: Any) -> str:
    return getattr(token, "valueText", "") if token is not None else ""


def _module_ports(decl: Any) -> Ports:
    ports_syntax = decl.header.ports
    if ports_syntax is None:
        return []
    if ports_syntax.kind == _SX.AnsiPortList:
        out: Ports = []
        last = "inout"  # IEEE 1800 23.2.2.3: the first port without a direction is inout
        for port in items(ports_syntax.ports):
            if port.kind == _SX.ImplicitAnsiPort:
                header = port.header
                direction = _direction(getattr(header, "direction", None))
                if not direction and header.kind == _SX.InterfacePortHeader:
                    direction = "interface"
                last = direction or last
                out.append((port.declarator.name.valueText, last))
            elif port.kind == _SX.ExplicitAnsiPort:
                last = _direction(port.direction) or last
                out.append((port.name.valueText, last))
        return out
    if ports_syntax.kind == _SX.NonAnsiPortList:
        declared: dict[str, str] = {}
        for member in decl.members:
            if member.kind == _SX.PortDeclaration:
                direction = _direction(getattr(member.header, "direction", None))
                for d in items(member.declarators):
                    declared[d.name.valueText] = direction
        out = []
        for port in items(ports_syntax.ports):
            if port.kind == _SX.ImplicitNonAnsiPort:
                name = str(port.expr).strip()
                out.append((name, declared.get(name, "")))
            elif port.kind == _SX.ExplicitNonAnsiPort:
                inner = str(port.expr).strip() if port.expr is not None else ""
                out.append((port.name.valueText, declared.get(inner, "")))
        return out
    return []


def port_directions(roots: Iterable[Any]) -> dict[str, Ports]:
    """Definition name -> its ports in order, from the syntax of ``roots`` (a UDP: the first
    port is its output, the others inputs)."""
    found: dict[str, Ports] = {}

    def visit(node: Any) -> Any:
        kind = node.kind
        if kind in _DECLARATIONS:
            found.setdefault(node.header.name.valueText, _module_ports(node))
        elif kind == _SX.UdpDeclaration:
            names = [str(p).strip() for p in items(getattr(node.portList, "ports", []))]
            found.setdefault(
                node.name.valueText,
                [(n, "output" if i == 0 else "input") for i, n in enumerate(names)] or [("", "output")],
            )
            return ast.VisitAction.Skip
        return ast.VisitAction.Advance

    for root in roots:
        root.visit(visit)
    return found


def connections(inst: Any, ports: Ports | None) -> list[tuple[str, str, Any]]:
    """(port name, direction, expression syntax or the port name) of each connection of a
    ``HierarchicalInstance``; a port whose direction is not known has direction ''."""
    out: list[tuple[str, str, Any]] = []
    by_name = dict(ports or [])
    for i, conn in enumerate(items(inst.connections)):
        if conn.kind == _SX.OrderedPortConnection:
            name, direction = ports[i] if ports is not None and i < len(ports) else ("", "")
            out.append((name, direction, conn.expr))
        elif conn.kind == _SX.NamedPortConnection:
            name = conn.name.valueText
            expr = conn.expr if conn.openParen is not None and conn.openParen.valueText else name
            out.append((name, by_name.get(name, ""), expr))
        elif conn.kind == _SX.WildcardPortConnection:
            named = {n for n, _, _ in out}
            out.extend((n, d, n) for n, d in (ports or []) if n not in named)
    return out


def driven_terminals(gate: str, count: int) -> range:
    """The indexes (below ``count``) of the terminals a gate or switch primitive ``gate`` drives:
    none of an instance with no terminals (``not verilog;`` is such an instance to pyslang)."""
    if gate in _ALL_DRIVEN:
        return range(count)
    if gate in _LAST_IN:
        return range(min(max(count - 1, 1), count))
    return range(min(count, 1))


def simple_names(text: str, module: str) -> list[str]:
    """The simple names of the module's own signals that a written expression's text names
    (``y``, ``y[3]``, ``{y, z}``, ``tb.y``, ``$root.tb.y``); hierarchical names into instances
    are not the module's nets."""
    text = str(text).strip().removeprefix("'")
    parts = [p for p in re.split(r"[{},]", text) if p.strip()] if text.startswith("{") else [text]
    names = []
    for part in parts:
        path = [p.strip() for p in re.split(r"\s*\.\s*", re.sub(r"\[[^\]]*\]", "", part))]
        if path and path[0] == "$root":
            path = path[1:]
        if len(path) == 2 and path[0] == module:
            path = path[1:]
        if len(path) == 1 and re.fullmatch(r"[A-Za-z_][\w$]*|\\\S+", path[0]):
            names.append(path[0])
    return names


_PROCEDURAL = {
    _SX.ProceduralForceStatement: "force",
    _SX.ProceduralAssignStatement: "procedural_assign",
    _SX.ProceduralReleaseStatement: "release",
    _SX.ProceduralDeassignStatement: "procedural_assign",
}
_ASSIGNMENTS = frozenset(
    {
        _SX.AssignmentExpression,
        _SX.NonblockingAssignmentExpression,
        _SX.AddAssignmentExpression,
        _SX.SubtractAssignmentExpression,
        _SX.MultiplyAssignmentExpression,
        _SX.DivideAssignmentExpression,
        _SX.ModAssignmentExpression,
        _SX.AndAssignmentExpression,
        _SX.OrAssignmentExpression,
        _SX.XorAssignmentExpression,
        _SX.LogicalLeftShiftAssignmentExpression,
        _SX.LogicalRightShiftAssignmentExpression,
        _SX.ArithmeticLeftShiftAssignmentExpression,
        _SX.ArithmeticRightShiftAssignmentExpression,
    }
)
_INCREMENTS = frozenset(
    {
        _SX.PostincrementExpression,
        _SX.PostdecrementExpression,
        _SX.UnaryPreincrementExpression,
        _SX.UnaryPredecrementExpression,
    }
)


def port_net_writes(
    roots: Iterable[Any],
    design_modules: set[str],
    where: Callable[[Any], tuple[str, int] | None],
) -> list[tuple[str, tuple[str, int], str, str]]:
    """The syntax-level port-net rule: ``(kind, (file, line), DUT port path, message)`` for each
    write, in a module declared in a stimulus file (``where`` of its start is not None), of a
    simple name that the module connects to an output port of an instance of a design module
    (the DUT's output net). The DUT's own connections are not writes; a connection to a port of
    unknown direction of another instance is taken as one."""
    roots = list(roots)
    directions = port_directions(roots)
    found: list[tuple[str, tuple[str, int], str, str]] = []

    def scan(decl: Any) -> None:
        module = decl.header.name.valueText
        driven: dict[str, str] = {}  # net name -> DUT port path
        writes: list[tuple[str, Any, str, str]] = []  # kind, node, name, how

        def write(kind: str, node: Any, text: Any, how: str) -> None:
            for name in simple_names(str(text), module):
                writes.append((kind, node, name, how))

        def visit(node: Any) -> Any:
            kind = node.kind
            if kind in _DECLARATIONS and node is not decl:
                return ast.VisitAction.Skip  # a nested declaration is scanned on its own
            if kind == _SX.HierarchyInstantiation:
                type_name = node.type.valueText
                ports = directions.get(type_name)
                dut = type_name in design_modules
                for inst in items(node.instances):
                    iname = inst.decl.name.valueText if inst.decl is not None else ""
                    for port, direction, expr in connections(inst, ports):
                        if dut:
                            if direction == "output":
                                for name in simple_names(str(expr), module):
                                    driven.setdefault(name, f"{module}.{iname}.{port}")
                        elif direction not in ("input", "interface"):
                            write("port_connection", inst, expr, f"port {port} of instance {iname} drives")
            elif kind == _SX.PrimitiveInstantiation:
                gate = node.type.valueText
                for inst in items(node.instances):
                    terms = [c.expr for c in items(inst.connections) if c.kind == _SX.OrderedPortConnection]
                    for i in driven_terminals(gate, len(terms)):
                        write("port_connection", inst, terms[i], f"a {gate} primitive drives")
            elif kind == _SX.NetDeclaration:
                net_type = node.netType.valueText
                for d in items(node.declarators):
                    name = d.name.valueText
                    if d.initializer is not None:
                        writes.append(("continuous_assign", d, name, "a net declaration assignment drives"))
                    if net_type in DRIVING_NET_TYPES:
                        writes.append(("net_type", d, name, f"a {net_type} net type drives"))
            elif kind in _PROCEDURAL:
                assigns = kind in (_SX.ProceduralForceStatement, _SX.ProceduralAssignStatement)
                write(_PROCEDURAL[kind], node, node.expr.left if assigns else node.variable, "")
                if kind in (_SX.ProceduralForceStatement, _SX.ProceduralAssignStatement):
                    node.expr.right.visit(visit)
                    return ast.VisitAction.Skip
            elif kind in _ASSIGNMENTS:
                parent = getattr(node, "parent", None)
                if parent is not None and parent.kind == _SX.ContinuousAssign:
                    write("continuous_assign", node, node.left, "")
                else:
                    nba = kind == _SX.NonblockingAssignmentExpression
                    write("nonblocking_assignment" if nba else "assignment", node, node.left, "")
            elif kind in _INCREMENTS:
                write("assignment", node, node.operand, "")
            elif kind == _SX.NetAlias:
                for net in items(node.nets):
                    write("net_alias", node, net, "")
            elif kind == _SX.ClockingItem and "out" in str(node.direction):
                for d in items(node.decls):
                    value = getattr(d, "value", None)
                    write("clocking_output", d, value.expr if value is not None else d.name.valueText, "")
            return ast.VisitAction.Advance

        decl.visit(visit)
        for kind, node, name, how in writes:
            port = driven.get(name)
            at = where(node.sourceRange.start) if port is not None else None
            if port is not None and at is not None:
                verb = how or "writes"
                found.append((kind, at, port, f"{verb} {name}, which output port {port} drives"))

    def modules(node: Any) -> Any:
        if node.kind in _DECLARATIONS:
            if where(node.sourceRange.start) is not None:
                scan(node)
        return ast.VisitAction.Advance

    for root in roots:
        root.visit(modules)
    return found
