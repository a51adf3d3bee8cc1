"""The API<->worker job contract (reward_service.dispatch.contract): the server package never
imports ``workers``, importing the dispatcher builds no Celery app, and the broker libraries'
errors leave the dispatcher as our own BrokerUnavailable (real refused connections, no stubs)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reward_service
from reward_service.dispatch.base import BrokerUnavailable
from reward_service.settings import Settings

PACKAGE = Path(reward_service.__file__).parent
#: A module path of the workers package, as an import statement or a string names it.
WORKERS = re.compile(r"^workers(\.[A-Za-z_]\w*)*$")
#: Nothing listens on port 1 of the loopback: every connection is refused at once.
DEAD = "redis://127.0.0.1:1/0"


def workers_imports(text: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every import of the workers package in ``text``: import statements
    (late ones included) and string constants naming a workers module (``__import__``,
    ``importlib.import_module``, a Celery ``include`` list)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, a.name) for a in node.names if WORKERS.match(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and WORKERS.match(node.module or ""):
            found.add((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and (getattr(node.func, "id", None) == "__import__" or getattr(node.func, "attr", None) == "import_module")
        ):
            if isinstance(node.args[0].value, str) and WORKERS.match(node.args[0].value):
                found.add((node.lineno, repr(node.args[0].value)))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "." in node.value
            and WORKERS.match(node.value)
        ):  # a dotted module path (a bare "workers" is a word)
            found.add((node.lineno, repr(node.value)))
    return sorted(found)


def test_the_checker_sees_each_way_of_naming_workers():
    text = (
        "import workers\n"
        "def f():\n    from workers.celery_app import app\n"
        "x = __import__('workers.tasks')\n"
        "include = ['workers.control']\n"
        "m = importlib.import_module('workers')\n"
        "import workersfoo\nfrom reward_service import workers_doc\n"
        "y = {'workers': 'ok', 'doc': 'workers/ and workers.md'}\n"
    )
    assert workers_imports(text) == [
        (1, "workers"),
        (3, "workers.celery_app"),
        (4, "'workers.tasks'"),
        (5, "'workers.control'"),
        (6, "'workers'"),
    ]


def test_reward_service_never_imports_workers():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    bad = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in modules
        for line, what in workers_imports(path.read_text())
    ]
    assert bad == []


def test_importing_the_dispatcher_builds_no_celery_app_and_no_worker_module():
    """In a fresh interpreter: importing the dispatcher (and the API) imports nothing of
    ``workers`` and creates no Celery app; a CeleryDispatcher creates exactly its client app,
    which names no worker module."""
    code = f"""
import sys
import celery._state as state
import reward_service.api.main, reward_service.dispatch.celery
print(sorted(m for m in sys.modules if m == "workers" or m.startswith("workers.")))
print(len(list(state._get_active_apps())))
from reward_service.settings import Settings
d = reward_service.dispatch.celery.CeleryDispatcher(Settings(broker_url={DEAD!r}), reaper=False)
apps = list(state._get_active_apps())
print([(a.main, list(a.conf.include)) for a in apps])
print(sorted(m for m in sys.modules if m == "workers" or m.startswith("workers.")))
d.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "0", "[('reward_service-client', [])]", "[]"]


def test_the_worker_app_is_the_contracts_with_the_worker_modules():
    from reward_service.dispatch.contract import QUEUE, celery_config
    from workers.celery_app import INCLUDE, app

    assert list(app.conf.include) == list(INCLUDE) == ["workers.tasks", "workers.control", "workers.lifecycle"]
    settings = Settings(broker_url="redis://h:1/2")
    assert celery_config(settings)["task_default_queue"] == QUEUE
    for module in INCLUDE:  # each names a module that exists
        assert (PACKAGE.parent / (module.replace(".", "/") + ".py")).is_file()


def test_redis_errors_leave_the_dispatcher_as_broker_unavailable():
    """Every public method of the Celery dispatcher that talks to Redis, against a port where
    nothing listens: our exception, chained to redis-py's."""
    import redis
    from samples import ARBITER, icarus_case

    from reward_service.dispatch.celery import CeleryDispatcher

    d = CeleryDispatcher(Settings(broker_url=DEAD), reaper=False)
    try:
        job = "ab" * 32
        calls = {
            "submit": lambda: d.submit(icarus_case(ARBITER)),
            "submit_many": lambda: d.submit_many([icarus_case(ARBITER)]),
            "submit_background": lambda: d.submit_background(icarus_case(ARBITER)),
            "get": lambda: d.get(job),
            "wait": lambda: d.wait(job, 0.1),
            "resend": lambda: d.resend(job),
            "queue_depth": d.queue_depth,
            "job_stats": lambda: d.job_stats(job),
            "worker_stats": d.worker_stats,
            "reap_lapsed": d.reap_lapsed,
        }
        for name, call in calls.items():
            with pytest.raises(BrokerUnavailable, match="the job queue") as caught:
                call()
            assert isinstance(caught.value.__cause__, redis.RedisError), name
        assert d.ready()["redis"].startswith("unreachable")  # readiness reports, never raises
    finally:
        d.close()


def test_kombu_errors_are_translated_too():
    """Celery's producer raises kombu's OperationalError once its connection retries are spent."""
    import kombu
    import kombu.exceptions

    from reward_service.dispatch.contract import broker_errors

    with kombu.Connection(DEAD) as conn:
        with pytest.raises(BrokerUnavailable) as caught:
            with broker_errors():
                conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
    assert isinstance(caught.value.__cause__, kombu.exceptions.OperationalError)
    with pytest.raises(KeyError):  # anything else passes through untouched
        with broker_errors():
            raise KeyError("not a broker error")


def test_the_reaper_logs_an_unreachable_redis_in_one_line(caplog):
    """While Redis is away the reaper of every API process and worker fails each second: one
    warning line naming the outage, not a traceback per round."""
    import logging

    from reward_service.dispatch.celery import CeleryDispatcher

    with caplog.at_level(logging.WARNING, logger="reward_service.dispatch.leases"):
        d = CeleryDispatcher(Settings(broker_url=DEAD), reaper=True)
        try:
            deadline = time.monotonic() + 10
            while not caplog.records and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            d.close()
    assert caplog.records, "the reaper ran no round"
    record = caplog.records[0]
    assert record.getMessage().startswith("lease reaper round failed: the job queue (Redis) is unavailable")
    assert record.exc_info is None


@pytest.mark.parametrize("name", ["ENGINE_REVISION", "FASTCOV_VERSION", "PROVER_REVISION", "__version__"])
def test_a_revision_bump_changes_job_ids_and_cache_keys(monkeypatch, name):
    # Job ids name the stored results a worker answers repeats with, and the result cache is
    # keyed alike: a bump of any revision that changes results must give new ids and keys, or
    # the old results would be served after it.
    import reward_service.revisions as revisions
    from reward_service.cache import request_key
    from reward_service.dispatch.contract import job_id_for
    from reward_service.models import ScoreRequest

    request = ScoreRequest.model_validate(
        {
            "design": {"files": {"d.sv": "module d(input a, output b); assign b = a; endmodule"}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; initial $finish; endmodule"}},
        }
    )
    before = job_id_for(request), request_key(request, request.design, request.stimulus, {})
    monkeypatch.setattr(revisions, name, getattr(revisions, name) + "-bumped")
    after = job_id_for(request), request_key(request, request.design, request.stimulus, {})
    assert after[0] != before[0] and after[1] != before[1]
