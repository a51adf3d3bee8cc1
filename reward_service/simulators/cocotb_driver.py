"""Standalone driver of cocotb's runner, run inside the sandbox.

Usage: ``python cocotb_driver.py build|test '<json spec>'``. It must not import
reward_service (only the standard library and cocotb's runner): it is copied into the job dir and
run as a script, by the host Python (cocotb 2.1, ``cocotb_tools.runner``) or, when
``spec["runtime"] == "cocotb-1.9"``, by the cocotb 1.9 venv's Python (``cocotb.runner``; see
``reward_service.simulators.cocotb_runtime``).

cocotb's runner reports failures by ``sys.exit`` (a tool missing from PATH; cocotb 1.9 also
for a command that exited non-zero: ``"Process 'vvp' terminated with error N"``) or by raising
``RuntimeError("Command failed with return code: N")`` (2.1: the compiler or the simulator
exited non-zero); all are caught here and turned into an exit status of this script:

- 0: the step's commands succeeded;
- 1: the compiler/simulator exited non-zero (its code is in the status file);
- 2: the runner called ``sys.exit`` (e.g. ``iverilog``/``verilator`` not on PATH);
- 3: anything else (bad spec, unexpected exception in the runner).

A small JSON status file (``spec["status"]``) records the step, the outcome and the error text.
Everything else written is cocotb's own (results.xml, coverage.dat from Verilator's main).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_RUNNER_EXIT = 2
EXIT_DRIVER_ERROR = 3

_RC = re.compile(r"return code:\s*(-?\d+)")
_RC_19 = re.compile(r"terminated with error\s*(-?\d+)")  # cocotb 1.9's SystemExit text


def _write_status(spec: dict, status: dict) -> None:
    path = spec.get("status")
    if not path:
        return
    try:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(status, fh)
        os.replace(tmp, path)
    except OSError as exc:  # a full or read-only work dir must not hide the real outcome
        print(f"cocotb_driver: cannot write status file {path}: {exc}", file=sys.stderr)


def _build(runner, spec: dict) -> None:
    runner.build(
        sources=spec.get("sources", []),
        includes=spec.get("includes", []),
        build_args=spec.get("build_args", []),
        hdl_toplevel=spec["hdl_toplevel"],
        build_dir=spec["build_dir"],
        cwd=spec.get("cwd"),
        always=True,
        timescale=tuple(spec["timescale"]) if spec.get("timescale") else None,
    )


def _test(runner, spec: dict) -> None:
    test_dir = spec["test_dir"]
    # The runner passes its own sys.path as PYTHONPATH to the simulator's Python: make the
    # stimulus modules (in the test dir) importable there.
    if test_dir not in sys.path:
        sys.path.insert(0, test_dir)
    if spec.get("preload"):  # the write guard, for the simulator only (not this process)
        os.environ["LD_PRELOAD"] = " ".join(filter(None, [spec["preload"], os.environ.get("LD_PRELOAD")]))
    runner.test(
        test_module=spec["test_module"],
        hdl_toplevel=spec["hdl_toplevel"],
        hdl_toplevel_lang=spec.get("hdl_toplevel_lang", "verilog"),
        build_dir=spec["build_dir"],
        test_dir=test_dir,
        results_xml=spec["results_xml"],
        seed=spec.get("seed"),
        test_args=spec.get("test_args", []),
        plusargs=spec.get("plusargs", []),
        timescale=tuple(spec["timescale"]) if spec.get("timescale") else None,
    )


def _import_runner_21():
    """``cocotb_tools.runner`` (cocotb 2.x) without running ``cocotb/__init__.py`` up front.

    The runner imports only ``cocotb.types`` (for literal parameter values); cocotb's package
    ``__init__`` imports pytest, asyncio and the scheduler besides, ~0.2 s of a ~0.7 s step in
    a process that only builds a command line (the simulator embeds its own interpreter, which
    imports cocotb for real). So the package is registered from its spec with an empty body and
    a module ``__getattr__`` that runs the real ``__init__`` into it on the first attribute it
    lacks (``cocotb.__version__``, ...): its submodules import as usual, and any other use of
    ``cocotb`` sees the whole package. Falls back to the plain import when cocotb was imported
    already or cannot be found this way."""
    import importlib.util

    if "cocotb" not in sys.modules:
        spec = importlib.util.find_spec("cocotb")
        if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
            package = importlib.util.module_from_spec(spec)
            loader = spec.loader

            def load_package(name: str):
                # The real __init__ defines no __getattr__ (cocotb 2.1): drop ours first, so that
                # a name it does not define raises AttributeError instead of recursing.
                package.__dict__.pop("__getattr__", None)
                loader.exec_module(package)
                return getattr(package, name)

            package.__getattr__ = load_package
            sys.modules["cocotb"] = package
    from cocotb_tools import runner

    return runner


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("build", "test"):
        print("usage: cocotb_driver.py build|test '<json spec>'", file=sys.stderr)
        return EXIT_DRIVER_ERROR
    step = argv[1]
    try:
        spec = json.loads(argv[2])
    except ValueError as exc:
        print(f"cocotb_driver: bad spec: {exc}", file=sys.stderr)
        return EXIT_DRIVER_ERROR
    status: dict = {"step": step, "ok": False, "exit": None, "returncode": None, "error": None}
    start = time.monotonic()
    try:
        if spec.get("runtime") == "cocotb-1.9":
            import warnings

            warnings.filterwarnings("ignore", message="Python runners and associated APIs")
            # cocotb 1.x's runner module; mypy checks against the installed cocotb 2.x, which has none
            from cocotb import runner as cocotb_runner  # type: ignore[attr-defined]
        else:
            cocotb_runner = _import_runner_21()

        if spec.get("build_jobs"):
            cocotb_runner.MAX_PARALLEL_BUILD_JOBS = int(spec["build_jobs"])
        runner = cocotb_runner.get_runner(spec["simulator"])
        (_build if step == "build" else _test)(runner, spec)
    except SystemExit as exc:  # the runner's way to fail
        code = exc.code
        m = _RC_19.search(code) if isinstance(code, str) else None
        if m:  # cocotb 1.9: the compiler or simulator exited non-zero
            status.update(exit=EXIT_TOOL_FAILED, returncode=int(m.group(1)), error=code)
        else:
            status.update(exit=EXIT_RUNNER_EXIT, error=f"runner exited: {code!r}")
            if isinstance(code, int):
                status["returncode"] = code
        print(f"cocotb_driver: {step}: runner exited: {code!r}", file=sys.stderr)
    except RuntimeError as exc:
        m = _RC.search(str(exc))
        if m:
            status.update(exit=EXIT_TOOL_FAILED, returncode=int(m.group(1)), error=str(exc))
        else:
            status.update(exit=EXIT_DRIVER_ERROR, error="".join(traceback.format_exception_only(exc)).strip())
            traceback.print_exc()
        print(f"cocotb_driver: {step}: {exc}", file=sys.stderr)
    except BaseException as exc:
        status.update(exit=EXIT_DRIVER_ERROR, error="".join(traceback.format_exception_only(exc)).strip())
        traceback.print_exc()
    else:
        status.update(ok=True, exit=EXIT_OK, returncode=0)
    status["duration_s"] = round(time.monotonic() - start, 3)
    _write_status(spec, status)
    sys.stdout.flush()
    sys.stderr.flush()
    return status["exit"]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
