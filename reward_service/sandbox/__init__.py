"""Sandbox backends: run one untrusted command under isolation and limits.

``BwrapSandbox`` (bubblewrap namespaces + rlimits + cgroup v1 limits) is the embedded default;
``DockerSandbox`` runs each step in a fresh container of the simulation image through the
Docker API (service workers). Both implement :class:`Sandbox`; see docs/sandbox.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward_service.sandbox.base import (
    Bind,
    ExecResult,
    ExecSpec,
    Sandbox,
    SandboxError,
    base_env,
)
from reward_service.sandbox.bwrap import BwrapSandbox
from reward_service.sandbox.toolchain import Toolchain

if TYPE_CHECKING:
    from reward_service.settings import Settings

__all__ = [
    "Bind",
    "ExecResult",
    "ExecSpec",
    "Sandbox",
    "SandboxError",
    "Toolchain",
    "BwrapSandbox",
    "base_env",
    "get_sandbox",
]

BACKENDS = ("bwrap", "docker")


def get_sandbox(name: str = "bwrap", settings: Settings | None = None) -> Sandbox:
    """The sandbox backend called ``name`` ("bwrap" or "docker"), configured from ``settings``
    (default: the process settings; bwrap: ``step_root``; Docker: ``sim_image``,
    ``docker_volume_prefix``, ``docker_cpus``). Raises :class:`SandboxError` for an unknown name; whether the backend can
    run here is :meth:`Sandbox.check`'s question (Docker connects lazily)."""
    if name == "bwrap":
        from reward_service.settings import get_settings

        return BwrapSandbox(step_root=(settings or get_settings()).step_root)
    if name == "docker":
        from reward_service.sandbox.docker import DockerSandbox
        from reward_service.settings import get_settings

        settings = settings or get_settings()
        return DockerSandbox(
            image=settings.sim_image, volume_prefix=settings.docker_volume_prefix, cpus=settings.docker_cpus
        )
    raise SandboxError(f"unknown sandbox backend {name!r} (available: {', '.join(BACKENDS)})")
