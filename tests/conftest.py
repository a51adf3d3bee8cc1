"""Shared fixtures: the real inputs in ../shared/cases and one engine whose caches (ccache,
built models) are shared by the whole session, so Verilator builds are paid once."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from case_numbers import MOVED_ON_5052, TIME0_MOVED, current_numbers  # noqa: F401  (tests import them from here)

REPO = Path(__file__).resolve().parents[1]
SHARED_CASES = Path(os.environ.get("REWARD_SERVICE_CASES", REPO.parent / "shared" / "cases"))
CID012 = SHARED_CASES / "cvdp" / "cid012.jsonl"
STIMULUS = SHARED_CASES / "stimulus"
ADVERSARIAL = SHARED_CASES / "adversarial"
#: The stimulus cases whose testbench forces DUT registers (ring_token good.sv: the output
#: register ``token``; best.sv: it and ``current_state``): refused under a CVDP problem's default
#: stimulus policy (docs/integrity.md). Tests whose subject is not the policy (what the engines
#: measure, fault tolerance) score them with ``ALLOW_DUT_WRITES``; end-to-end tests of a
#: problem's default policy (adapters, rescore) expect the refusal.
FORCING_CASES = frozenset({("cvdp_copilot_ring_token_0004", "good"), ("cvdp_copilot_ring_token_0004", "best")})
ALLOW_DUT_WRITES = {"dut_writes": "allow"}
#: Why a test that needs the shared cases is skipped on a checkout without them.
CASES_MISSING = (
    f"the workspace's shared cases are not at {SHARED_CASES} (../shared/cases beside the checkout): "
    "set REWARD_SERVICE_CASES=/path/to/shared/cases"
)


def cases_missing() -> bool:
    """True when the shared cases directory (``SHARED_CASES``: $REWARD_SERVICE_CASES when set, else
    ../shared/cases beside the checkout, fixed at import) is absent."""
    return not SHARED_CASES.is_dir()


#: For tests that need the shared cases but would not read them in this process before failing
#: (a CLI run given their path) and for tests parametrized on :func:`stimulus_dirs` (an empty
#: parameter set when the cases are missing): skipped, saying why, when the cases are missing.
#: Tests that read a case file in this process need no mark: see :func:`pytest_runtest_setup`.
needs_cases = pytest.mark.skipif(cases_missing(), reason=CASES_MISSING)


def require_cases() -> None:
    """Skip the calling test or fixture, saying why, when the shared cases are missing (for a
    fixture that only hands their path to a CLI run; see :data:`needs_cases`)."""
    if cases_missing():
        pytest.skip(CASES_MISSING)


def stimulus_dirs() -> list[Path]:
    """The entries of ``STIMULUS`` (one directory per problem), sorted; none when the shared
    cases are missing, so that a module listing them at import still collects."""
    return [] if cases_missing() else sorted(STIMULUS.iterdir())


def _is_missing_case(exc: BaseException) -> bool:
    """Whether ``exc`` is a FileNotFoundError for a path under the shared cases while they are
    missing. When the cases are there, a missing case file stays an error."""
    if not isinstance(exc, FileNotFoundError) or exc.filename is None or not cases_missing():
        return False
    return Path(os.path.abspath(os.fsdecode(exc.filename))).is_relative_to(os.path.abspath(SHARED_CASES))


@contextlib.contextmanager
def _missing_case_skips() -> Iterator[None]:
    """Turns a FileNotFoundError for a shared case file, while the cases are missing, into a skip
    saying why (:data:`CASES_MISSING`)."""
    try:
        yield
    except FileNotFoundError as exc:
        if _is_missing_case(exc):
            pytest.skip(f"{CASES_MISSING} ({exc.filename} is missing)")
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """A fixture (of any scope) that reads a shared case file while the cases are missing skips
    its tests instead of erroring with FileNotFoundError."""
    with _missing_case_skips():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A test body that reads a shared case file while the cases are missing skips (as in
    :func:`pytest_runtest_setup`)."""
    with _missing_case_skips():
        return (yield)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Says up front when the real inputs are not where the tests read them (the tests that
    need them are then skipped; the others still run)."""
    if not cases_missing():
        return None
    return f"WARNING: {CASES_MISSING}; the tests that need them are skipped"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--dist loadgroup`` (pyproject's addopts) grouping by ``xdist_group``.

    xdist's worker groups a test by appending ``@<group>`` to its node id (its own
    pytest_collection_modifyitems, which this one runs after), by assigning ``item._nodeid``.
    pytest 9.2 derives ``nodeid`` from a structured id instead, so that assignment has no
    effect and every grouped test was scheduled on its own (pytest-xdist issue 1386): the
    compose-stack modules' stacks were brought up once per xdist worker, two of them ran at
    once on a 2-core machine, and a module's tests split between the stacks. Where the suffix
    is missing it is set here; where it still cannot be, the run stops instead of silently
    running ungrouped.

    Only xdist workers (they have ``workerinput``) collect the items that get scheduled. A
    worker's ``dist`` option is always "no" (xdist's ``setup_config`` resets it after setting
    ``loadgroup`` from it), so ``loadgroup`` is what says --dist loadgroup; it is read without a
    default so that a worker without it (xdist renamed it) stops the run."""
    if not hasattr(config, "workerinput"):
        return
    try:
        loadgroup = config.getoption("loadgroup")
    except ValueError:
        raise pytest.UsageError(
            "this xdist worker has no loadgroup option: cannot tell whether --dist loadgroup is on"
        ) from None
    if not loadgroup:
        return
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))  # the suffix xdist's scheduler splits on
        if not item.nodeid.endswith(suffix):
            from _pytest.nodeid import NodeId  # pytest >= 9.2

            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(
                f"cannot put {item.nodeid} in xdist group {suffix[1:]}: loadgroup would not group it"
            )


