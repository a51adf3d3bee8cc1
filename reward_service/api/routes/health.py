"""``/healthz`` (the process answers), ``/readyz`` (it can score), ``/metrics`` (Prometheus).
Not behind the API keys: orchestrators and scrapers call them."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reward_service.api.deps import BatchStoreDep, DispatcherDep, MetricsDep, ProblemStoreDep, in_thread
from reward_service.api.schemas import Health, Readiness

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """200 while the API process is up."""
    return Health(status="ok")


def _checks(dispatcher, problems, batches) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        checks.update(dispatcher.ready())
    except Exception:
        log.exception("readiness check of the dispatcher failed")
        checks["dispatcher"] = "dispatcher check failed (see the service log)"
    checks["problem_store"] = problems.ping()
    checks["batch_store"] = batches.ping()
    return checks


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(
    request: Request, dispatcher: DispatcherDep, problems: ProblemStoreDep, batches: BatchStoreDep
) -> JSONResponse:
    """200 when every check (dispatcher: broker, workers, sandbox; stores) says ok, else 503
    with the checks and the reasons of the failing ones."""
    checks = await in_thread(request, _checks, dispatcher, problems, batches)
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(Readiness(ready=ready, checks=checks).model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response)
def metrics(metrics: MetricsDep) -> Response:
    """Prometheus text format. A plain ``def``: FastAPI runs it in its thread pool, since the
    queue-depth gauge may ask Redis."""
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
