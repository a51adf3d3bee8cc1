"""Prepare: resolve a request's problem and completion text to concrete files, check them, and
find the testbench top (the first stage of :mod:`reward_service.scoring`).

Everything here raises :class:`~reward_service.scoring.types.InvalidInput` (or
:class:`~reward_service.completion.ExtractionError`, or ``pydantic.ValidationError`` when a
problem and the request's fields do not combine) for input that cannot be simulated.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from reward_service import hdl
from reward_service.completion import extract
from reward_service.engine_choice import choose_engine
from reward_service.models import CocotbStimulus, Completion, Design, ScoreRequest, SvTestbench
from reward_service.problems.resolve import resolve_request
from reward_service.scoring.types import InvalidInput, Prepared


def prepare(request: ScoreRequest, problems: Mapping[str, Any]) -> Prepared:
    """Resolve problem id (``problems`` maps ids to problems, see
    :func:`~reward_service.problems.resolve.resolve_request`), completion text and the testbench
    top; check the inputs. Raises :class:`InvalidInput`, ``ExtractionError`` or
    ``pydantic.ValidationError``."""
    if request.problem_id is not None:
        problem = problems.get(request.problem_id)
        if problem is None:
            raise InvalidInput(f"unknown problem_id {request.problem_id!r}")
        request = resolve_request(request, problem)
    design = request.design
    assert design is not None
    design_modules = {m for text in design.files.values() for m in hdl.module_names(text)}
    stimulus, extraction = request.stimulus, None
    if isinstance(stimulus, Completion):
        extraction = extract(stimulus.text, toplevel=design.toplevel, design_modules=design_modules)
        stimulus = extraction.stimulus
    try:
        prepared = check(request, design, stimulus, design_modules)
    except InvalidInput as exc:
        if extraction is None:
            raise
        named = InvalidInput(f"{exc} (scored {extraction.description})")
        named.stimulus_block = extraction.description
        raise named from exc
    prepared.extraction = extraction
    return prepared


def check(
    request: ScoreRequest, design: Design, stimulus: SvTestbench | CocotbStimulus, design_modules: set[str]
) -> Prepared:
    """Check a resolved request's files and find the testbench top (:func:`prepare`'s second
    half). Raises :class:`InvalidInput`."""
    notes: list[str] = []
    _check_sources(design.files, "design")
    _check_sources(stimulus.files, "stimulus")
    _check_layout(list(design.files) + list(stimulus.files))
    _screen_stimulus(stimulus)
    dirs = hdl.search_dirs([*design.files, *stimulus.files], request.build.include_dirs)
    for name, macros in hdl.design_macros_set_by(dict(stimulus.files), dict(design.files), dirs).items():
        # the included design file is preprocessed after the stimulus's text: its macros would
        # change the DUT (a width, say) and so its coverage
        raise InvalidInput(
            f"the stimulus `includes design file {name!r} and sets macro(s) "
            f"{', '.join(macros)} that it reads, which would change the DUT; set "
            "design macros with build.defines (CLI --define) instead"
        )
    shadow = _design_includes_of_stimulus(design.files, stimulus.files, dirs)
    if shadow:
        # simulators search the include dirs in different orders (and Icarus its cwd, the root):
        # one could compile the stimulus's file into the DUT where another compiles the design's
        raise InvalidInput(
            f'design file {shadow[0]!r} includes "{shadow[1]}", which could resolve to stimulus file '
            f"{shadow[2]!r}: rename the stimulus file (a design's `include must name design files only)"
        )
    if isinstance(stimulus, SvTestbench):
        stim_texts = [t for n, t in stimulus.files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)]
        top = stimulus.top or hdl.choose_top(stim_texts, design_modules)
        if top is None:
            raise InvalidInput("the testbench declares no top module (a module that nothing instantiates)")
        if not stimulus.top:
            candidates = [t for t in hdl.top_modules(stim_texts) if t not in design_modules]
            if len(candidates) > 1:
                notes.append(
                    f"the testbench has {len(candidates)} top module candidates (modules nothing instantiates: "
                    f"{', '.join(candidates)}): simulated `{top}` (set stimulus.top / --top to choose)"
                )
        if not any(top in hdl.module_names(t) for t in stim_texts):
            raise InvalidInput(f"testbench top module {top!r} is not declared in the stimulus files")
        stimulus = stimulus.model_copy(update={"top": top})
        scope = request.coverage.scope
        if scope:
            scope = _check_scope(scope, top, stim_texts, list(design.files.values()), design_modules)
            if scope != request.coverage.scope:
                request = request.model_copy(update={"coverage": request.coverage.model_copy(update={"scope": scope})})
    else:
        toplevel = stimulus.toplevel or design.toplevel
        if not toplevel:
            raise InvalidInput("cocotb stimulus needs a HDL toplevel (stimulus.toplevel or design.toplevel)")
        if toplevel not in design_modules:
            raise InvalidInput(f"HDL toplevel {toplevel!r} is not a module of the design")
        on_icarus = choose_engine(request.simulator.value, request.engine).on_icarus
        if f"{stimulus.test_module}.py" not in stimulus.files:
            raise InvalidInput(f"test_module {stimulus.test_module!r} has no file {stimulus.test_module}.py")
        stimulus = stimulus.model_copy(update={"toplevel": toplevel})
        if stimulus.runtime != "cocotb-2.1" and not on_icarus:
            request, note = _keep_cocotb19_on_icarus(request, stimulus)
            if note:
                notes.append(note)
    return Prepared(request=request, design=design, stimulus=stimulus, notes=notes)


def _keep_cocotb19_on_icarus(request: ScoreRequest, stimulus: CocotbStimulus) -> tuple[ScoreRequest, str | None]:
    """A cocotb test that runs on cocotb 1.9 (``runtime`` cocotb-1.9, or ``auto`` finding 1.x
    idioms, ``cocotb_runtime.detect``) requested on Verilator (``engine`` verilator, unset on
    the Verilator simulator, or auto): the request moved to the fast path (Icarus, Verilator's
    points), where the 1.9 runtime runs, and the note saying so; the runtime choice is then the
    same on every engine (on Verilator cocotb 2.1 would run it, and a 1.x test dies there:
    ``cocotb.fork``). Other requests are returned as they are, without a note."""
    from reward_service.simulators import cocotb_runtime

    if stimulus.runtime == cocotb_runtime.COCOTB_19:
        why = "the request names the cocotb 1.9 runtime"
    else:
        detection = cocotb_runtime.detect({n: t for n, t in stimulus.files.items() if n.endswith(".py")})
        if detection.runtime != cocotb_runtime.COCOTB_19:
            return request, None
        why = f"the test uses cocotb 1.x ({detection.reason()})"
    asked = request.engine or "verilator"
    note = (
        f"engine {asked} asked: moved to the fast path (Icarus, Verilator's coverage points) since "
        f"{why} and the cocotb 1.9 runtime runs on Icarus only"
    )
    return request.model_copy(update={"engine": "fast"}), note


_GENERATE_LABEL = r"\bbegin\s*:\s*{}\b"


def _design_includes_of_stimulus(
    design: Mapping[str, str], stimulus: Mapping[str, str], dirs: list[str]
) -> tuple[str, str, str] | None:
    """The first (design file, `include name, stimulus file) where a design file's `include
    could resolve both to a design file and to a stimulus file (beside the design file, at the
    root, a simulator's cwd, or in any search dir, whatever the order): the stimulus's file
    would shadow the design's on some simulator. None when there is none. A header only the
    stimulus gives (the design expects it from the testbench) is no shadow."""
    for name, text in design.items():
        if not name.lower().endswith(hdl.HDL_SUFFIXES):
            continue
        for target in hdl.include_targets(text):
            candidates = [posixpath.normpath(posixpath.join(b, target)) for b in (posixpath.dirname(name), "", *dirs)]
            if not any(c in design for c in candidates):
                continue
            for candidate in candidates:
                if candidate in stimulus:
                    return name, target, candidate
    return None


def _check_scope(scope: str, top: str, stim_texts: list[str], design_texts: list[str], design_modules: set[str]) -> str:
    """The DUT scope ``scope`` (an instance name, or a path below the testbench top through
    instances and generate blocks: ``u_wrap.dut``, ``l_functional.DUT``; a leading
    ``<top>.`` is dropped) after checking that each part is an instance or generate block of
    the testbench or the design; the elaborated hierarchy decides in the end (measure). Raises
    :class:`InvalidInput` naming the part not found and the DUT instances that exist."""
    parts = scope.split(".")
    if len(parts) > 1 and parts[0] == top:
        parts = parts[1:]
    texts = [hdl.strip_comments(t) for t in [*stim_texts, *design_texts]]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if any(hdl.instantiates(t, None, part) for t in texts):
            continue
        if not last and any(re.search(_GENERATE_LABEL.format(re.escape(part)), t) for t in texts):
            continue
        found = sorted({n for t in stim_texts for m in design_modules for n in hdl.instance_names(t, m)})
        hint = f" (found instance(s): {', '.join(found)})" if found else " (no DUT instance found)"
        where = "" if len(parts) == 1 else f": no instance or generate block `{part}`"
        raise InvalidInput(
            f"the testbench must instantiate the DUT as `{scope}`{hint}{where}; a DUT below the top "
            f"`{top}` is named by its path of instances and generate blocks, e.g. u_wrap.dut"
        )
    return ".".join(parts)


def _check_layout(names: list[str]) -> None:
    """All files go into one source dir: no two may share a name, and no name may be a
    directory of another (``a.sv`` and ``a.sv/tb.sv``)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"two files are named {name!r} (design and stimulus share one directory)")
        seen.add(name)
    dirs = {str(parent) for name in names for parent in PurePosixPath(name).parents if str(parent) != "."}
    both = sorted(dirs & seen)
    if both:
        raise InvalidInput(f"{both[0]!r} is both a file and a directory of other files")


#: Names the simulation's own outputs take in its cwd (Verilator's rs_main, cocotb, the fast
#: path): a data file may not stand there before the run.
_RESERVED_RUN_NAMES = ("coverage.dat", "results.xml")


def _check_sources(files: Mapping[str, str], what: str) -> None:
    """Each file is HDL, cocotb Python or a data file (hdl.DATA_SUFFIXES, text, copied into the
    simulation's cwd and never compiled). Raises :class:`InvalidInput`."""
    for name, text in files.items():
        if hdl.is_data_file(name):
            if name in _RESERVED_RUN_NAMES or name.startswith("rs_"):
                raise InvalidInput(
                    f"{what} data file {name!r}: the name is one of the simulation's own "
                    "outputs in its run dir (rename it or put it in a folder)"
                )
            continue  # an empty data file is a valid (empty) input
        if hdl.is_vhdl(name, text):
            raise InvalidInput(
                f"{what} file {name!r} is VHDL: only Verilog/SystemVerilog (and cocotb Python) are supported"
            )
        if not text.strip() and PurePosixPath(name).name != "__init__.py":
            # an empty package marker is ordinary Python (a cocotb helper package)
            raise InvalidInput(f"{what} file {name!r} is empty")
        if not name.lower().endswith(hdl.HDL_SUFFIXES + (".py",)):
            raise InvalidInput(
                f"{what} file {name!r}: unsupported file type (expected .v/.sv/.vh/.svh, "
                f".py, or a data file: {' '.join(hdl.DATA_SUFFIXES)})"
            )


#: SV constructs that run host code inside the simulator process (Verilator's inline C++ and
#: DPI imports of libc): with them a testbench could forge its own coverage record and exit.
#: Matched on comment- and string-stripped text, where a DPI import reads `import ""`.
_SV_HOST_CODE = re.compile(r"\$c(?:pure)?\d*\s*\(|\b(?:import|export)\s+\"\"")
#: cocotb code that touches the scorer's own outputs or leaves the simulator abruptly.
_COCOTB_TAMPER = re.compile(r"coverage\.dat|rs_fcov|rs_end|results\.xml|\bctypes\b|\bos\._exit\b|/proc/self")


def _screen_stimulus(stimulus: SvTestbench | CocotbStimulus) -> None:
    """Refuse stimulus that could tamper with its own coverage measurement (reward hacking).
    Raises :class:`InvalidInput` naming the construct."""
    for name, text in stimulus.files.items():
        if isinstance(stimulus, SvTestbench) or not name.endswith(".py"):
            m = _SV_HOST_CODE.search(hdl.strip_comments(text))
            if m:
                what = "a DPI import" if m.group(0).startswith(("import", "export")) else f"`{m.group(0)}`"
                raise InvalidInput(
                    f"{name}: {what} runs host code inside the simulator (Verilator $c / "
                    "DPI); stimulus may not use it, it could forge coverage"
                )
        else:
            m = _COCOTB_TAMPER.search(text)
            if m:
                raise InvalidInput(
                    f"{name}: the test refers to `{m.group(0)}`, which touches the scorer's "
                    "own outputs or ends the simulator abruptly; refused (it could forge coverage)"
                )
