"""The worker's Celery app, nothing else (Celery's guide: the app module holds only the app).
Its configuration, queue and task names are the job contract's
(:mod:`reward_service.dispatch.contract`), read from :class:`reward_service.settings.Settings`
lazily (on first use), so importing this module reads no environment.

``celery -A workers.celery_app worker`` finds :data:`app`; the task lives in
:mod:`workers.tasks`, the remote-control command ``sandbox_check`` in :mod:`workers.control`,
the start-up hooks (the Docker sandbox reaper, the lease reaper) in :mod:`workers.lifecycle`
(all listed in :data:`INCLUDE`); the liveness file's bootstep is in :mod:`workers.liveness`.
"""

from __future__ import annotations

from reward_service.dispatch.contract import make_app
from workers.liveness import Heartbeat

#: The modules a worker imports at start: the task, the remote-control command, the hooks.
INCLUDE = ("workers.tasks", "workers.control", "workers.lifecycle")

app = make_app(include=INCLUDE)
# A bootstep must be on the app before a worker builds its blueprint (the liveness file).
app.steps["consumer"].add(Heartbeat)
