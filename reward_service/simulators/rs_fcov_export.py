"""Export cocotb-coverage's ``coverage_db`` to YAML at the end of a cocotb simulation.

Standalone (no reward_service import): copied next to ``cocotb_driver.py`` and loaded in the
simulator's embedded Python as a PyGPI entry point (``PYGPI_USERS=...,rs_fcov_export:install``,
after cocotb's own entry points). ``install`` registers a cocotb shutdown callback, which cocotb
runs on every ending it sees: after the last test (regression tear-down), and when the simulator
ends on its own (HDL ``$finish``/``$fatal``, no events left) — in that case after cocotb has
failed the running test. An ``atexit`` hook is a fallback for interpreters that finalize without
cocotb's callback. A run killed by a signal (timeout) exports nothing.

The file (``RS_FCOV_FILE``, default ``rs_fcov.yml`` in the cwd) is written only when the test
imported cocotb-coverage and defined at least one coverage item.

cocotb 1.9 (the optional runtime, see ``reward_service.simulators.cocotb_runtime``) has neither
PyGPI users nor ``cocotb._shutdown``: there this module is the PyGPI entry point itself
(``PYGPI_ENTRY_POINT=rs_fcov_export:entry_cocotb19``), which hooks the export into the
regression tear-down (plus ``atexit``), makes results.xml failure messages carry the
exception (1.9 writes only "Test failed with RANDOM_SEED=..."), adds cocotb 2.x's
``to_unsigned()``/``to_signed()`` to 1.9's ``BinaryValue`` and ``LogicArray`` (code written for
1.x semantics often reads values the 2.x way), then starts cocotb as
``cocotb:_initialise_testbench`` would.

Test discovery: when the test module cannot be imported or defines no test, cocotb runs no test
and (2.1) writes no ``results.xml``. The exception is recorded as JSON in ``RS_DISCOVERY_FILE``
(``{"kind": "import"|"no_tests"|"discovery", "exception": "ModuleNotFoundError: No module named
'x'", "syntax_error": bool, "missing": "x"|null}``) so that the engine can say why no test ran;
on cocotb 2.1 ``run_regression`` stands in for ``cocotb.regression:_run_regression`` in
``PYGPI_USERS``, on 1.9 ``entry_cocotb19`` wraps the test discovery. The record only explains a
run that the engine already fails (no test case in ``results.xml``): a test that writes the file
itself can only lose.
"""

from __future__ import annotations

import os
import sys

_done = False


def export() -> None:
    global _done
    if _done:
        return
    _done = True
    module = sys.modules.get("cocotb_coverage.coverage")
    if module is None:  # the test does not use cocotb-coverage
        return
    try:
        db = module.coverage_db
        if not len(db):
            return
        path = os.environ.get("RS_FCOV_FILE") or "rs_fcov.yml"
        tmp = f"{path}.tmp"
        db.export_to_yaml(filename=tmp)
        os.replace(tmp, path)
    except Exception as exc:
        print(f"rs_fcov_export: export failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def install() -> None:
    import atexit

    import cocotb._shutdown

    cocotb._shutdown.register(export)
    atexit.register(export)


def _test_modules() -> list[str]:
    names = os.environ.get("COCOTB_TEST_MODULES") or os.environ.get("MODULE") or ""
    return [n.strip() for n in names.split(",") if n.strip()]


def record_discovery_error(exc: BaseException | None) -> None:
    """Write why test discovery failed to ``RS_DISCOVERY_FILE`` (see the module docstring);
    ``exc`` None: discovery found no test without raising (cocotb 1.9)."""
    path = os.environ.get("RS_DISCOVERY_FILE")
    if not path:
        return
    import json

    lines = str(exc).strip().splitlines() if exc is not None else []
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ") if exc is not None else ""
    imported = all(m in sys.modules for m in _test_modules())
    if not imported:
        kind = "import"
    elif exc is None or lines and lines[0].startswith("No tests were discovered"):
        kind = "no_tests"
    else:
        kind = "discovery"
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    try:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "kind": kind,
                    "exception": text[:2000],
                    "syntax_error": isinstance(exc, SyntaxError),
                    "missing": missing if isinstance(missing, str) else None,
                },
                fh,
            )
        os.replace(tmp, path)
    except OSError as err:  # never hide cocotb's own report
        print(f"rs_fcov_export: cannot record the discovery error: {err}", file=sys.stderr)


