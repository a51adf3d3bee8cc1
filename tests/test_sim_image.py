"""The simulation image (sim_images/Dockerfile, built by scripts/build_images.sh): a CVDP case
testbench built and run inside it, with no network, a read-only root and uid 65534, gives the
coverage of expected.json; the container cannot reach the network. The Docker sandbox backend
(issue #3) runs its jobs in this image."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from conftest import STIMULUS, cid012_rows, rtl_files
from reward_service.coverage import parse_coverage_dat, summarise

docker = pytest.importorskip("docker")
IMAGE = "reward-service-sim:latest"
PID = "cvdp_copilot_fixed_arbiter_0004"


@pytest.fixture(scope="module")
def client():
    c = docker.from_env()
    try:
        c.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} is missing: run scripts/build_images.sh (CI does)")
    return c


def _tar(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid, info.mode = len(data), 65534, 65534, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run(client, command: str, files: dict[str, str], timeout: int = 300) -> tuple[int, str, dict[str, bytes]]:
    # The work dir is a fresh per-job volume: Docker refuses put_archive into a tmpfs of a
    # read-only-root container, but accepts a volume (and no host path is bound). A tmpfs-type
    # volume would vanish at exit with the results, so it is disk-backed; the file-size ulimit
    # caps what one file can take.
    volume = client.volumes.create()
    container = client.containers.create(
        IMAGE, ["sh", "-c", command], network_mode="none", read_only=True, user="65534:65534",
        volumes={volume.name: {"bind": "/work", "mode": "rw"}}, tmpfs={"/tmp": "size=64m"},
        cap_drop=["ALL"], security_opt=["no-new-privileges"], mem_limit="2g", pids_limit=256,
        working_dir="/work", ulimits=[docker.types.Ulimit(name="fsize", soft=1 << 30, hard=1 << 30)])
    try:
        container.put_archive("/work", _tar(files))
        container.start()
        status = container.wait(timeout=timeout)["StatusCode"]
        log = container.logs().decode(errors="replace")
        out: dict[str, bytes] = {}
        try:
            stream, _ = container.get_archive("/work/coverage.dat")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                out["coverage.dat"] = tar.extractfile("coverage.dat").read()
        except docker.errors.NotFound:
            pass
        return status, log, out
    finally:
        container.remove(force=True)
        volume.remove(force=True)


@pytest.mark.slow
def test_case_testbench_in_the_sim_image_gives_expected_coverage(client, tmp_path):
    expected = json.loads((STIMULUS / PID / "expected.json").read_text())["testbenches"]["good"]
    files = {**rtl_files(cid012_rows()[PID]), "tb.sv": (STIMULUS / PID / "good.sv").read_text()}
    rtl = " ".join(rtl_files(cid012_rows()[PID]))
    status, log, out = _run(client, (
        '"$VERILATOR_ROOT/bin/verilator" --binary --timing --coverage-line --coverage-toggle '
        "--coverage-expr --coverage-user -Wno-fatal -Wno-lint -Wno-style -CFLAGS -std=c++20 "
        f"-MAKEFLAGS CFG_CXXFLAGS_PCH_I=-include --top-module tb_fixed_priority_arbiter -Mdir obj {rtl} tb.sv "
        "> build.log 2>&1 || { tail -20 build.log; exit 3; }; ./obj/Vtb_fixed_priority_arbiter"), files)
    assert status == 0, log
    (tmp_path / "coverage.dat").write_bytes(out["coverage.dat"])
    report, _ = summarise(parse_coverage_dat(tmp_path / "coverage.dat", set(rtl_files(cid012_rows()[PID]))),
                          ["line", "branch", "toggle", "expr"])
    got = {m: {"covered": c.covered, "total": c.total} for m, c in report.metrics.items()}
    assert got == expected["coverage"]


def test_sim_container_has_no_network_and_a_read_only_root(client):
    status, log, _ = _run(client, (
        "python -c \"import socket\ntry:\n socket.create_connection(('1.1.1.1', 80), timeout=2); print('NET OK')\n"
        "except OSError as e: print('NET BLOCKED', e)\"; touch /etc/x 2>/dev/null && echo ROOT WRITABLE; "
        "touch /work/x && echo WORK WRITABLE; id -u; iverilog -V 2>&1 | head -n1"), {})
    assert status == 0, log
    assert "NET BLOCKED" in log and "NET OK" not in log
    assert "ROOT WRITABLE" not in log and "WORK WRITABLE" in log
    assert "65534" in log and "Icarus Verilog version 11.0" in log
