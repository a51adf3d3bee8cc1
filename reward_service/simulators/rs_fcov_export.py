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
    except Exception as exc:  # noqa: BLE001 - never break cocotb's shutdown
        print(f"rs_fcov_export: export failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def install() -> None:
    import atexit

    import cocotb._shutdown

    cocotb._shutdown.register(export)
    atexit.register(export)


_last_error: str | None = None
#: What cocotb 1.9's embedding layer looks up on its entry module (``cocotb`` by default).
_COCOTB19_ENTRY_ATTRS = ("_log_from_c", "_filter_from_c", "_sim_event")


def __getattr__(name: str):
    if name in _COCOTB19_ENTRY_ATTRS:
        import cocotb

        return getattr(cocotb, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _forward_compat_19() -> None:
    """cocotb 2.x value accessors on cocotb 1.9's value types (same results: the integer
    value, ValueError when a bit is X/Z)."""
    from cocotb.binary import BinaryValue
    from cocotb.types import LogicArray

    for cls in (BinaryValue, LogicArray):
        if not hasattr(cls, "to_unsigned"):
            cls.to_unsigned = lambda self: self.integer
        if not hasattr(cls, "to_signed"):
            cls.to_signed = lambda self: self.signed_integer


def entry_cocotb19(*args):
    """cocotb 1.9 PyGPI entry point: install the export and better failure messages, then
    hand over to ``cocotb._initialise_testbench``."""
    import atexit

    import cocotb
    import cocotb.regression as regression
    import cocotb.xunit_reporter as xunit

    atexit.register(export)
    _forward_compat_19()
    manager = regression.RegressionManager
    score_test, tear_down, add_failure = manager._score_test, manager._tear_down, xunit.XUnitReporter.add_failure

    def _score_test(self, test, outcome):
        global _last_error
        try:
            outcome.get()
        except BaseException as exc:  # noqa: BLE001 - only its text is kept
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

    manager._score_test, manager._tear_down = _score_test, _tear_down
    xunit.XUnitReporter.add_failure = _add_failure
    return cocotb._initialise_testbench(*args)
