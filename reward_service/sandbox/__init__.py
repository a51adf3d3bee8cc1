"""Sandbox backends: run one untrusted command under isolation and limits.

``BwrapSandbox`` (bubblewrap namespaces + rlimits + cgroup v1 limits) is the embedded default;
a Docker backend implements the same :class:`Sandbox` interface (service issue).
"""

from reward_service.sandbox.base import Bind, ExecResult, ExecSpec, Sandbox, SandboxError
from reward_service.sandbox.bwrap import BwrapSandbox

__all__ = ["Bind", "ExecResult", "ExecSpec", "Sandbox", "SandboxError", "BwrapSandbox", "get_sandbox"]


def get_sandbox(name: str = "bwrap") -> Sandbox:
    """Return the sandbox backend called ``name``; raises :class:`SandboxError` if unknown or
    unusable on this machine."""
    if name == "bwrap":
        return BwrapSandbox()
    raise SandboxError(f"unknown sandbox backend {name!r} (available: bwrap)")
