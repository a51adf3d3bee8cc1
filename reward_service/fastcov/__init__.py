"""Fast coverage path: Verilator-equal code coverage at Icarus speed.

The DUT's source files are parsed with pyslang and *instrumented*: a 1-bit flag is set where
Verilator would count a coverage point, and the DUT's signals are sampled for toggles with
Verilator's semantics. The instrumented design runs on Icarus (``iverilog -g2012`` /
``vvp -n``); at every ending of the simulation a ``final`` block of each instrumented module
instance writes its flags (``$finish``, ``$stop``, ``$fatal``, no events left, and the run-time
CPU-time limit, where the sandbox's SIGINT makes vvp finish). The flags are turned into the same
:class:`~reward_service.coverage.points.CoveragePoint` records that
:func:`~reward_service.coverage.verilator_dat.parse_coverage_dat` makes of Verilator's
``coverage.dat`` (metric, file, line, comment ``o``, hierarchy ``h``), one per instance; the
engine keeps the DUT instance's hierarchy and merges identical points of several instances the
way Verilator merges them (:mod:`reward_service.coverage.instances`), so the two diff point by
point.
See ``docs/fastcov.md`` for the point model and the engine choice.

Modules
-------
- :mod:`.unit`: the framework a point kind builds on (:class:`~.unit.ModuleUnit`,
  :class:`~.unit.PointSpec`, :class:`~.unit.Unsupported`) and the insertion applier.
- :mod:`.blocks`: Verilator's ``line`` and ``branch`` points (V3Coverage's block/if/else/elsif/
  case/cond points).
- :mod:`.toggle`: ``toggle`` points (sampling of ports and module-level signals).
- ``expr*``: Verilator's ``expr`` points (its own author; picked up when present).
- :mod:`.emulate`: rewrites that make Icarus simulate like Verilator (2-state, zero-initialised,
  combinational logic at time 0, IEEE generate block names, ending markers).
- :mod:`.instrument`: runs every point kind over a design and writes the instrumented files.
- :mod:`.results`: reads the flags the simulation wrote into per-instance coverage points.
- :mod:`.backend`: the fast path as a simulator backend (sandboxed Icarus, SV and cocotb).
- :mod:`.routing`: ``engine=fast``/``auto`` in the engine: fallback to Verilator, shadow check.
- :mod:`.choice`: ``engine=auto``'s per-design decision (instrumentation + self-check).
- :mod:`.compare`: point-by-point diff of two runs.

Extension contract for a point kind (e.g. ``expr``, in ``reward_service/fastcov/expr*.py``)
---------------------------------------------------------------------------------------------
A point kind is an object with

- ``name: str`` (e.g. ``"expr"``) and ``metrics: tuple[str, ...]`` (the Verilator point types
  ``t`` it produces, e.g. ``("expr",)``);
- ``instrument(unit: ModuleUnit) -> None``, called once per module declaration of the DUT
  (modules of the DUT files only; the testbench is never instrumented).

and is listed in :data:`reward_service.fastcov.instrument.KINDS` (the ``expr`` kind is picked up
from ``reward_service.fastcov.expr`` when that module exists and defines ``KIND``).

``instrument`` reads the module through the :class:`~.unit.ModuleUnit` and declares points and
source insertions on it; it never edits text itself. What a :class:`~.unit.ModuleUnit` offers:

- ``unit.syntax`` (pyslang ``ModuleDeclarationSyntax``), ``unit.tree`` (its ``SyntaxTree``),
  ``unit.file`` (the DUT file name as the request gives it, Verilator's ``f`` key),
  ``unit.name`` (the module name; Verilator's ``page`` is ``v_<type>/<name>``),
  ``unit.compilation`` (a pyslang ``ast.Compilation`` of all DUT files) and ``unit.body``
  (an elaborated ``InstanceBodySymbol`` of this module with the parameters of its first
  instance in the DUT, or ``None`` when slang could not elaborate it).
- ``unit.location(node_or_token) -> (line, column)``: 1-based, in the original file, as
  Verilator reports them (code expanded from a macro is located at the macro's use).
- ``unit.add_point(metric, line, column, comment, anchor) -> Flag``: one coverage point whose
  key is (``unit.file``, line, column, metric, page, comment). ``anchor`` is the syntax node
  the point belongs to (its enclosing generate blocks decide whether the point exists in an
  instance). ``Flag.set`` is the Verilog statement that marks the point covered
  (e.g. ``"__rs_f12 = 1'b1;"``); a kind puts it where Verilator increments the point.
- ``unit.append(stmt, text)`` / ``unit.prepend(stmt, text)``: run statement text right after /
  before procedural statement ``stmt`` in the same procedural context (the framework wraps
  ``stmt`` in ``begin ... end`` once, however many kinds append to it); ``unit.add_else(if_stmt,
  text)``: give an ``if`` without ``else`` an ``else`` arm running ``text``;
  ``unit.insert_before(node, text)`` / ``unit.insert_after(node, text)``: raw insertions
  (ordered so that constructs ending at the same offset close inner-first).
- ``unit.declare(text)``: a module-level item (declaration, ``always``) added after the header.
- ``unit.in_constant_function(node) -> bool``: whether ``node`` lies in a function that is also
  evaluated at elaboration (Icarus forbids writing module variables there; the framework runs
  a flag-free copy at elaboration, so kinds simply instrument the function).
- Raise :class:`~.unit.Unsupported` with a short reason when the module cannot be instrumented
  exactly; the request then falls back to Verilator with that reason.

Rules: inserted text holds no newline (line numbers of the DUT stay those of the original, so
simulator messages match); identifiers a kind declares start with ``__rs_<kind name>_``; a
kind never reads or sets another kind's flags. Points are reported with Verilator's ``o``
comment exactly as its ``coverage.dat`` writes it; the framework adds ``h`` (the instance
path from ``%m``) and merges identical points of several instances.
"""

from reward_service.fastcov.unit import Flag, ModuleUnit, PointSpec, Unsupported

__all__ = ["Flag", "ModuleUnit", "PointSpec", "Unsupported"]
