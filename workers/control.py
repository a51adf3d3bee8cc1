"""Remote-control commands of the workers (run in a worker's main process).

``sandbox_check``: whether this worker's sandbox backend can run simulations; the API's
``/readyz`` asks it through :meth:`reward_service.dispatch.celery.CeleryDispatcher.ready`.
"""

from __future__ import annotations

import functools

from celery.worker.control import control_command

from reward_service.sandbox import Sandbox, get_sandbox
from reward_service.settings import get_settings


@functools.lru_cache(maxsize=1)
def _sandbox() -> Sandbox:
    """One sandbox object for every check (each /readyz asks): a Docker sandbox holds a client
    with a connection pool, which a new object per check would leak."""
    return get_sandbox(get_settings().sandbox)


@control_command()
def sandbox_check(state) -> dict[str, str]:
    """``{"ok": ...}`` when the configured sandbox backend is usable here, else ``{"error": reason}``."""
    try:
        _sandbox().check()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"ok": "sandbox ok"}
