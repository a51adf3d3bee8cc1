"""One problem-resolution rule: a request naming a problem resolves to the same full request
through the CLI (``reward-service score --problems/--problem-id``), ``rescore`` and the API
(``POST /v1/score``), and ``coverage``, ``limits`` and ``reward`` merge field by field on every
path (reward_service/problems/resolve.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CID012, STIMULUS
from typer.testing import CliRunner

from reward_service.api.service import resolve
from reward_service.cli import app
from reward_service.engine import Engine
from reward_service.models import Limits, ProblemSpec, RewardSpec, ScoreRequest
from reward_service.problems import load_problems
from reward_service.problems.store import InMemoryProblemStore
from reward_service.rescore.runner import _request as rescore_request
from reward_service.rescore.store import Sample
from reward_service.settings import Settings

PID = "cvdp_copilot_ring_token_0004"


class _Resolved(Exception):
    """Raised by the spy once the engine resolved the request: nothing is simulated."""


@pytest.fixture(scope="module")
def problems():
    return load_problems(CID012)


@pytest.fixture
def completion(tmp_path) -> Path:
    path = tmp_path / "completion.txt"
    path.write_text("Here is the testbench:\n```systemverilog\n" + (STIMULUS / PID / "best.sv").read_text() + "```\n")
    return path


def _cli_request(monkeypatch, completion: Path, *options: str) -> ScoreRequest:
    """The request the real ``reward-service score`` builds and its engine resolves."""
    seen: list[ScoreRequest] = []
    real = Engine.prepare

    def spy(self, request):
        seen.append(real(self, request).request)
        raise _Resolved

    monkeypatch.setattr(Engine, "prepare", spy)
    out = CliRunner().invoke(
        app,
        [
            "score",
            "--problems",
            str(CID012),
            "--problem-id",
            PID,
            "--completion",
            str(completion),
            "--json",
            "--no-cache",
            *options,
        ],
    )
    assert isinstance(out.exception, _Resolved), (out.exception, out.output)
    assert len(seen) == 1
    return seen[0]


def _api_request(problems, body: dict) -> ScoreRequest:
    """``POST /v1/score``'s resolution of ``body`` with the problem registered from the same row."""
    store = InMemoryProblemStore({PID: ProblemSpec.from_cvdp(problems[PID])})
    return resolve(ScoreRequest.model_validate(body), store)


def test_a_plain_problem_request_resolves_alike_on_all_three_paths(monkeypatch, tmp_path, problems, completion):
    text = completion.read_text()
    cli = _cli_request(monkeypatch, completion)
    api = _api_request(problems, {"problem_id": PID, "stimulus": {"kind": "completion", "text": text}})
    sample = Sample(problem_id=PID, sample_id=0, completion=text, line=1)
    rescore = rescore_request(problems, sample)
    assert cli == api == rescore
    # the problem's own fields, not the defaults of a bare request
    assert cli.coverage.scope == problems[PID].dut_instance and cli.coverage.exclude_unreachable is True
    assert [t.percent for t in cli.coverage.targets] == [problems[PID].target_percent]
    assert cli.engine == problems[PID].engine


def test_overrides_resolve_alike_through_the_cli_and_the_api(monkeypatch, tmp_path, problems, completion):
    cli = _cli_request(
        monkeypatch,
        completion,
        "--metric",
        "line",
        "--run-s",
        "7",
        "--shaping",
        "ratio",
        "--engine",
        "verilator",
        "--seed",
        "3",
    )
    api = _api_request(
        problems,
        {
            "problem_id": PID,
            "seed": 3,
            "engine": "verilator",
            "stimulus": {"kind": "completion", "text": completion.read_text()},
            "coverage": {"metrics": ["line"]},
            "limits": {"run_s": 7},
            "reward": {"shaping": "ratio"},
        },
    )
    assert cli == api
    # merged field by field: the problem's scope, target and exclusion stay with the given metrics
    assert cli.coverage.metrics == ["line"] and cli.coverage.scope == problems[PID].dut_instance
    assert cli.coverage.exclude_unreachable is True and cli.coverage.targets
    assert cli.limits == Limits(run_s=7) and cli.reward == RewardSpec(shaping="ratio")
    assert cli.engine == "verilator" and cli.seed == 3


def test_a_registered_problems_limits_and_reward_merge_in_the_engine_too(tmp_path, problems):
    """A problem with its own limits and reward: a request giving one limit (or one reward
    field) keeps the problem's others, in the engine (CLI, rescore, embedded) as in the API.
    The engine used to replace ``limits``/``reward`` whole, so compile_s fell back to 120 s."""
    spec = (
        problems[PID]
        .spec()
        .model_copy(
            update={
                "limits": Limits(compile_s=300, run_s=20, memory_mb=1024),
                "reward": RewardSpec(shaping="ratio", failure_value=-1.0),
            }
        )
    )
    body = {
        "problem_id": PID,
        "stimulus": {"kind": "sv_testbench", "files": {"best.sv": (STIMULUS / PID / "best.sv").read_text()}},
        "limits": {"run_s": 5},
        "reward": {"failure_value": -0.5},
    }
    engine = Engine(Settings(cache_dir=tmp_path, result_cache=False), problems={PID: spec})
    embedded = engine.prepare(ScoreRequest.model_validate(body)).request
    api = resolve(ScoreRequest.model_validate(body), InMemoryProblemStore({PID: spec}))
    assert embedded == api
    assert embedded.limits == Limits(compile_s=300, run_s=5, memory_mb=1024)
    assert embedded.reward == RewardSpec(shaping="ratio", failure_value=-0.5)
    # a field the request does not set is the problem's, whole
    bare = engine.prepare(ScoreRequest.model_validate({k: v for k, v in body.items() if k != "limits"})).request
    assert bare.limits == spec.limits


def test_a_problems_engine_applies_on_verilator_only(problems):
    """The engine choice of a problem request (reward_service.engine_choice): the problem's
    engine (CVDP: auto) on Verilator; a request for Icarus gets Icarus, unless it names an engine."""
    problem = problems[PID]
    assert problem.request("x").engine == problem.engine == "auto"
    assert problem.request("x", simulator="icarus").engine is None
    assert problem.request("x", simulator="icarus", engine="fast").engine == "fast"
    store = InMemoryProblemStore({PID: problem.spec()})
    api = resolve(
        ScoreRequest.model_validate(
            {"problem_id": PID, "simulator": "icarus", "stimulus": {"kind": "completion", "text": "x"}}
        ),
        store,
    )
    assert api.engine is None and api == problem.request("x", simulator="icarus")
