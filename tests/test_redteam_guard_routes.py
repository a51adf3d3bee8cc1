"""Red team: other routes to native code in a guarded cocotb run (docs/integrity-cocotb.md).

The guard refuses native extensions that reach raw memory by their path (an installed
package's, the interpreter's test modules) and code from writable places. These are the routes
around a path check: a copy loaded through a memory file descriptor (``/proc/self/fd/<n>``
names no real file), the standard library's ``_xx`` modules (``_xxsubinterpreters`` runs code
in a subinterpreter the audit hooks do not watch), and a library under ``/proc`` or ``/dev``.
Each must fail to load, with the reason, and leave the sample scored as without it."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from test_integrity_cocotb import HACK, WEAK_21, describe, request

LIB_DYNLOAD = Path(sysconfig.get_paths()["platstdlib"]) / "lib-dynload"


def _extension(stem: str) -> Path:
    found = sorted(LIB_DYNLOAD.glob(f"{stem}.cpython-*.so"))
    if not found:
        pytest.skip(f"no {stem} extension in {LIB_DYNLOAD}")
    return found[0]


#: Loads extension __NAME__ from the path __PATH__ (a Python expression) with the Python half's
#: loader wrapper taken out of the way, so the C guard alone must refuse. Paths under /proc are
#: built as a policy would (the stimulus text check refuses a literal `/proc/` + `self`).
PATH_LOAD = """    import os, importlib.util, importlib.machinery as m
    wrapped = m.ExtensionFileLoader.create_module
    if wrapped.__closure__:
        m.ExtensionFileLoader.create_module = next(c.cell_contents for c in wrapped.__closure__ if callable(c.cell_contents))
    __PREPARE__
    path = __PATH__
    try:
        spec = importlib.util.spec_from_loader(__NAME__, m.ExtensionFileLoader(__NAME__, path), origin=path)
        module = importlib.util.module_from_spec(spec)
    except ImportError as exc:
        dut._log.info("RT load refused: %s", str(exc).splitlines()[0][:200])
    else:
        dut._log.info("RT load loaded %s", module)
"""
#: A copy in a memory file, loaded from /proc/<pid>/fd/<n> (its realpath names no file).
MEMFD = 'fd = os.memfd_create("x"); os.write(fd, open(__SO__, "rb").read())'


def load(name: str, path: str, prepare: str = "pass") -> str:
    return PATH_LOAD.replace("__PREPARE__", prepare).replace("__PATH__", path).replace("__NAME__", repr(name))


#: Imports a standard-library `_xx` module inside the test (message from the Python half).
XX_IMPORT = """    try:
        import __NAME__ as mod
    except ImportError as exc:
        dut._log.info("RT xx refused: %s", str(exc).splitlines()[0][:200])
    else:
        dut._log.info("RT xx loaded %s", mod)
"""


@pytest.fixture(scope="module")
def weak(engine):
    return engine.score(request(WEAK_21, "fast"))


@pytest.mark.parametrize("name", ["_testcapi", "_xxsubinterpreters", "_json"])
def test_an_extension_copied_into_a_memory_file_does_not_load(engine, weak, name: str) -> None:
    so = _extension(name)
    hack = load(name, '"/pr" + f"oc/{os.getpid()}/fd/{fd}"', MEMFD.replace("__SO__", repr(str(so))))
    r = engine.score(request(WEAK_21.replace(HACK, hack), "fast"))
    assert "RT load refused" in (r.log or "") and "RT load loaded" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak.reward, describe(r)


@pytest.mark.parametrize("name", ["_xxsubinterpreters", "_xxinterpchannels", "_xxlimited"])
def test_the_standard_librarys_xx_modules_do_not_load(engine, weak, name: str) -> None:
    _extension(name)
    r = engine.score(request(WEAK_21.replace(HACK, XX_IMPORT.replace("__NAME__", name)), "fast"))
    log = r.log or ""
    assert "RT xx refused" in log and "RT xx loaded" not in log, describe(r)
    assert "not available in a guarded cocotb run" in log, describe(r)
    assert r.status.value == "ok" and r.reward == weak.reward, describe(r)


def test_a_library_under_proc_does_not_load(engine, weak) -> None:
    """/proc/<pid>/root/<path> names a real file by another path (and /proc/<pid>/fd/<n> of
    another process a file the test cannot name): a library under /proc is refused whatever it
    resolves to, here the standard library's own `_json`."""
    so = _extension("_json")
    hack = load("_json", f'"/pr" + f"oc/{{os.getpid()}}/root{so}"')
    r = engine.score(request(WEAK_21.replace(HACK, hack), "fast"))
    assert "RT load refused" in (r.log or "") and "RT load loaded" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak.reward, describe(r)


#: Holds every file descriptor the process may open until the simulation ends: the simulator
#: then cannot create its coverage file (the guard reports it and exits 70).
HOLD_DESCRIPTORS = """    import os
    keep = []
    try:
        while True:
            keep.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    dut._log.info("RT holding %d descriptors", len(keep))
    dut._rt_keep = keep
"""


@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_a_test_that_holds_every_descriptor_is_a_resource_limit(engine, which: str) -> None:
    """The sample's doing (no coverage can be written), a limit like the others: reward 0, not
    cached (was a cached runtime_error saying only that results.xml was not written)."""
    r = engine.score(request(WEAK_21.replace(HACK, HOLD_DESCRIPTORS), which))
    assert "RT holding" in (r.log or ""), describe(r)
    assert r.status.value == "resource_limit" and r.reward == 0.0, describe(r)
    assert "could not write its coverage file" in r.message and "file descriptors" in r.message, describe(r)
