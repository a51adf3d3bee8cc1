"""The instrumentation framework: DUT files parsed with pyslang, one :class:`ModuleUnit` per
module declaration on which point kinds declare points and insertions, and the applier that
merges every kind's insertions into instrumented source text (see the contract in
:mod:`reward_service.fastcov`).

Insertions are ``(offset, text)`` pairs in the original file. Several may share an offset: a
construct that *ends* there closes before one that *starts* there, inner constructs close
before outer ones and outer ones open before inner ones (so ``if (a) if (b) x;`` gets its inner
``else`` before the outer arm's ``end``). Inserted text holds no newline: the instrumented
file keeps the original line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pyslang import ast, syntax
from pyslang.parsing import Token, TokenKind

from reward_service.errors import RewardServiceError

if TYPE_CHECKING:  # toggle.py builds on this module
    from reward_service.fastcov.toggle import ToggleSignal

PREFIX = "__rs_"
#: The flag file every instrumented module instance appends its lines to (in the run dir).
FLAG_FILE = "rs_fastcov.txt"
#: Verilator's --coverage-max-width default: a signal with more bits (elements x width) has no
#: toggle points.
MAX_WIDTH = 256
#: Stands for the per-run token in instrumented text (see :mod:`reward_service.fastcov.backend`).
TOKEN_PLACEHOLDER = "__RS_FASTCOV_TOKEN__"


def kind_phrase(kind: str, noun: str) -> str:
    """A pyslang kind name as words for a message: ``("ProceduralAssign", "statement")`` ->
    ``a procedural assign statement``; ``Invalid`` (what pyslang binds code it could not
    resolve to) -> ``a statement that does not elaborate``."""
    if kind == "Invalid":
        return f"a {noun} that does not elaborate (pyslang could not resolve it)"
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", kind).lower()
    return f"{'an' if words[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {words} {noun}"


class Unsupported(RewardServiceError):
    """The design (or one construct of it) cannot be instrumented exactly; the message says
    what, and the request falls back to Verilator with it."""


@dataclass(frozen=True)
class PointSpec:
    """A Verilator coverage point as declared by a point kind: its ``coverage.dat`` key
    without the hierarchy (``f`` file, ``l`` line, ``n`` column, ``t`` metric, ``page``
    ``v_<t>/<module>``, ``o`` comment)."""

    metric: str
    file: str
    line: int
    column: int
    comment: str
    module: str

    @property
    def page(self) -> str:
        return f"v_{self.metric}/{self.module}"


@dataclass(frozen=True)
class Flag:
    """A point's 1-bit flag in its module: ``set`` is the statement marking it covered.
    ``scope`` is the generate block the point lives in (0: the module itself)."""

    index: int
    spec: PointSpec
    scope: int = 0

    @property
    def name(self) -> str:
        return f"{PREFIX}f{self.index}"

    @property
    def set(self) -> str:
        return f"{self.name} = 1'b1;"


@dataclass(order=True)
class _Insertion:
    offset: int
    phase: int  # 0: closes a construct ending here, 1: opens one, 2: replaces a token
    depth_key: int  # closing: -depth (inner first); opening: depth (outer first)
    seq: int
    text: str = field(compare=False)
    until: int | None = field(default=None, compare=False)  # replace text[offset:until]
    group: str | None = field(default=None, compare=False)  # see SourceFile.render


@dataclass
class _Wrap:
    """Statements run before/after one procedural statement (it is wrapped once)."""

    start: int
    end: int
    depth: int
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


class SourceFile:
    """One DUT file: its text, pyslang tree and the insertions of every module in it."""

    def __init__(self, name: str, text: str, tree: syntax.SyntaxTree) -> None:
        # The placeholder in the design's own text would be stamped with the run's token like
        # the instrumentation's (backend.prepare, stamp_token): a `$fwrite` of it in the design
        # forges flag lines the reader accepts as this run's.
        if TOKEN_PLACEHOLDER in text:
            raise Unsupported(
                f"{name} holds `{TOKEN_PLACEHOLDER}`, the text the fast path replaces with its per-run coverage token"
            )
        self.name = name
        self.text = text
        self.data = text.encode("utf-8")  # pyslang offsets count bytes
        self.tree = tree
        self.sm = tree.sourceManager
        # the file's own buffer: its first token may come from an included header (a typedef
        # before the module), its last (the end of file, or `endmodule`) does not
        self.buffer = None
        for tok in (tree.root.getFirstToken(), tree.root.getLastToken()):
            loc = self.sm.getFullyExpandedLoc(tok.location) if tok is not None else None
            if loc is not None and not self.sm.isIncludedFileLoc(loc):
                self.buffer = loc.buffer
                break
        self._insertions: list[_Insertion] = []
        self._wraps: dict[tuple[int, int], _Wrap] = {}
        self._seq = 0
        self._nodes: list[Any] | None = None
        self._by_kind: dict[int, list[int]] | None = None

    def nodes(self) -> list[Any]:
        """Every syntax node of the file (:func:`walk` of its root), listed once: the tree does
        not change while insertions are collected, and each emulation pass scans it all."""
        if self._nodes is None:
            self._nodes = nodes_under(self.tree.root)
        return self._nodes

    def of_kind(self, *kinds: Any) -> list[Any]:
        """The nodes of :meth:`nodes` whose kind is one of ``kinds`` (``SyntaxKind`` members),
        in source order. The nodes are indexed by kind once: each emulation pass then visits
        only the nodes it rewrites, where a scan of every node costs ~0.25 µs a node per pass
        (the ``kind`` property and an enum comparison) on each sample's testbench. Keyed by the
        members' ids (they are singletons): an enum's own hash is Python code."""
        if self._by_kind is None:
            index: dict[int, list[int]] = {}
            for i, node in enumerate(self.nodes()):
                key = id(node.kind)
                found = index.get(key)
                if found is None:
                    index[key] = [i]
                else:
                    found.append(i)
            self._by_kind = index
        nodes, index = self.nodes(), self._by_kind
        if len(kinds) == 1:
            return [nodes[i] for i in index.get(id(kinds[0]), ())]
        return [nodes[i] for i in sorted(i for k in kinds for i in index.get(id(k), ()))]

    # -- positions ------------------------------------------------------------------------
    def _file_loc(self, loc: Any) -> Any:
        loc = self.sm.getFullyExpandedLoc(loc)
        # (the buffer of the root's first token is an included file's when the file starts
        # with an `include of code: hence the included-file test too)
        if loc.buffer != self.buffer or self.sm.isIncludedFileLoc(loc):
            raise Unsupported(f"{self.name}: code from an `include'd file is not instrumented")
        return loc

    def line_col(self, loc: Any) -> tuple[int, int]:
        loc = self._file_loc(loc)
        return self.sm.getLineNumber(loc), self.sm.getColumnNumber(loc)

    def offsets(self, node: Any) -> tuple[int, int]:
        """Start and end offsets of a node or token in this file's text. Raises
        :class:`Unsupported` for code expanded from a macro (no place to insert into)."""
        rng = node.range if isinstance(node, Token) else node.sourceRange
        for loc in (rng.start, rng.end):
            if self.sm.isMacroLoc(loc):
                raise Unsupported(
                    f"{self.name}:{self.line_col(loc)[0]}: instrumenting code inside a macro expansion is not supported"
                )
        return self._file_loc(rng.start).offset, self._file_loc(rng.end).offset

    # -- insertions -----------------------------------------------------------------------
    def insert(self, offset: int, text: str, closing: bool, depth: int, group: str | None = None) -> None:
        """Insert ``text`` at ``offset``. Insertions at one offset nest by ``depth`` (the
        syntax node's: an opening of a lower depth goes first, a closing last), then go in
        the order made (statements appended after a node keep their order; so a pass that
        wraps a node another pass wraps too gives its wrapper another depth). ``group``: see
        :meth:`render`."""
        if "\n" in text:
            raise ValueError("inserted text must not contain a newline")
        self._seq += 1
        self._insertions.append(
            _Insertion(offset, 0 if closing else 1, -depth if closing else depth, self._seq, text, group=group)
        )

    def replace(self, node: Any, text: str, group: str | None = None) -> None:
        """Replace a token or node (no insertion may fall strictly inside it)."""
        start, end = self.offsets(node)
        self._seq += 1
        self._insertions.append(_Insertion(start, 2, 0, self._seq, text, until=end, group=group))

    def wrap(self, node: Any, depth: int) -> _Wrap:
        start, end = self.offsets(node)
        key = (start, end)
        if key not in self._wraps:
            self._wraps[key] = _Wrap(start, end, depth)
        return self._wraps[key]

    def apply(self) -> str:
        """The instrumented text: every insertion and wrap merged into the original."""
        items = list(self._insertions)
        seq = self._seq
        for w in self._wraps.values():
            seq += 1
            items.append(_Insertion(w.start, 1, w.depth, seq, "begin " + "".join(t + " " for t in w.before)))
            items.append(_Insertion(w.end, 0, -w.depth, seq, "".join(" " + t for t in w.after) + " end"))
        return self._merge(items, 0, len(self.data))

    def render(self, node: Any, group: str) -> str:
        """The text of ``node`` with the insertions and replacements of ``group`` made so far
        inside it (at its ends too): an emulation pass that copies an expression (an index
        into a range check) copies it as rewritten in place, nested rewrites included."""
        start, end = self.offsets(node)
        items = [
            i
            for i in self._insertions
            if i.group == group and start <= i.offset <= end and (i.until is None or i.until <= end)
        ]
        return self._merge(items, start, end)

    def _merge(self, items: list[_Insertion], start: int, end: int) -> str:
        out, pos = [], start
        for ins in sorted(items):
            if ins.offset < pos:
                raise Unsupported(f"{self.name}: overlapping instrumentation at offset {ins.offset}")
            out.append(self.data[pos : ins.offset])
            out.append(ins.text.encode("utf-8"))
            pos = ins.offset if ins.until is None else ins.until
        out.append(self.data[pos:end])
        return b"".join(out).decode("utf-8")

    def slice(self, node: Any) -> str:
        """The original text of a node or token, whole macro uses included (the text is to be
        compiled again in the same file, where the macros are defined)."""
        rng = node.range if isinstance(node, Token) else node.sourceRange
        start, end = rng.start, rng.end
        while self.sm.isMacroLoc(start):
            start = self.sm.getExpansionRange(start).start
        while self.sm.isMacroLoc(end):
            end = self.sm.getExpansionRange(end).end
        return self.data[self._file_loc(start).offset : self._file_loc(end).offset].decode("utf-8")


def depth(node: Any) -> int:
    """Nesting depth of a syntax node (number of ancestors)."""
    d = 0
    while node is not None:
        node = node.parent
        d += 1
    return d


def ancestors(node: Any):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


class ModuleUnit:
    """One module declaration of the DUT, as point kinds see it (see the package docstring
    for the contract). Built by :mod:`reward_service.fastcov.instrument`."""

    def __init__(
        self,
        source: SourceFile,
        module: syntax.ModuleDeclarationSyntax,
        compilation: Any = None,
        body: Any = None,
        constant_functions: frozenset[str] = frozenset(),
    ) -> None:
        self.source = source
        self.syntax = module
        self.tree = source.tree
        self.file = source.name
        self.name = module.header.name.valueText
        self.compilation = compilation
        self.body = body
        self.constant_functions = constant_functions
        self.flags: list[Flag] = []
        self.scopes: list[Any] = [None]  # generate blocks holding points (index 0: module)
        self._scope_index: dict[tuple[int, int], int] = {}
        self.declarations: list[str] = []
        self.toggles: list[ToggleSignal] = []  # the toggle kind's signals, in flag-line order
        self.tail: list[str] = []  # framework items added before `endmodule`
        self.wrapped_bodies: set[tuple[int, int]] = set()  # generate bodies given `begin : genblkN`
        self._depth0 = depth(module)

    # -- reading ----------------------------------------------------------------------------
    def location(self, node: Any) -> tuple[int, int]:
        """1-based (line, column) of a node's first token or of a token, in the original file
        (a macro expansion is located at its use)."""
        if not isinstance(node, Token):
            node = node.getFirstToken()
        return self.source.line_col(node.location)

    def in_constant_function(self, node: Any) -> bool:
        return any(
            a.kind == syntax.SyntaxKind.FunctionDeclaration
            and a.prototype.name.getLastToken().valueText in self.constant_functions
            for a in ancestors(node)
        )

    # -- points -----------------------------------------------------------------------------
    def add_point(self, metric: str, line: int, column: int, comment: str, anchor: Any) -> Flag:
        spec = PointSpec(metric, self.file, line, column, comment, self.name)
        flag = Flag(len(self.flags), spec, self._scope_of(anchor))
        self.flags.append(flag)
        return flag

    def _scope_of(self, node: Any) -> int:
        """Index of the innermost generate block holding ``node`` (registered on first use)."""
        for a in [node, *ancestors(node)]:
            parent = a.parent
            if parent is None:
                break
            if _is_generate_body(a, parent):
                key = self.source.offsets(a)
                if key not in self._scope_index:
                    self._scope_index[key] = len(self.scopes)
                    self.scopes.append(a)
                return self._scope_index[key]
        return 0

    # -- insertions -------------------------------------------------------------------------
    def append(self, stmt: Any, text: str) -> None:
        self.source.wrap(stmt, depth(stmt)).after.append(text)

    def prepend(self, stmt: Any, text: str) -> None:
        self.source.wrap(stmt, depth(stmt)).before.append(text)

    def add_else(self, if_stmt: Any, text: str) -> None:
        self.insert_after(if_stmt, f" else begin {text} end")

    def insert_before(self, node: Any, text: str) -> None:
        self.source.insert(self.source.offsets(node)[0], text, closing=False, depth=_depth_of(node))

    def insert_after(self, node: Any, text: str) -> None:
        self.source.insert(self.source.offsets(node)[1], text, closing=True, depth=_depth_of(node))

    def declare(self, text: str) -> None:
        self.declarations.append(text)


class PointKind(Protocol):
    """A point kind (see the contract in :mod:`reward_service.fastcov`): the metrics its points
    belong to, and the pass that declares them and their insertions on one module."""

    @property
    def name(self) -> str: ...

    @property
    def metrics(self) -> tuple[str, ...]: ...

    def instrument(self, unit: ModuleUnit) -> None: ...


def _depth_of(node: Any) -> int:
    return depth(node) if not isinstance(node, Token) else 10_000


_K = syntax.SyntaxKind


def _is_generate_body(node: Any, parent: Any) -> bool:
    """Whether ``node`` is the body of a conditional/loop generate construct (a generate
    block that exists in an instance only if its condition/loop selects it)."""
    if parent.kind in (_K.IfGenerate, _K.LoopGenerate):
        return node.kind not in (_K.ElseClause,) and _is_member(node)
    if parent.kind == _K.ElseClause and parent.parent is not None and parent.parent.kind == _K.IfGenerate:
        return _is_member(node)
    if (
        parent.kind in (_K.StandardCaseItem, _K.DefaultCaseItem)
        and parent.parent is not None
        and parent.parent.kind == _K.CaseGenerate
    ):
        return _is_member(node)
    return False


def _is_member(node: Any) -> bool:
    return isinstance(node, syntax.MemberSyntax) or node.kind == _K.GenerateBlock


# -- Verilator's filelines of expressions ---------------------------------------------------
#
# Verilator locates an expression node at the token its grammar rule (verilog.y) passes to the
# node: the operator of a binary/unary expression, `?` of a conditional, `[` of a select, the
# name of a call; parentheses are dropped. Coverage points on expressions (`?:` arms, `expr`
# terms) report that token's line and column.


def verilator_token(expr: Any) -> Any:
    """The token whose position Verilator gives to expression ``expr`` (a pyslang
    ``ExpressionSyntax``)."""
    k = expr.kind
    if k == _K.ParenthesizedExpression:
        return verilator_token(expr.expression)
    if isinstance(expr, syntax.BinaryExpressionSyntax):
        return expr.operatorToken
    if isinstance(expr, (syntax.PrefixUnaryExpressionSyntax, syntax.PostfixUnaryExpressionSyntax)):
        return expr.operatorToken
    if k == _K.ConditionalExpression:
        return expr.question
    if k == _K.ElementSelectExpression:
        return expr.select.openBracket
    if k == _K.IdentifierSelectName:
        return expr.selectors[len(expr.selectors) - 1].openBracket
    if k == _K.ConcatenationExpression:
        exprs = [e for e in expr if isinstance(e, syntax.ExpressionSyntax)]
        if len(exprs) == 1:
            return verilator_token(exprs[0])
        # `{a, b, c}` is Concat(Concat(a, b), c), located at its last comma
        commas = [t for t in expr if isinstance(t, Token) and t.kind == TokenKind.Comma]
        return commas[-1] if commas else expr.openBrace
    if k == _K.MultipleConcatenationExpression:
        return expr.concatenation.openBrace
    if k == _K.InvocationExpression:
        return verilator_token(expr.left)
    return expr.getFirstToken()


def instance_bodies(compilation: Any) -> Iterator[Any]:
    """Every elaborated instance body of ``compilation`` (pyslang ``InstanceBodySymbol``),
    depth first from the top instances, into instantiated generate blocks, generate loops and
    instance arrays. Raises whatever pyslang's elaboration raises."""
    kinds = ast.SymbolKind

    def scan(scope: Any) -> Iterator[Any]:
        for member in scope:
            if member.kind == kinds.Instance:
                yield member.body
                yield from scan(member.body)
            elif member.kind == kinds.InstanceArray:
                yield from scan(member.elements)
            elif member.kind == kinds.GenerateBlock and not member.isUninstantiated:
                yield from scan(member)
            elif member.kind == kinds.GenerateBlockArray:
                for entry in member.entries:
                    yield from scan(entry)

    for top in compilation.getRoot().topInstances:
        yield top.body
        yield from scan(top.body)


def parameter_values(body: Any) -> tuple[tuple[str, str], ...]:
    """``((name, value), ...)`` of an elaborated instance body's value parameters, in order."""
    return tuple((m.name, str(m.value)) for m in body if m.kind == ast.SymbolKind.Parameter)


def other_bodies(unit: ModuleUnit) -> list[Any]:
    """Elaborated bodies of ``unit``'s module other than ``unit.body`` whose parameter values
    differ from it (one per distinct set). Raises :class:`Unsupported` when pyslang's
    elaboration fails (the other sets would be unknown)."""
    if unit.body is None or unit.compilation is None:
        return []
    mine = parameter_values(unit.body)
    found: dict[tuple, Any] = {}
    try:
        for body in instance_bodies(unit.compilation):
            if body.definition.name == unit.name:
                found.setdefault(parameter_values(body), body)
    except Exception as exc:
        raise Unsupported(f"{unit.file}: pyslang cannot elaborate every instance of {unit.name}: {exc}") from exc
    return [b for key, b in found.items() if key != mine]


def nodes_under(node: Any) -> list[Any]:
    """Every syntax node under ``node``, as :func:`walk` lists them (depth first in source
    order, ``node`` itself excluded), collected by pyslang's own traversal (``visit``, which
    calls back for every node and token, ``node`` first): about half the cost of :func:`walk`'s
    Python loop over each node's children, on every sample's testbench."""
    node_type = syntax.SyntaxNode
    found: list[Any] = []
    append = found.append

    def keep(item: Any) -> None:
        if isinstance(item, node_type):
            append(item)

    node.visit(keep)
    return found[1:]  # the first call is for ``node`` itself


def walk(node: Any) -> Iterator[Any]:
    """Every syntax node under ``node`` (pyslang ``SyntaxNode``), depth first in source order,
    ``node`` itself excluded. An explicit stack: a recursive generator costs a frame per level
    for every node it passes up (this walk runs several times per testbench on every sample)."""
    node_type = syntax.SyntaxNode
    stack = [iter(node)]
    while stack:
        for child in stack[-1]:
            if isinstance(child, node_type):
                yield child
                stack.append(iter(child))
                break
        else:
            stack.pop()
