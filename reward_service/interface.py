"""The DUT's interface as an agent sees it: its ports (name, direction, type, width) and
parameters, read from the design with pyslang (the fast path's parser; a server dependency)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from reward_service import hdl

__all__ = ["Port", "Parameter", "Interface", "dut_interface"]


class Port(BaseModel):
    """One port of the DUT module: ``direction`` is ``input``, ``output``, ``inout`` or
    ``ref``; ``type`` as declared after elaboration (``logic[4:0]``); ``width`` in bits (0 when
    the type has no fixed bit width, e.g. an unpacked array)."""

    name: str
    direction: str
    type: str
    width: int


class Parameter(BaseModel):
    """A parameter of the DUT module and its default value (as elaborated, text)."""

    name: str
    value: str


class Interface(BaseModel):
    """The DUT module's name, ports in declaration order, and parameters; ``error`` says why
    the ports could not be read (they are then empty)."""

    module: str | None
    ports: list[Port]
    parameters: list[Parameter]
    error: str | None = None


_DIRECTIONS = {"In": "input", "Out": "output", "InOut": "inout", "Ref": "ref"}


def dut_interface(files: dict[str, str], toplevel: str | None) -> Interface:
    """The interface of module ``toplevel`` (or, when None, of the one module no other design
    file instantiates) among the HDL ``files`` (name -> text). Never raises: a design pyslang
    cannot elaborate gives an :class:`Interface` without ports and with ``error`` set."""
    from pyslang import ast, syntax  # late: the client install has no pyslang

    hdl_files = {n: t for n, t in files.items() if hdl.is_hdl_source(n) and not hdl.is_vhdl(n, t)}
    if toplevel is None:
        tops = hdl.top_modules(list(hdl_files.values()))
        toplevel = tops[0] if len(tops) == 1 else None
    if toplevel is None:
        return Interface(module=None, ports=[], parameters=[], error="no single DUT module among the design files")
    try:
        compilation = ast.Compilation()
        for name, text in hdl_files.items():
            tree = syntax.SyntaxTree.fromText(text, name)
            if any(d.isError() for d in tree.diagnostics):
                return Interface(module=toplevel, ports=[], parameters=[], error=f"{name} does not parse")
            compilation.addSyntaxTree(tree)
        body = _find_body(compilation.getRoot().topInstances, toplevel, ast.SymbolKind.Instance)
        if body is None:
            return Interface(module=toplevel, ports=[], parameters=[], error=f"module {toplevel} not found")
        ports = [
            Port(
                name=p.name,
                direction=_DIRECTIONS.get(p.direction.name, p.direction.name.lower()),
                type=str(p.type),
                width=int(p.type.bitWidth or 0),
            )
            for p in body.portList
            if p.kind == ast.SymbolKind.Port
        ]
        parameters = [Parameter(name=p.name, value=str(p.value)) for p in body.parameters if not p.isLocalParam]
    except Exception as exc:  # pyslang elaboration of arbitrary RTL: report, never fail the reset
        return Interface(module=toplevel, ports=[], parameters=[], error=f"pyslang could not read the ports: {exc}")
    return Interface(module=toplevel, ports=ports, parameters=parameters)


def _find_body(instances: Any, module: str, instance_kind: Any) -> Any:
    """The body of the first instance of ``module`` in a breadth-first walk of the hierarchy
    (the DUT is usually a top; otherwise it is read as its first use elaborates it)."""
    queue = list(instances)
    seen = 0
    while queue and seen < 10_000:
        inst = queue.pop(0)
        seen += 1
        if inst.definition.name == module:
            return inst.body
        queue.extend(m for m in inst.body if m.kind == instance_kind)
    return None
