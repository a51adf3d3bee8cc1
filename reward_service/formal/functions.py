"""Coverage points inside functions in the formal model (issue 23).

Yosys inlines a function at each call, so a flag a function body sets would be driven by
every process that calls it (conflicting drivers). And a point inside a function is not only
reached through the design's calls: a testbench may call a pure DUT function itself
(``dut.f(4'b0001)``, allowed by the integrity policy), and Verilator and the fast path count
the function's points then (tests/test_formal_functions.py). So a function whose points are
modelled (:func:`modelled_functions`: at module level, ``input`` arguments and an integral
result, no ``return``, reading only its arguments, its own variables, each written before it
is read, parameters and other such functions) gets, in the final model text
(:func:`rewrite`):

- in place, its body with the flags renamed to a local variable (``__rs_fd``): the design's
  own calls evaluate as before and set no module flag;
- for proofs, one copy ``<f>__rs_tb`` that sets the flags, called in an ``always @(*)`` with
  undriven (free at every step) arguments: the testbench's own call with any arguments. A
  point is proved unreachable only when no argument value reaches it, which bounds every call
  (the design's calls included);
- for the witness search, one copy ``<f>__rs_c<k>`` per call ``k`` of the design in a place
  the model handles (a procedure or continuous assignment outside generate constructs, not
  where an asynchronous control's reset arm would run it), with flags of its own; each point's
  signal is the OR of its copies' flags. The search drives ports only, so the free arguments
  are not in this model; a witness counts only once replayed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pyslang import ast, syntax

from reward_service import hdl
from reward_service.fastcov.unit import ModuleUnit, ancestors

_K = syntax.SyntaxKind
_S = ast.SymbolKind

#: System functions a modelled function may call (pure, no state).
_PURE_SYSTEM = {"$clog2", "$signed", "$unsigned", "$bits", "$size", "$countones", "$onehot", "$onehot0"}
_GENERATE = (_K.GenerateBlock, _K.LoopGenerate, _K.IfGenerate, _K.CaseGenerate)
#: The local variable a function's flag statements set in the design's own calls.
DUMMY = "__rs_fd"


@dataclass
class Function:
    name: str
    span: tuple[int, int]  # source offsets of the declaration in the original text
    args: list[int]  # argument widths
    result: int
    flags: list[str] = field(default_factory=list)  # the model's (renamed) flag names set in it


def _nodes(node: Any):
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            yield child
            yield from _nodes(child)


def _tokens(node: Any):
    for child in node:
        if child is None:
            continue
        if isinstance(child, syntax.SyntaxNode):
            yield from _tokens(child)
        elif getattr(child, "rawText", ""):
            yield child


def _span(node: Any) -> tuple[int, int]:
    rng = node.sourceRange
    return (rng.start.offset, rng.end.offset)


def modelled_functions(unit: ModuleUnit) -> tuple[dict[str, Function], list[str]]:
    """The module-level functions of ``unit`` whose points the model handles (name -> info)
    and notes on the others."""
    decls = {
        m.prototype.name.identifier.valueText: m
        for m in unit.syntax.members
        if m.kind == _K.FunctionDeclaration and m.prototype.name.kind == _K.IdentifierName
    }
    notes: list[str] = []
    verdict: dict[str, str | None] = {}

    def why(name: str) -> str | None:
        if name not in verdict:
            verdict[name] = "recursive"  # while it is being judged
            verdict[name] = _why_not(unit, decls[name], name, decls, why)
        return verdict[name]

    result = {}
    for name, node in decls.items():
        reason = why(name)
        if reason is None and unit.body is not None:
            sym = unit.body.find(name)
            result[name] = Function(
                name, _span(node), [a.type.bitWidth for a in sym.arguments], sym.returnType.bitWidth
            )
        elif reason is not None:
            notes.append(f"{unit.file}: function {name}: {reason}")
    return result, notes


def _why_not(unit: ModuleUnit, node: Any, name: str, decls: dict[str, Any], why: Any) -> str | None:
    if unit.body is None:
        return "module not elaborated"
    sym = unit.body.find(name)
    if sym is None or sym.kind != _S.Subroutine or sym.subroutineKind != ast.SubroutineKind.Function:
        return "not found"
    if sym.returnType.isVoid or not sym.returnType.isIntegral:
        return "its result is not an integral value"
    if any(a.direction != ast.ArgumentDirection.In or not a.type.isIntegral for a in sym.arguments):
        return "an argument that is not an integral input"
    for tok in _tokens(node):
        if tok.rawText == "return":
            return "a return statement"
        if tok.rawText.startswith("$") and tok.rawText not in _PURE_SYSTEM:
            return f"calls {tok.rawText}"
    local = {name}
    for n in _nodes(node):
        if n.kind == _K.Declarator:
            local.add(n.name.valueText)
            if n.initializer is not None and n.parent.parent is not node.prototype:
                return "a variable with an initializer (static: set once)"
    args = {a.name for a in sym.arguments}
    first: dict[str, Any] = {}
    for n in _nodes(node):
        if n.kind not in (_K.IdentifierName, _K.IdentifierSelectName):
            continue
        ident = n.identifier.valueText
        if ident in local:
            first.setdefault(ident, n)
            continue
        other = unit.body.find(ident)
        if other is not None and other.kind in (_S.Parameter, _S.EnumValue, _S.TypeAlias):
            continue
        if other is not None and other.kind == _S.Subroutine and ident in decls:
            if why(ident) is None:
                continue
            return f"calls {ident}, which is not modelled"
        return f"reads or writes `{ident}`, which is not its own"
    for ident, n in first.items():
        if ident not in args and n is not node.prototype.name and not _written(n):
            return f"reads `{ident}` before writing it (a static variable keeps its value)"
    return None


def _written(ident: Any) -> bool:
    """Whether the name node ``ident`` is (part of) the left side of an assignment."""
    child = ident
    for node in ancestors(ident):
        if node.kind in (
            _K.AssignmentExpression,
            _K.NonblockingAssignmentExpression,
        ) or node.kind.name.endswith("AssignmentExpression"):
            return child is node.left
        child = node
    return False


def allowed_spans(functions: dict[str, Function]) -> set[tuple[int, int]]:
    return {f.span for f in functions.values()}


def rewrite(text: str, module: str, functions: dict[str, Function], witness: bool, tag: str, call_ok: Any) -> str:
    """The final model text with the functions of ``module`` that set flags rewritten (module
    docstring). ``call_ok(node)``: whether a call's place is modelled (None: it is)."""
    flagged = {n: f for n, f in functions.items() if f.flags}
    if not flagged:
        return text
    tree = syntax.SyntaxTree.fromText(text)
    root: Any = tree.root
    mods = [root] if root.kind == _K.ModuleDeclaration else list(getattr(root, "members", []))
    mod: Any = next(m for m in mods if m.kind == _K.ModuleDeclaration and m.header.name.valueText == module)
    decls = {
        m.prototype.name.identifier.valueText: m
        for m in mod.members
        if m.kind == _K.FunctionDeclaration and m.prototype.name.kind == _K.IdentifierName
    }
    raw = text.encode()  # pyslang's offsets count bytes
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), byte offsets
    decl_text: list[str] = []
    calls: dict[str, list[Any]] = {n: [] for n in flagged}
    for n in _nodes(mod):
        if n.kind == _K.InvocationExpression and n.left.kind == _K.IdentifierName:
            callee = n.left.identifier.valueText
            if callee in calls and not any(
                a.kind in (_K.FunctionDeclaration, _K.TaskDeclaration) for a in ancestors(n)
            ):
                calls[callee].append(n)
    for fi, (name, fn) in enumerate(sorted(flagged.items())):
        node = decls[name]
        start, end = _span(node)
        body = raw[start:end].decode()
        flag_re = re.compile(r"\b(" + "|".join(map(re.escape, fn.flags)) + r")\b")
        name_re = re.compile(r"\b" + re.escape(name) + r"\b")
        semi = len(raw[start : node.semi.location.offset + 1].decode())
        # in place: the design's own calls set a local instead of the module's flags
        inplace = flag_re.sub(DUMMY, body)
        inplace = inplace[:semi] + f" reg {DUMMY};" + inplace[semi:]
        one_line = hdl.strip_comments_only(body).replace("\n", " ")
        copies = []
        if witness:
            sites = [c for c in calls[name] if call_ok(c) is None]
            for k, call in enumerate(sites):
                copy = f"{name}__rs_c{k}"
                copies.append(flag_re.sub(rf"\1_c{k}", name_re.sub(copy, one_line)))
                tok = call.left.identifier
                edits.append((tok.location.offset, tok.location.offset + len(tok.rawText), copy))
            for flag in fn.flags:
                per_site = [f"{flag}_c{k}" for k in range(len(sites))]
                if per_site:
                    decl_text.append("(* keep *) reg " + ", ".join(f"{p} = 1'b0" for p in per_site) + ";")
                value = " | ".join(per_site) or "1'b0"
                decl_text.append(f"(* keep *) wire {flag} = {value};")
        else:
            copy = f"{name}__rs_tb"
            copies.append(name_re.sub(copy, one_line))
            decl_text.append("(* keep *) reg " + ", ".join(f"{f} = 1'b0" for f in fn.flags) + ";")
            args = [f"__rs_ta{tag}{fi}_{i}" for i in range(len(fn.args))]
            decl_text.extend(f"wire [{w - 1}:0] {a};" for a, w in zip(args, fn.args))
            sink = f"__rs_ts{tag}{fi}"
            decl_text.append(f"reg [{fn.result - 1}:0] {sink}; always @(*) {sink} = {copy}({', '.join(args)});")
        edits.append((start, end, inplace + " " + " ".join(copies)))
    header_end = mod.header.semi.location.offset + 1
    edits.append((header_end, header_end, " " + " ".join(decl_text)))
    for s, e, r in sorted(edits, key=lambda x: x[0], reverse=True):
        raw = raw[:s] + r.encode() + raw[e:]
    return raw.decode()


def in_generate(node: Any) -> bool:
    return any(a.kind in _GENERATE for a in ancestors(node))
