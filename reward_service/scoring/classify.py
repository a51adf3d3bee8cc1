"""Classify: the status and message of a simulation run (the sample's fault, a limit, or ok
with notes), from the sandbox result and what the simulator reported."""

from __future__ import annotations

import re

from reward_service import hdl
from reward_service.models import Status, TestOutcome
from reward_service.sandbox import ExecResult
from reward_service.simulators.base import SimRun


def classify(
    run: SimRun, runres: ExecResult, sim_name: str, has_cov: bool, tests: list[TestOutcome], run_s: float
) -> tuple[Status, str]:
    """The status and message of a simulation that built: resource limits, timeout, no test
    run, crash without coverage, runtime error, signal, else ``ok`` with notes on how it ended
    (``$stop``/``$fatal``, failed cocotb tests, error lines in the log). ``runres``: the run
    step's sandbox result; ``has_cov``: code coverage data exists; ``run_s``: the run-time
    limit in CPU seconds."""
    if runres.output_flood:
        return (
            Status.resource_limit,
            f"output flood: more than {runres.output_bytes // (1 << 20)} MiB written to stdout/stderr",
        )
    if runres.oom:
        return Status.resource_limit, "memory limit exceeded (the simulation was killed)"
    if runres.pids_exhausted:
        return Status.resource_limit, "process limit exceeded (fork bomb?)"
    if runres.waited:
        return Status.timeout, (
            f"the simulation waited without using its {run_s:g} CPU-second run-time budget, asleep, and "
            f"was ended after {runres.duration_ms / 1000:.0f} s of wall clock: it slept or waited on nothing "
            "(a cocotb test in time.sleep, a blocking read); coverage up to the kill is reported for information"
        )
    if runres.timed_out or run.ended_by == "timeout":
        hint = "" if tests else " (does the testbench end with $finish?)"
        return Status.timeout, (
            f"the simulation used up its {run_s:g} CPU-second run-time limit{hint}; coverage "
            "up to the kill is reported for information"
        )
    if _file_too_large(runres) or run.ended_by == "file_size":
        return Status.resource_limit, "a file written by the simulation exceeded the file-size limit"
    if run.not_run is not None:  # a cocotb run that ran no test: nothing the stimulus did is measured
        return run.not_run
    if sim_name in ("verilator", "fast") and not has_cov and run.results_xml is None:
        return Status.runtime_error, (
            f"the simulation crashed without coverage data (exit {runres.exit_code}): {first_error(runres.output)}"
        )
    if run.ended_by == "error":
        return Status.runtime_error, (
            f"simulator runtime error: {first_error(runres.output)} "
            "(coverage up to the error is reported for information)"
        )
    if runres.exit_code is not None and runres.exit_code < 0:
        return Status.runtime_error, f"the simulation was killed by signal {-runres.exit_code}"
    ended = {
        "stop": "ended by $stop",
        "fatal": "ended by $fatal",
        "no_events": "ended with no events left (no $finish)",
        "sim_ended_early": "the HDL ended the simulation while the cocotb test was running",
    }
    notes = [ended.get(run.ended_by or "", "")]
    failed = [t for t in tests if not t.passed]
    if failed:
        notes.append(f"{len(failed)} of {len(tests)} cocotb tests failed")
    errors, total = _error_lines(runres.output)
    if errors:
        notes.append(f"the log reports {total} error line(s), first: {errors[0]}")
    return Status.ok, "; ".join(n for n in notes if n)


#: A tool's report of its own bug at build time, anchored at the tool's own line starts (a
#: quoted source line or an elaboration-time ``$error`` begins otherwise, so a sample cannot
#: print one): Verilator's ``%Error: Internal Error:`` (V3Error's fatal for a broken internal
#: invariant) and an assertion of Icarus' compiler (``ivl: file.cc:12: ...: Assertion ... failed``).
_TOOL_INTERNAL_ERROR = re.compile(
    r"^%Error: Internal Error: [^\n]*|^(?:ivl|vvp|\S*/ivl): [^\n]*Assertion [^\n]* failed\.?[^\n]*", re.M
)


def tool_internal_error(build_log: str) -> str | None:
    """The first line of a build log in which a tool reports its own internal error (at most
    500 characters), else None. Such a build failed on our tools, not on the sample: the
    caller reports a ``sandbox_error`` (never the sample's cached compile_error)."""
    m = _TOOL_INTERNAL_ERROR.search(build_log)
    return m.group(0).strip()[:500] if m else None


