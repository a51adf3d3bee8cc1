"""``/v1/problems``: register problems once; requests then send ``problem_id`` + stimulus."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request, Response
from fastapi.responses import JSONResponse

from reward_service.api import service
from reward_service.api.deps import Authenticated, DispatcherDep, ProblemStoreDep, SettingsDep, in_thread
from reward_service.api.schemas import ErrorBody, ProblemList, ProblemsLoaded, ProblemSummary
from reward_service.hdl import HEADER_SUFFIXES
from reward_service.problems.cvdp import find_toplevel, problem_from_row
from reward_service.problems.store import PROBLEM_ID_PATTERN, ProblemSpec

router = APIRouter(prefix="/v1", tags=["problems"], dependencies=[Authenticated])

ProblemId = Annotated[str, Path(pattern=PROBLEM_ID_PATTERN)]


def _summary(p: ProblemSpec) -> ProblemSummary:
    return ProblemSummary(
        id=p.id,
        toplevel=p.toplevel,
        dut_instance=p.dut_instance,
        simulator=p.simulator.value,
        metrics=list(p.metrics),
        targets=[t.model_dump() for t in p.targets],
        files=sorted(p.design.files),
        difficulty=p.difficulty,
    )


@router.post(
    "/problems",
    response_model=ProblemSpec,
    status_code=201,
    responses={
        200: {"model": ProblemSpec, "description": "replaced an existing problem"},
        401: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody},
    },
)
async def register_problem(
    body: ProblemSpec, request: Request, settings: SettingsDep, problems: ProblemStoreDep, dispatcher: DispatcherDep
) -> JSONResponse:
    """Register (or replace) a problem: design files, DUT module (``design.toplevel``; found
    when omitted: the module nothing instantiates), DUT instance, metrics, targets, simulator,
    limits, reward shaping. 201 when new, 200 when it replaced one."""
    service.check_design(body.design, settings)
    if body.design.toplevel is None:
        rtl = {n: t for n, t in body.design.files.items() if not n.lower().endswith(HEADER_SUFFIXES)}
        try:
            body = body.model_copy(update={"design": body.design.model_copy(update={"toplevel": find_toplevel(rtl)})})
        except ValueError:
            pass  # SV testbenches do not need it; cocotb stimulus will say so
    new = await in_thread(request, problems.put, body)
    if settings.warm_on_register:
        await in_thread(request, service.warm_build, body, dispatcher)
    return JSONResponse(
        body.model_dump(mode="json"), status_code=201 if new else 200, headers={"Location": f"/v1/problems/{body.id}"}
    )


@router.get("/problems", response_model=ProblemList, responses={401: {"model": ErrorBody}})
async def list_problems(request: Request, problems: ProblemStoreDep) -> ProblemList:
    """Every registered problem (id, DUT module and instance, simulator, metrics, targets, file names)."""
    found = await in_thread(request, problems.list)
    return ProblemList(problems=[_summary(p) for p in found])


@router.get(
    "/problems/{problem_id}",
    response_model=ProblemSpec,
    responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def get_problem(problem_id: ProblemId, request: Request, problems: ProblemStoreDep) -> ProblemSpec:
    """The whole problem, design files and prompt included."""
    problem = await in_thread(request, problems.get, problem_id)
    if problem is None:
        raise HTTPException(404, f"unknown problem_id {problem_id!r}")
    return problem


@router.delete(
    "/problems/{problem_id}",
    status_code=204,
    responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def delete_problem(problem_id: ProblemId, request: Request, problems: ProblemStoreDep) -> Response:
    if not await in_thread(request, problems.delete, problem_id):
        raise HTTPException(404, f"unknown problem_id {problem_id!r}")
    return Response(status_code=204)


def _parse_cvdp_jsonl(raw: bytes, settings) -> dict[str, ProblemSpec]:
    """Problems of a CVDP cid012 JSONL body, by id; HTTPException 422 naming the bad line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"the JSONL body is not UTF-8 (byte {exc.start})") from None
    specs: dict[str, ProblemSpec] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            spec = ProblemSpec.from_cvdp(problem_from_row(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise HTTPException(422, f"line {lineno}: malformed JSON: {exc.msg} (column {exc.colno})") from None
        except (ValueError, TypeError, AttributeError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise HTTPException(422, f"line {lineno}: bad cid012 row: {first}") from None
        if spec.id in specs:
            raise HTTPException(422, f"line {lineno}: duplicate problem id {spec.id!r}")
        service.check_design(spec.design, settings)
        specs[spec.id] = spec
    if not specs:
        raise HTTPException(422, "the body holds no JSONL rows")
    return specs


@router.post(
    "/problems:load",
    response_model=ProblemsLoaded,
    status_code=201,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}
    },
    responses={401: {"model": ErrorBody}, 413: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def load_problems(
    request: Request, settings: SettingsDep, problems: ProblemStoreDep, dispatcher: DispatcherDep
) -> ProblemsLoaded:
    """Register every problem of a CVDP cid012 JSONL body (one row per line; any content type).
    All or nothing: a bad row is a 422 naming its line."""
    raw = await request.body()
    specs = await in_thread(request, _parse_cvdp_jsonl, raw, settings)  # CPU work: off the loop
    new = await in_thread(request, problems.put_many, list(specs.values()))
    if settings.warm_on_register:
        for spec in specs.values():
            await in_thread(request, service.warm_build, spec, dispatcher)
    return ProblemsLoaded(loaded=len(specs), new=new, ids=list(specs))