def run_regression() -> None:
    """cocotb 2.1 PyGPI entry point in place of ``cocotb.regression:_run_regression``: the
    same, recording a test-discovery failure (import error, no test) before it propagates."""
    import cocotb.regression

    try:
        cocotb.regression._run_regression()
    except BaseException as exc:
        if getattr(cocotb.regression, "_manager_inst", None) is None or not getattr(
            cocotb.regression._manager_inst, "_test_queue", None
        ):
            record_discovery_error(exc)  # discovery failed: no test was queued
        raise


_last_error: str | None = None
#: What cocotb 1.9's embedding layer looks up on its entry module (``cocotb`` by default).
_COCOTB19_ENTRY_ATTRS = ("_log_from_c", "_filter_from_c", "_sim_event")


def __getattr__(name: str):
    if name in _COCOTB19_ENTRY_ATTRS:
        _before_cocotb19()
        import cocotb

        return getattr(cocotb, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _forward_compat_19() -> None:
    """cocotb 2.x value accessors on cocotb 1.9's value types (same results: the integer
    value, ValueError when a bit is X/Z)."""
    from cocotb.binary import BinaryValue
    from cocotb.types import LogicArray

    # mypy checks against the installed cocotb 2.x, whose LogicArray has these methods; 1.9's lack them
    for cls in (BinaryValue, LogicArray):
        if not hasattr(cls, "to_unsigned"):
            cls.to_unsigned = lambda self: self.integer  # type: ignore[method-assign]
        if not hasattr(cls, "to_signed"):
            cls.to_signed = lambda self: self.signed_integer  # type: ignore[method-assign]


def _before_cocotb19() -> None:
    """A guarded run (the cocotb write guard, ``RS_GUARD_TOP`` set): cocotb 1.9 imports
    ``ctypes``, which the guard keeps from loading; give it the guard's stand-in first."""
    if os.environ.get("RS_GUARD_TOP"):
        import rs_cocotb_guard

        rs_cocotb_guard.stub_ctypes()


def entry_cocotb19(*args):
    """cocotb 1.9 PyGPI entry point: install the export and better failure messages, then
    hand over to ``cocotb._initialise_testbench``."""
    import atexit

    _before_cocotb19()
    import cocotb
    import cocotb.regression as regression
    import cocotb.xunit_reporter as xunit

    atexit.register(export)
    _forward_compat_19()
    if os.environ.get("RS_GUARD_TOP"):  # a guarded run: keep the test's location of each write
        import rs_cocotb_guard

        rs_cocotb_guard.install()
    manager = regression.RegressionManager
    score_test, tear_down, add_failure = manager._score_test, manager._tear_down, xunit.XUnitReporter.add_failure

    def _score_test(self, test, outcome):
        global _last_error
        try:
            outcome.get()
        except BaseException as exc:
            text = str(exc).strip().splitlines()
            _last_error = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        else:
            _last_error = None
        return score_test(self, test, outcome)

    def _tear_down(self):
        try:
            return tear_down(self)
        finally:
            export()

    def _add_failure(self, testcase=None, **kwargs):
        if _last_error and str(kwargs.get("message", "")).startswith("Test failed with RANDOM_SEED"):
            kwargs["message"] = f"{_last_error} ({kwargs['message']})"
        return add_failure(self, testcase, **kwargs)

    discover = manager.from_discovery.__func__

    def _from_discovery(cls, dut):  # (_discover_tests is a generator: iterated in here)
        try:
            manager_inst = discover(cls, dut)
        except BaseException as exc:  # 1.9 logs it, stops the simulator and writes no test
            record_discovery_error(exc)
            raise
        if not getattr(manager_inst, "ntests", 1):  # 1.9 only warns, then writes an empty results.xml
            record_discovery_error(None)
        return manager_inst

    manager._score_test, manager._tear_down = _score_test, _tear_down
    manager.from_discovery = classmethod(_from_discovery)
    xunit.XUnitReporter.add_failure = _add_failure
    return cocotb._initialise_testbench(*args)