def case_expected(problem_id: str) -> dict:
    """A stimulus case's expected.json with the numbers our engines give now
    (:func:`case_numbers.current_numbers`)."""
    return current_numbers(problem_id, json.loads((STIMULUS / problem_id / "expected.json").read_text()))


def cid012_rows() -> dict[str, dict]:
    with open(CID012, encoding="utf-8") as fh:
        return {row["id"]: row for row in map(json.loads, fh)}


def rtl_files(row: dict) -> dict[str, str]:
    """The RTL of a cid012 row (harness src/*.sv|*.v), names without the src/ prefix."""
    files = row["harness"].get("files", row["harness"])
    return {k[4:]: v for k, v in files.items() if k.startswith("src/") and k.endswith((".sv", ".v"))}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live_server(app, port: int | None = None) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn in a thread on 127.0.0.1 (a free port unless given);
    yield its base URL, e.g. ``http://127.0.0.1:41234``. Stopped on exit."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextlib.contextmanager
def embedded_service(cache_dir: Path, results_dir: Path) -> Iterator[str]:
    """The embedded service for trainer end-to-end tests, served by :func:`live_server`: two
    simulation workers, no result cache (every request really simulates; job results kept in
    ``results_dir``), the Verilator build cache in ``cache_dir``. Yields its base URL."""
    from reward_service.api import create_app
    from reward_service.cache import ResultCache
    from reward_service.dispatch.local import LocalDispatcher
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    settings = Settings(cache_dir=cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    engine = Engine(settings)
    engine.results = ResultCache(results_dir)
    with live_server(create_app(LocalDispatcher(engine, workers=2), settings=settings)) as url:
        yield url


def run_trainer_example(
    example: Path, service_url: str, out: Path, *args: str, timeout: float = 900
) -> tuple[dict, str]:
    """Run a trainer example (examples/trainers/*.py) against ``service_url`` with
    ``--log-history out`` and ``args``; return (the JSON it wrote, its stdout). Fails the test
    with the end of its output when it exits non-zero."""
    import subprocess
    import sys

    env = {**os.environ, "REWARD_SERVICE_URL": service_url, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(example), *args, "--log-history", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text()), proc.stdout


@pytest.fixture(scope="module")
def trl_extra() -> None:
    """Skips the module's tests when the `trl` extra (torch, transformers, trl) is not installed in
    this interpreter, the one :func:`run_trainer_example` runs an example with. Request it before
    :func:`trainer_service` so that no service is started for nothing."""
    for name in ("torch", "transformers", "trl"):
        pytest.importorskip(name, reason=f"{name} is not installed (the `trl` extra: scripts/install.sh --test)")


@pytest.fixture(scope="module")
def trainer_service(shared_cache_dir, tmp_path_factory) -> Iterator[str]:
    """:func:`embedded_service` for one test module (the trainer end-to-end tests); its URL."""
    with embedded_service(shared_cache_dir, tmp_path_factory.mktemp("results")) as url:
        yield url


@pytest.fixture(scope="session")
def shared_cache_dir() -> Path:
    """One cache dir (ccache, built models) shared by all xdist workers and runs, so each
    Verilator C++ object is compiled once; REWARD_SERVICE_TEST_CACHE overrides its place."""
    path = Path(os.environ.get("REWARD_SERVICE_TEST_CACHE", Path(tempfile.gettempdir()) / "reward-service-test-cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def engine(shared_cache_dir):
    """An engine without the result cache (each test really simulates) and shared ccache."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    return Engine(Settings(cache_dir=shared_cache_dir, result_cache=False))


@pytest.fixture
def isolated(shared_cache_dir, tmp_path):
    """An engine whose work dirs live in tmp_path/work, inside an otherwise empty parent; after
    the test, nothing may have appeared outside the work dirs and no sandbox process may live."""
    from helpers import sandbox_processes, tree

    from reward_service.engine import Engine
    from reward_service.settings import Settings

    work = tmp_path / "work"
    work.mkdir()
    engine = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False, work_root=work))
    before = tree(tmp_path)
    yield engine
    from reward_service.scoring import workdir

    assert workdir.drain(60), "work dirs still being removed after 60 s"
    assert tree(tmp_path) == before, "something was written outside the sample's work dir"
    assert not sandbox_processes(work), "a sandbox process was left behind"
