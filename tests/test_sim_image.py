"""The simulation image (sim_images/Dockerfile, built by scripts/build_images.sh) as the Docker
sandbox uses it: a CVDP case testbench built with the bare Verilator command and run inside it
gives the coverage of expected.json; the image has what the sandbox relies on (the mount points
it makes writable, owned by uid 65534; the cocotb 1.9 runtime; Icarus). The sandbox's own
policy is tested in tests/test_docker_sandbox.py."""

from __future__ import annotations

import json

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files

from reward_service.coverage import parse_coverage_dat, summarise
from reward_service.sandbox import ExecSpec

docker = pytest.importorskip("docker")
IMAGE = "reward-service-sim:latest"
PID = "cvdp_copilot_fixed_arbiter_0004"


@pytest.fixture(scope="module")
def sandbox():
    from reward_service.sandbox.docker import DockerSandbox

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon: {exc}")
    try:
        docker.from_env().images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} is missing: run scripts/build_images.sh (CI does)")
    return DockerSandbox(IMAGE, volume_prefix="reward-service-test")


@pytest.mark.slow
def test_case_testbench_in_the_sim_image_gives_expected_coverage(sandbox, tmp_path):
    expected = json.loads((STIMULUS / PID / "expected.json").read_text())["testbenches"]["good"]
    rtl = rtl_files(cid012_rows()[PID])
    for name, text in {**rtl, "tb.sv": (STIMULUS / PID / "good.sv").read_text()}.items():
        (tmp_path / name).write_text(text)
    root = sandbox.toolchain().verilator_root
    build = sandbox.run(
        ExecSpec(
            argv=[
                f"{root}/bin/verilator",
                "--binary",
                "--timing",
                "--coverage-line",
                "--coverage-toggle",
                "--coverage-expr",
                "--coverage-user",
                "-Wno-fatal",
                "-Wno-lint",
                "-Wno-style",
                "-CFLAGS",
                "-std=c++20",
                "-MAKEFLAGS",
                "CFG_CXXFLAGS_PCH_I=-include",
                "--top-module",
                "tb_fixed_priority_arbiter",
                "-Mdir",
                "obj",
                *rtl,
                "tb.sv",
            ],
            workdir=tmp_path,
            env={"VERILATOR_ROOT": root},
            timeout_s=900,
            memory_mb=4096,
            processes=256,
            outputs=("/work/obj/Vtb_fixed_priority_arbiter",),
        )
    )
    assert build.exit_code == 0, build.output[-3000:]
    run = sandbox.run(
        ExecSpec(argv=["/work/obj/Vtb_fixed_priority_arbiter"], workdir=tmp_path, outputs=("/work/coverage.dat",))
    )
    assert run.exit_code == 0, run.output[-3000:]
    report, _ = summarise(parse_coverage_dat(tmp_path / "coverage.dat", set(rtl)), ["line", "branch", "toggle", "expr"])
    got = {m: {"covered": c.covered, "total": c.total} for m, c in report.metrics.items()}
    assert got == expected["coverage"]


def test_image_has_what_the_sandbox_relies_on(sandbox, tmp_path):
    result = sandbox.run(
        ExecSpec(
            argv=[
                "python",
                "-c",
                (
                    "import os, subprocess\n"
                    "for d in ('/work', '/model', '/ccache'):\n"
                    "    st = os.stat(d); print('MOUNTPOINT', d, st.st_uid, st.st_gid)\n"
                    "print(subprocess.run(['iverilog', '-V'], capture_output=True, text=True).stdout.splitlines()[0])\n"
                    "print(subprocess.run(['/opt/reward-service/cocotb-1.9/bin/python', '-c', "
                    "'import cocotb, cocotb_coverage; print(\"COCOTB19\", cocotb.__version__)'], "
                    "capture_output=True, text=True).stdout)\n"
                ),
            ],
            workdir=tmp_path,
            outputs=(),
        )
    )
    assert result.exit_code == 0, result.output
    for d in ("/work", "/model", "/ccache"):  # the sandbox's writable mount points
        assert f"MOUNTPOINT {d} 65534 65534" in result.output
    assert "Icarus Verilog version 11.0" in result.output
    assert "COCOTB19 1.9." in result.output