def _file_too_large(runres: ExecResult) -> bool:
    """Whether SIGXFSZ ended the step (a file over the file-size limit): its exit status only,
    never a line of its output, which the testbench writes (``$display("File size limit
    exceeded")`` was an uncached resource_limit; attacker review 12-05). A cocotb run's
    simulator is the driver's child: its status file says (``ended_by == "file_size"``)."""
    return runres.exit_code in (-25, 128 + 25)


def first_error(log_text: str) -> str:
    """The first error line of a tool's log (at most 500 characters), else its last line."""
    for line in log_text.splitlines():
        low = line.lower()
        if "%error" in low or ": error" in low or "syntax error" in low or low.startswith("error"):
            return line.strip()[:500]
    lines = [line for line in log_text.splitlines() if line.strip()]
    return lines[-1].strip()[:500] if lines else "(no output)"


#: An error line of a simulation log, possibly after a time stamp a testbench prints before its
#: own messages (``[205]``, ``[205 ns]``, ``[1.5us]``, ``@205:``).
_ERROR_LINE = re.compile(
    r"^(?:(?:\[[ \t]*[\d.]+[ \t]*(?:[fpnum]?s)?[ \t]*\]|@[ \t]*[\d.]+[ \t]*(?:[fpnum]?s)?:?)[ \t]*)?"
    r"(?:%Error|%Fatal|ERROR:|FATAL:|VCD Error|Error:)",
    re.M,
)


def _error_lines(log_text: str, limit: int = 20) -> tuple[list[str], int]:
    """The first ``limit`` error lines of a simulation log (Icarus ``ERROR:``/``VCD Error``,
    Verilator ``%Error``, time-stamped or not) and how many there are in all."""
    out: list[str] = []
    total = 0
    for m in _ERROR_LINE.finditer(log_text):
        end = log_text.find("\n", m.start())
        line = log_text[m.start() : end if end >= 0 else None].strip()
        if "Verilog $stop" in line:  # Verilator's note on an ordinary $stop ending
            continue
        total += 1
        if len(out) < limit:
            out.append(line[:300])
    return out, total


_UVM = re.compile(r"\bimport\s+uvm_pkg\b|`include\s+\"uvm_macros\.svh\"|\bextends\s+uvm_(?:test|env|component)\b")
#: A simulator's own word that it rejected a construct it does not implement (Verilator's
#: ``%Error-UNSUPPORTED:`` and ``Unsupported:``, Icarus's ``sorry:``), not a syntax error.
_UNSUPPORTED = re.compile(r"%Error-UNSUPPORTED|\bUnsupported:|\bsorry:", re.I)


#: Legal SystemVerilog a simulator rejects with an error that does not say "unsupported":
#: (construct in the stimulus, what the simulator says, the words for the message).
_REJECTED_LEGAL = [
    (
        re.compile(r"\bmailbox\s+(?!#)[A-Za-z_]"),
        re.compile(r"Class parameter type without default value is never given value"),
        "Verilator does not support an untyped mailbox (`mailbox mb`), which SystemVerilog allows: "
        "give it a type (`mailbox #(int) mb`)",
    ),
]


def unsupported_note(stimulus_texts: list[str], build_log: str) -> str | None:
    """Why a build that failed is something we cannot run rather than wrong code, or None:
    a UVM testbench (no UVM library is compiled in), or a construct the simulator rejects as
    unsupported although the language allows it (the first such line of ``build_log``)."""
    if any(_UVM.search(hdl.strip_comments(t)) for t in stimulus_texts):
        return (
            "UVM testbenches are not supported: no UVM library (uvm_pkg) is compiled in; write a plain "
            "SystemVerilog testbench or a cocotb test"
        )
    for construct, said, words in _REJECTED_LEGAL:
        if said.search(build_log) and any(construct.search(hdl.strip_comments(t)) for t in stimulus_texts):
            return words
    for line in build_log.splitlines():
        if _UNSUPPORTED.search(line):
            return (
                "the simulator does not support a construct the stimulus uses, though the language allows "
                f"it (rewrite it with a supported one): {line.strip()[:300]}"
            )
    return None
