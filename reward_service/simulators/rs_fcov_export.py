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
