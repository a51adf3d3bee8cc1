"""Schemathesis against the embedded server's own ``/openapi.json`` (issue 11, item 6): every
operation gets generated requests, valid and invalid, sent over HTTP to a live uvicorn
(conftest.live_server) serving the embedded app (LocalDispatcher, bubblewrap, in-memory stores,
result cache off). No answer may be a 500, and every answer must match its documented schema:
each 4xx/5xx body is the documented ``ErrorBody`` (``{"detail": str}``, plus ``errors`` for a
422; reward_service/api/errors.py, docs/api.md), never a traceback. Small limits (``wait`` at
most 2 s, small bodies, batches of 4) keep each call fast; the fuzzed scoring requests that
reach a simulator are garbage designs that fail to compile within those 2 s or go on in the
background (one worker) and are cancelled at shutdown."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from conftest import live_server
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from reward_service.api import create_app
from reward_service.settings import Settings

#: Examples per operation (16 operations): the whole file stays within ~2 min on 2 cores.
EXAMPLES = 30
MAX_WAIT_S = 2.0


@pytest.fixture(scope="module")
def api_url(shared_cache_dir, tmp_path_factory) -> Iterator[str]:
    app_settings = Settings(
        cache_dir=shared_cache_dir,
        work_root=tmp_path_factory.mktemp("fuzz-work"),
        result_cache=False,
        score_workers=1,
        warm_on_register=False,
        default_wait_s=0.0,
        max_wait_s=MAX_WAIT_S,
        max_body_mb=0.25,
        max_bulk_body_mb=0.5,
        max_file_kb=16,
        max_files=4,
        max_batch=4,
    )
    with live_server(create_app(settings=app_settings)) as url:
        yield url


def _operation_labels() -> list[str]:
    """``METHOD /path`` of every operation the app declares (its schema needs no server)."""
    app = create_app(settings=Settings(result_cache=False, warm_on_register=False))
    try:
        schema = schemathesis.openapi.from_dict(app.openapi())
        return [result.ok().label for result in schema.get_all_operations()]
    finally:
        app.state.dispatcher.close()


# schemathesis.pytest's parametrize/from_fixture fail under pytest 9 ("'Function' object has no
# attribute '_nodeid'"): one pytest case per operation, its hypothesis run driven here.
OPERATIONS = _operation_labels()


@pytest.fixture(scope="module")
def api_schema(api_url):
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value) -> bytes:
    """POST /v1/problems:load documents its body as a string of JSON lines: sent as is."""
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else json.dumps(value).encode()


def error_body_shape(ctx, response, case) -> bool | None:
    """Every 4xx/5xx answer is JSON ``{"detail": "<message>"}`` (``errors``: a list of
    ``{loc, msg, type}`` for a 422) and names no traceback or source file of ours."""
    if response.status_code < 400:
        return None
    text = response.content.decode("utf-8", "replace")
    assert "Traceback" not in text and 'File "' not in text, f"traceback in a {response.status_code} body"
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"], (
        f"{response.status_code} body is not {{'detail': str}}: {text[:300]}"
    )
    assert set(body) <= {"detail", "errors"}, f"unexpected keys {sorted(body)}"
    if response.status_code == 422 and "errors" in body:
        assert isinstance(body["errors"], list)
        for item in body["errors"]:
            assert {"loc", "msg"} <= set(item) and isinstance(item["msg"], str), item
            assert "input" not in item, "a 422 must not echo the input back"
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    error_body_shape,
]


def _cap_wait(case) -> None:
    # an in-range `wait` would park each call for up to MAX_WAIT_S: keep out-of-range values
    # (their 422 is part of what is tested), shorten the valid ones
    if (
        isinstance(case.query, dict)
        and isinstance(case.query.get("wait"), (int, float))
        and 0 <= case.query["wait"] <= MAX_WAIT_S
    ):
        case.query["wait"] = min(case.query["wait"], 0.2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("label", OPERATIONS)
def test_api_operation(api_schema, api_url, label):
    operation = api_schema.find_operation_by_label(label)
    cases = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(GenerationMode.NEGATIVE)
    calls = []

    @settings(
        max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(case=cases)
    def run(case):
        _cap_wait(case)
        calls.append(case.call_and_validate(base_url=api_url, checks=CHECKS, timeout=30).status_code)

    run()
    assert calls, f"{label}: no request sent"
    print(f"{label}: {len(calls)} requests, statuses {dict(sorted(Counter(calls).items()))}")


# -- regressions: what schemathesis found -----------------------------------------------------------
def test_non_utf8_json_body_is_a_documented_422(api_url):
    # FastAPI answered bytes that are not UTF-8 with its own 400 "There was an error parsing the body"
    import httpx

    for path in ("/v1/score", "/v1/batches", "/v1/problems"):
        response = httpx.post(
            f"{api_url}{path}",
            content=b'{"design": "\xff\xfe"}',
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 422, (path, response.text)
        body = response.json()
        assert body["detail"] == "malformed JSON body: not UTF-8 text (byte 12)"
        assert body["errors"] == [{"loc": "body", "msg": "malformed JSON: not UTF-8 text", "type": "json_invalid"}]


def test_every_documented_error_is_an_error_body(api_url):
    # the GET/DELETE routes documented FastAPI's default HTTPValidationError for their 422, and the
    # report routes their JSON errors under text/plain / text/html
    import httpx

    spec = httpx.get(f"{api_url}/openapi.json", timeout=30).json()
    checked = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) < 400 or (path, status) == ("/readyz", "503"):  # readiness: its own body
                    continue
                assert response["content"] == {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                }, (method, path, status)
                checked += 1
    assert checked >= 40


# -- accepted requests: real simulations, every answer validated against its documented schema -----
COUNTER = (
    "module ctr(input clk, output reg [3:0] q);\n  initial q = 0;\n  always @(posedge clk) q <= q + 1;\nendmodule\n"
)
COUNTER_TB = (
    "module tb;\n  reg clk = 0;\n  wire [3:0] q;\n  ctr uut(.clk(clk), .q(q));\n"
    "  initial begin\n    repeat (40) #1 clk = ~clk;\n    $finish;\n  end\nendmodule\n"
)


def _counter_request() -> dict:
    return {
        "design": {"files": {"ctr.v": COUNTER}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": COUNTER_TB}},
        "simulator": "icarus",
        "engine": "fast",
        "coverage": {"scope": "uut"},
        "report": {"points": True},
    }


def _call(api_schema, api_url, label: str, **parts):
    case = api_schema.find_operation_by_label(label).Case(**parts)
    return case.call_and_validate(base_url=api_url, checks=CHECKS, timeout=60)


def test_accepted_requests_match_their_schema(api_schema, api_url, engine):
    """The happy paths the generated data rarely reaches (a design that compiles, a loadable
    JSONL row): a real Icarus run, its job and reports, a batch, a problem's life cycle."""
    import time

    first = _call(api_schema, api_url, "POST /v1/score", body=_counter_request(), query={"wait": MAX_WAIT_S})
    assert first.status_code in (200, 202), first.text
    headers = {k.lower(): v[0] if isinstance(v, list) else v for k, v in first.headers.items()}
    job_id = (headers.get("content-location") or headers["location"]).rsplit("/", 1)[1]
    deadline = time.monotonic() + 90
    while True:
        job = _call(
            api_schema, api_url, "GET /v1/jobs/{job_id}", path_parameters={"job_id": job_id}, query={"wait": MAX_WAIT_S}
        )
        if job.json()["state"] == "done" or time.monotonic() > deadline:
            break
    result = job.json()["result"]
    # the same request scored in-process by the engine (fast path: Icarus, instrumented DUT)
    from reward_service.models import ScoreRequest

    direct = engine.score(ScoreRequest(**_counter_request())).model_dump(mode="json")
    assert result["status"] == direct["status"] == "ok", result
    assert 0 < direct["coverage"]["overall"] <= 1
    assert result["coverage"]["overall"] == direct["coverage"]["overall"]
    assert result["coverage"]["metrics"] == direct["coverage"]["metrics"]
    lcov = _call(api_schema, api_url, "GET /v1/jobs/{job_id}/coverage.info", path_parameters={"job_id": job_id})
    assert lcov.status_code == 200 and "DA:" in lcov.text
    html = _call(api_schema, api_url, "GET /v1/jobs/{job_id}/report.html", path_parameters={"job_id": job_id})
    assert html.status_code == 200 and "<html" in html.text.lower()

    batch = _call(
        api_schema,
        api_url,
        "POST /v1/batches",
        body={"requests": [_counter_request(), _counter_request()], "wait": MAX_WAIT_S},
    )
    assert batch.status_code in (200, 202), batch.text
    status = _call(
        api_schema,
        api_url,
        "GET /v1/batches/{batch_id}",
        path_parameters={"batch_id": batch.json()["batch_id"]},
        query={"wait": MAX_WAIT_S},
    )
    assert status.status_code in (200, 202)

    row = {
        "id": "fuzz_ctr_0001",
        "categories": ["cid012", "easy"],
        "input": {"prompt": "Write a testbench for `ctr`, instance `uut`.", "context": {}},
        "output": {"response": "", "context": {"verif/tb.sv": ""}},
        "harness": {
            "files": {
                "src/ctr.v": COUNTER,
                "src/.env": "TARGET = 80\n",
                "src/process.py": 'assert metrics["uut"]["Overall Average"] >= 80\n',
            }
        },
    }
    loaded = _call(
        api_schema, api_url, "POST /v1/problems:load", body=json.dumps(row) + "\n", media_type="application/x-ndjson"
    )
    assert loaded.status_code == 201 and loaded.json()["ids"] == ["fuzz_ctr_0001"], loaded.text
    got = _call(api_schema, api_url, "GET /v1/problems/{problem_id}", path_parameters={"problem_id": "fuzz_ctr_0001"})
    assert got.status_code == 200
    gone = _call(
        api_schema, api_url, "DELETE /v1/problems/{problem_id}", path_parameters={"problem_id": "fuzz_ctr_0001"}
    )
    assert gone.status_code == 204


