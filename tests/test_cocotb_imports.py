"""cocotb runs where no test ran (issue 9, point 2): a test module that cannot be imported (a
missing helper module, a package the sandbox lacks, a SyntaxError), that defines no test, or
whose every test is skipped is a failure whose message carries the Python exception, reward 0
(chorus), ``passed`` false, on Icarus, Verilator and the fast path, on cocotb 2.1 and 1.9 alike.
And the packages stimulus may import (docs/cocotb.md, "Python packages") are there and work.

Expected exception texts are computed independently: the host's own Python compiles or imports
the same source outside the engine (:func:`host_exception`)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

DUT = """module imp_acc(input clk, input rst, input [7:0] d, input v,
               output reg [11:0] sum, output reg [3:0] n);
  always @(posedge clk)
    if (rst) begin
      sum <= 0;
      n <= 0;
    end else if (v) begin
      sum <= sum + {4'b0, d};
      n <= n + 4'd1;
    end
endmodule
"""

#: A test that would drive the DUT, once its first line imports.
DRIVES = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
{imports}

@cocotb.test({args})
async def drive(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.v.value = 0
    dut.d.value = 0
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    for value in (1, 2, 250, 7):
        dut.d.value = value
        dut.v.value = 1
        await RisingEdge(dut.clk)
    dut.v.value = 0
    await RisingEdge(dut.clk)
"""

#: name -> (stimulus files, expected status, how the expected exception is computed)
BROKEN = {
    "missing_helper": (
        {"test_acc.py": DRIVES.format(imports="from acc_helpers import scoreboard", args="")},
        "runtime_error",
        "import",
    ),
    "missing_package": (
        {"test_acc.py": DRIVES.format(imports="import rs_no_such_package.bus", args="")},
        "runtime_error",
        "import",
    ),
    # The SyntaxError is in a helper the test module imports: still the stimulus's compile error.
    "syntax_error": (
        {
            "test_acc.py": DRIVES.format(imports="import acc_helpers", args=""),
            "acc_helpers.py": "def scoreboard(x)\n    return x\n",
        },
        "compile_error",
        "import",
    ),
    "zero_tests": ({"test_acc.py": "import cocotb\n\nasync def not_a_test(dut):\n    pass\n"}, "runtime_error", None),
    "all_skipped": ({"test_acc.py": DRIVES.format(imports="", args="skip=True")}, "runtime_error", None),
}

NO_TESTS = "the cocotb test module 'test_acc' defines no test (no @cocotb.test() function was discovered)"
ALL_SKIPPED = "every cocotb test was skipped (1 of 1): no stimulus ran"


def host_exception(files: dict[str, str], tmp_path: Path) -> str:
    """``Type: message`` of importing ``test_acc`` with the host's Python, in a directory holding
    only ``files`` (the independent twin of the sandboxed import)."""
    where = tmp_path / "host_import"
    where.mkdir()
    for name, text in files.items():
        (where / name).write_text(text)
    code = (
        "try:\n    import test_acc\nexcept BaseException as exc:\n"
        "    print(f'{type(exc).__name__}: {exc}')\nelse:\n    print('imported')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=where, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() != "imported", proc
    return proc.stdout.strip()


def request(files: dict[str, str], simulator: str = "icarus", engine: str | None = None, runtime: str = "auto") -> dict:
    req = {
        "design": {"files": {"imp_acc.v": DUT}, "toplevel": "imp_acc"},
        "stimulus": {"kind": "cocotb", "files": files, "test_module": "test_acc", "runtime": runtime},
        "simulator": simulator,
        "coverage": {"metrics": ["line", "toggle"]},
    }
    if engine:
        req["engine"] = engine
    return req


def expected_message(case: str, tmp_path: Path) -> str:
    files, _, how = BROKEN[case]
    if how == "import":
        return f"the cocotb test module could not be imported: {host_exception(files, tmp_path)}"
    return NO_TESTS if case == "zero_tests" else ALL_SKIPPED


def assert_failed(result, case: str, message: str, engine: str) -> None:
    status = BROKEN[case][1]
    assert result.status == status, (result.status, result.message, result.log[-2000:])
    assert result.message.split("; ran on cocotb")[0] == message
    assert result.reward == 0.0 and result.passed is False
    assert result.ended_by == "no_tests"
    assert result.engine == engine and result.fallback is None  # the fast path does not fall back
    if case == "all_skipped":
        assert [(t.name, t.passed) for t in result.tests] == [("drive", True)]
    else:
        assert result.tests == []


# ---------------------------------------------------------------------------------------------
# no test ran


@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("runtime", ["cocotb-2.1", "cocotb-1.9"])
def test_icarus_run_without_tests_fails(engine, tmp_path, case, runtime):
    result = engine.score(request(BROKEN[case][0], runtime=runtime))
    assert_failed(result, case, expected_message(case, tmp_path), "icarus")
    assert ("ran on cocotb 1.9" in result.message) == (runtime == "cocotb-1.9")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_fast_path_run_without_tests_fails_without_fallback(engine, tmp_path, case):
    result = engine.score(request(BROKEN[case][0], engine="fast"))
    assert_failed(result, case, expected_message(case, tmp_path), "fast")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing_helper", "missing_package", "syntax_error", "zero_tests"])
def test_verilator_run_without_tests_fails(engine, tmp_path, case):
    """One DUT model (built once per design) serves every case."""
    result = engine.score(request(BROKEN[case][0], simulator="verilator"))
    assert_failed(result, case, expected_message(case, tmp_path), "verilator")
    assert result.coverage.overall is not None  # coverage.dat was written, and does not count


#: Imports that fail although every shipped package is installed: the test's own mistake (a
#: module cocotb 2.x removed, a submodule that never existed, an exception the test raises
#: itself), never a sandbox_error (reward None would drop the sample: a cheap escape from 0).
OWN_IMPORT_FAILURES = {
    "removed_in_cocotb2": "from cocotb.binary import BinaryValue",
    "no_such_submodule": "import cocotb_bus.rs_gone",
    "raised_by_the_test": "raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')",
    "raised_yaml": "raise ModuleNotFoundError(\"No module named 'yaml'\", name='yaml')",
}


@pytest.mark.parametrize("case", sorted(OWN_IMPORT_FAILURES))
def test_an_import_error_of_the_test_is_its_own(engine, tmp_path, case):
    files = {"test_acc.py": DRIVES.format(imports=OWN_IMPORT_FAILURES[case], args="")}
    result = engine.score(request(files, engine="fast", runtime="cocotb-2.1"))
    assert result.status == "runtime_error" and result.reward == 0.0, result.message
    assert (
        result.message.split("; ran on cocotb")[0]
        == f"the cocotb test module could not be imported: {host_exception(files, tmp_path)}"
    )


def test_a_missing_shipped_package_is_our_fault(engine, tmp_path, monkeypatch):
    """A package we ship that the toolchain probe did not find installed (here: a name added to
    the shipped list, standing in for a broken install) is a sandbox_error."""
    from reward_service.simulators import cocotb_runtime

    shipped = dict(cocotb_runtime.STIMULUS_PACKAGES)
    shipped["cocotb-2.1"] = (*shipped["cocotb-2.1"], "rs_gone_pkg")
    monkeypatch.setattr(cocotb_runtime, "STIMULUS_PACKAGES", shipped)
    files = {"test_acc.py": DRIVES.format(imports="import rs_gone_pkg.bus", args="")}
    result = engine.score(request(files, engine="fast", runtime="cocotb-2.1"))
    assert result.status == "sandbox_error" and result.reward is None, result.message
    assert result.message.startswith(
        f"the cocotb test module could not be imported: {host_exception(files, tmp_path)} (rs_gone_pkg is shipped"
    )


def test_no_test_ran_is_cached_as_the_failure(tmp_path):
    """With the result cache on, the second request gets the same failure, never an ok."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    cached_engine = Engine(Settings(cache_dir=tmp_path, result_cache=True))  # a fresh result cache
    req = request(BROKEN["missing_package"][0])
    first, second = cached_engine.score(req), cached_engine.score(req)
    assert first.status == second.status == "runtime_error"
    assert second.cache.result is True and second.reward == 0.0 and second.message == first.message


# ---------------------------------------------------------------------------------------------
# the packages stimulus may import

#: cocotb_bus drives the DUT's inputs as a bus; the module holds its own pytest runner
#: (cocotb_test), as many public test files do. The data are numpy's
#: ``default_rng(7).integers(0, 256, size=9)`` written out: numpy is not loaded in a guarded run
#: (the default policy: its arrays over a raw address read the simulator's memory;
#: tests/test_redteam_native.py), the coverage below was measured with these values.
PACKAGES_TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotb_bus.drivers import BusDriver
from cocotb_test.simulator import run


def test_runner():  # for pytest outside the engine; cocotb never calls it
    run(verilog_sources=["imp_acc.v"], toplevel="imp_acc", module="test_acc")


class AccDriver(BusDriver):
    _signals = ["d", "v"]

    async def _driver_send(self, value, sync=True):
        self.bus.d.value = int(value)
        self.bus.v.value = 1
        await RisingEdge(self.clock)
        self.bus.v.value = 0


@cocotb.test()
async def sums(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.v.value = 0
    dut.d.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    data = [241, 160, 175, 229, 148, 198, 213, 57, 14]
    driver = AccDriver(dut, None, dut.clk)
    for value in data:
        await driver.send(value)
    await RisingEdge(dut.clk)
    assert int(dut.sum.value) == sum(data) % 4096
    assert int(dut.n.value) == len(data)
"""

#: Measured independently: imp_acc built and run outside the engine and its sandbox with cocotb
#: 2.1's own runner (cocotb_tools.runner.get_runner("verilator"), build_args --coverage-line
#: --coverage-toggle --timing, timescale 1ns/1ps, seed 0), its coverage.dat parsed by separate
#: code (one point per `C` record of imp_acc.v, by type `t`, covered when the count > 0).
PACKAGES_COVERAGE = {"line": (2, 2), "toggle": (50, 54)}


@pytest.mark.parametrize("where", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_shipped_packages_pass_and_yield_coverage(engine, where):
    files = {"test_acc.py": PACKAGES_TEST}
    req = request(files, engine="fast") if where == "fast" else request(files, simulator="verilator")
    result = engine.score(req)
    assert result.status == "ok", (result.message, result.log[-3000:])
    assert [(t.name, t.passed) for t in result.tests] == [("sums", True)], result.log[-3000:]
    assert result.engine == where and result.passed is True
    measured = {m: (c.covered, c.total) for m, c in result.coverage.metrics.items() if c.total}
    assert measured == PACKAGES_COVERAGE
    assert result.reward == pytest.approx(1.0 + result.coverage.overall)


def test_shipped_packages_on_cocotb19(engine):
    """The same test on the cocotb 1.9 runtime (Icarus), which ships the same packages."""
    result = engine.score(request({"test_acc.py": PACKAGES_TEST}, runtime="cocotb-1.9"))
    assert result.status == "ok", (result.message, result.log[-3000:])
    assert [(t.name, t.passed) for t in result.tests] == [("sums", True)], result.log[-3000:]


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#")[0].strip().strip('"')
        if line:
            name = line.split(">")[0].split("=")[0].split("<")[0]
            out[name] = line
    return out


def test_stimulus_package_lists_agree():
    """pyproject's `stimulus` extra, the simulation image's pip line, the cocotb 1.9 pins, the
    toolchain probe's versions and the runtime's import list name the same packages."""
    from reward_service.sandbox.toolchain_probe import STIMULUS_DISTS
    from reward_service.simulators.cocotb_runtime import STIMULUS_PACKAGES

    extra = _pins(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["stimulus"])
    pins19 = _pins((REPO / "sim_images" / "cocotb-1.9.txt").read_text().splitlines())
    dockerfile = (REPO / "sim_images" / "Dockerfile").read_text()
    assert all(f'"{pin}"' in dockerfile for pin in extra.values())
    assert {k: v for k, v in pins19.items() if not k.startswith("cocotb") or k in extra} == extra
    assert set(pins19) - set(extra) == {"cocotb", "cocotb-coverage", "cocotbext-spi"}
    assert set(STIMULUS_DISTS) == set(extra) | {"cocotbext-spi"}
    imports = {d.replace("cocotbext-", "cocotbext.").replace("-", "_") for d in extra}
    assert "cocotb_test" in imports
    assert imports <= set(STIMULUS_PACKAGES["cocotb-2.1"])
    assert imports | {"cocotbext.spi"} <= set(STIMULUS_PACKAGES["cocotb-1.9"])
    assert "cocotbext.spi" not in STIMULUS_PACKAGES["cocotb-2.1"]  # 0.5 needs cocotb 1.x


# ---------------------------------------------------------------------------------------------
# the Docker sandbox (the simulation image ships the same packages)


@pytest.fixture(scope="module")
def docker_engine(shared_cache_dir):
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
        client.images.get("reward-service-sim:latest")
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon or simulation image: {exc}")
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    return Engine(
        Settings(
            cache_dir=shared_cache_dir, result_cache=False, sandbox="docker", docker_volume_prefix="reward-service-test"
        )
    )


@pytest.mark.parametrize("runtime", ["cocotb-2.1", "cocotb-1.9"])
def test_docker_sandbox_same_answers(docker_engine, tmp_path, runtime):
    passing = docker_engine.score(request({"test_acc.py": PACKAGES_TEST}, engine="fast", runtime=runtime))
    assert passing.status == "ok", (passing.message, passing.log[-3000:])
    assert [(t.name, t.passed) for t in passing.tests] == [("sums", True)]
    assert {m: (c.covered, c.total) for m, c in passing.coverage.metrics.items() if c.total} == PACKAGES_COVERAGE
    assert passing.versions["sandbox"].startswith("docker:")
    broken = docker_engine.score(request(BROKEN["missing_package"][0], engine="fast", runtime=runtime))
    assert_failed(broken, "missing_package", expected_message("missing_package", tmp_path), "fast")


# ---------------------------------------------------------------------------------------------
# the rule itself, on what a run step can leave behind


def _run_step(output: str, exit_code: int = 0, **flags):
    from reward_service.sandbox import ExecResult
    from reward_service.simulators.base import SimRun

    out = SimRun(
        run=ExecResult(
            exit_code=exit_code, output=output, output_bytes=len(output), dropped_bytes=0, duration_ms=1.0, **flags
        )
    )
    out.ended_by = "exit"
    return out


def test_no_results_xml_without_a_record():
    from reward_service.simulators.cocotb_flow import no_test_ran

    log_text = "Traceback (most recent call last):\n  File x\nImportError: cannot import name 'Foo' from 'bar'\n"
    assert no_test_ran(_run_step(log_text), {"exit": 0}, {}, "cocotb-2.1", "test_acc") == (
        "runtime_error",
        "the cocotb run wrote no results.xml, no test ran: ImportError: cannot import name 'Foo' from 'bar'",
    )
    # The runner failing around the simulator (driver exit 2/3) is our installation's fault.
    status, message = no_test_ran(
        _run_step("", 2), {"exit": 2, "error": "runner exited: 'vvp'"}, {}, "cocotb-2.1", "test_acc"
    )
    assert status == "sandbox_error" and message.endswith("runner exited: 'vvp'")
    # ... only when the driver's own exit says so: the status file alone can be the test's forgery
    forged = no_test_ran(
        _run_step("bwrap: x\n", -9), {"exit": 2, "error": "runner exited: 'vvp'"}, {}, "cocotb-2.1", "test_acc"
    )
    assert forged[0] == "runtime_error", forged
    assert (
        no_test_ran(_run_step("bwrap: execvp x: No such file or directory\n", -9), {}, {}, "cocotb-2.1", "test_acc")[0]
        == "runtime_error"
    )
    # bubblewrap could not start the driver (e.g. a venv the sandbox does not show): ours too.
    status, message = no_test_ran(
        _run_step("bwrap: execvp /x/bin/python: No such file or directory\n", 1), {}, {}, "cocotb-1.9", "test_acc"
    )
    assert status == "sandbox_error" and message.endswith("bwrap: execvp /x/bin/python: No such file or directory")
    # Cut-short runs keep their own statuses (timeout, limits, crash by signal).
    crashed = _run_step("", exit_code=-11)
    crashed.ended_by = "crash"
    assert no_test_ran(crashed, {}, {}, "cocotb-2.1", "test_acc") is None
    assert no_test_ran(_run_step("", timed_out=True), {}, {}, "cocotb-2.1", "test_acc") is None


#: A test that, at the simulator's exit, removes results.xml, writes the driver's status file as
#: a runner failure and kills the driver before it writes its own.
FORGES_RUNNER_FAILURE = """import cocotb, json, os, signal, atexit


def _later():
    try:
        os.remove("/work/results" + ".xml")
    except OSError:
        pass
    json.dump({"exit": 2, "error": "runner exited"}, open("/work/rs_" + "status.json", "w"))
    os.kill(os.getppid(), signal.SIGKILL)


atexit.register(_later)


@cocotb.test()
async def fails(dut):
    assert False
"""


def test_a_forged_runner_failure_is_not_a_sandbox_error(engine):
    """reward None would drop a sample whose test fails: a forged status file must not do it."""
    result = engine.score(request({"test_acc.py": FORGES_RUNNER_FAILURE}, engine="fast", runtime="cocotb-2.1"))
    assert result.status != "sandbox_error" and result.reward == 0.0, (result.status, result.message)