def test_without_api_key_every_v1_operation_is_a_documented_401(shared_cache_dir, tmp_path):
    """With API keys set, generated requests without a key get 401 ``ErrorBody`` on every
    ``/v1/`` operation (checked by the same schema checks; the key is never in the answer)."""
    app_settings = Settings(
        cache_dir=shared_cache_dir,
        work_root=tmp_path,
        result_cache=False,
        score_workers=1,
        warm_on_register=False,
        default_wait_s=0.0,
        max_wait_s=MAX_WAIT_S,
        api_keys=["fuzz-secret-key"],
    )
    with live_server(create_app(settings=app_settings)) as url:
        api_schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        statuses: Counter = Counter()

        def fuzz(label: str) -> None:
            """Generated requests of ``label``'s operation, without a key; counts their statuses."""
            operation = api_schema.find_operation_by_label(label)

            @settings(
                max_examples=5, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
            )
            @given(case=operation.as_strategy(GenerationMode.POSITIVE))
            def run(case):
                case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
                response = case.call_and_validate(base_url=url, checks=CHECKS, timeout=30)
                assert "fuzz-secret-key" not in response.text
                statuses[(label, response.status_code)] += 1

            run()

        for label in OPERATIONS:
            if " /v1/" in label:
                fuzz(label)
        assert statuses and all(status == 401 for _, status in statuses), statuses
