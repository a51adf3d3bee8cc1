"""Red team: routes around the cocotb guard's refusal of native code and raw memory
(docs/integrity-cocotb.md), each tried by a real guarded cocotb test through the Engine.

- native code loaded from a path the guard's place check cannot resolve: a copy of a refused
  extension in a memfd (or a deleted file) loaded through ``/proc/self/fd/<n>``;
- the interpreter's ``_xx*`` modules: ``_xxsubinterpreters`` runs code in a subinterpreter, which
  has none of the main interpreter's audit hooks;
- importlib's ``.pyc`` loading, which may call ``marshal.loads``, fed chosen bytes by a loader
  class whose ``get_data`` the test replaced;
- ``types.coroutine``, the one maker of code objects the audit hook let through, called with
  stand-ins for a function and a code object whose ``replace`` is a ``functools.partial`` of a
  real code object's;
- a test that uses up the simulator's descriptors so that it cannot write its coverage file:
  the sample's own doing, a ``resource_limit`` (never cached), not a quiet score of 0.

Each attack's unguarded outcome is what the test logs before the fixes ("RT loaded ...");
the tests assert the refusal and that the sample then scores exactly as the weak test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_integrity_cocotb import HACK, WEAK_21, describe, request

from reward_service.integrity import cocotb_guard


@pytest.fixture(scope="module")
def weak(engine):
    return {e: engine.score(request(WEAK_21, e)) for e in ("fast", "verilator")}


def run_hack(engine, hack: str, which: str = "fast"):
    return engine.score(request(WEAK_21.replace(HACK, hack), which))


def assert_weak(r, weak, which: str = "fast") -> None:
    assert r.status.value == "ok" and r.reward == weak[which].reward, describe(r)


# ---------------------------------------------------------------------------------------------
# 1. native code through a path the place check cannot resolve

#: Copies the interpreter's ``_testcapi`` (refused from lib-dynload) to a place named by ``WHERE``
#: and loads it with ``_imp.create_dynamic`` (the extension loader's own call) through that path.
LOAD_COPY = """    import os, _imp, importlib.machinery as m, importlib.util as u
    origin = m.PathFinder.find_spec("_testcapi").origin
    data = open(origin, "rb").read()
    proc = "/" + "pr" + "oc"  # spelled in pieces: the text screen refuses the word (docs/cocotb.md)
    if not os.path.isdir(f"{proc}/self/fd"):
        dut._log.info("RT no /proc")
    else:
        if "WHERE" == "memfd":
            fd = os.memfd_create("x")
            os.write(fd, data)
            path = f"{proc}/self/fd/{fd}"
        elif "WHERE" == "memfd_pid":
            fd = os.memfd_create("x")
            os.write(fd, data)
            path = f"{proc}/{os.getpid()}/fd/{fd}"
        else:  # a deleted file of the run dir, still open
            open("copy.so", "wb").write(data)
            fd = os.open("copy.so", os.O_RDONLY)
            os.unlink("copy.so")
            path = f"{proc}/self/fd/{fd}"
        spec = u.spec_from_file_location("_testcapi", path, loader=m.ExtensionFileLoader("_testcapi", path))
        try:
            module = _imp.create_dynamic(spec)
            dut._log.info("RT loaded %s %s", module.__name__, path)
        except ImportError as exc:
            dut._log.info("RT refused: %s", exc)
"""


@pytest.mark.parametrize("where", ["memfd", "memfd_pid", "deleted"])
def test_an_extension_through_proc_fd_is_refused(engine, weak, where: str) -> None:
    r = run_hack(engine, LOAD_COPY.replace("WHERE", where))
    if "RT no /proc" in (r.log or ""):
        pytest.skip("no /proc in the sandbox here: the route does not exist")
    assert "RT loaded" not in (r.log or ""), describe(r)
    assert "RT refused: _testcapi: native code from /proc/" in (r.log or ""), describe(r)
    assert_weak(r, weak)


def _guarded_python(code: str, tmp_path: Path, cache_dir: Path) -> subprocess.CompletedProcess:
    """``code`` run by the host's Python with the armed C guard preloaded and no Python half
    (no audit hook, no loader wrapper): what the C refuses on its own."""
    env = {
        **os.environ,
        "LD_PRELOAD": str(cocotb_guard.library(cache_dir)),
        "RS_GUARD_TOP": "top",
        "RS_GUARD_PORTS": "clk",
        "RS_GUARD_FILE": str(tmp_path / cocotb_guard.RECORD),
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


#: Loads ``NAME`` from ``PATH`` (``"origin"``: its own file) with the extension loader's call.
C_LOAD = """import os, sys, _imp, importlib.machinery as m, importlib.util as u
origin = m.PathFinder.find_spec("NAME").origin
path = "PATH"
if path == "memfd":
    fd = os.memfd_create("x")
    os.write(fd, open(origin, "rb").read())
    path = f"/proc/self/fd/{fd}"
elif path == "origin":
    path = origin
spec = u.spec_from_file_location("NAME", path, loader=m.ExtensionFileLoader("NAME", path))
try:
    _imp.create_dynamic(spec)
    print("loaded")
except ImportError as exc:
    print("refused", exc)
"""


@pytest.mark.parametrize(
    "name, path",
    [("_testcapi", "memfd"), ("_xxsubinterpreters", "origin"), ("_xxtestfuzz", "origin"), ("xxlimited", "origin")],
)
def test_the_c_guard_alone_refuses(shared_cache_dir, tmp_path, name: str, path: str) -> None:
    try:
        __import__(name)
    except ImportError:
        pytest.skip(f"this Python has no {name}")
    proc = _guarded_python(C_LOAD.replace("NAME", name).replace("PATH", path), tmp_path, shared_cache_dir)
    assert proc.stdout.startswith("refused"), (proc.stdout, proc.stderr)
    control = _guarded_python(C_LOAD.replace("NAME", "_json").replace("PATH", "origin"), tmp_path, shared_cache_dir)
    assert control.stdout.strip() == "loaded" or "built-in" in control.stderr, (control.stdout, control.stderr)


# ---------------------------------------------------------------------------------------------
# 2. the interpreter's _xx* modules: a subinterpreter has no audit hook

#: In a subinterpreter, code.replace (refused by the main interpreter's audit hook) is free.
SUBINTERPRETER = """    try:
        import _xxsubinterpreters as s
    except ImportError as exc:
        dut._log.info("RT refused: %s", exc)
    else:
        i = s.create()
        s.run_string(i, "c = (lambda: None).__code__.replace(co_consts=(1,)); open('/work/rt_sub.txt', 'w').write('replaced')")
        dut._log.info("RT subinterpreter: %s", open("/work/rt_sub.txt").read())
"""


def test_a_subinterpreter_is_refused(engine, weak) -> None:
    r = run_hack(engine, SUBINTERPRETER)
    assert "RT subinterpreter" not in (r.log or ""), describe(r)
    assert "RT refused: _xxsubinterpreters: " in (r.log or "") and "subinterpreter" in (r.log or ""), describe(r)
    assert_weak(r, weak)


def test_no_subinterpreter_is_made_under_the_hook(tmp_path) -> None:
    """The second layer: with ``_xxsubinterpreters`` loaded before the hook (as a built-in
    module would be), making an interpreter is refused by the audit hook itself."""
    pytest.importorskip("_xxsubinterpreters")
    code = (
        "import _xxsubinterpreters as s, rs_cocotb_guard as g\n"
        "g.refuse_code_objects()\n"
        "try:\n    s.create()\n    print('created')\nexcept RuntimeError as exc:\n    print('refused', exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(cocotb_guard.LOCATOR).parent)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.stdout.startswith("refused"), (proc.stdout, proc.stderr)


# ---------------------------------------------------------------------------------------------
# 3. marshal.loads through importlib's .pyc path with a replaced get_data

#: Chosen bytes (a code object the test compiled: with the same call, any bytecode) fed to
#: marshal.loads through the stock SourcelessFileLoader.get_code, its class's get_data replaced.
MARSHAL = """    import os, marshal, importlib.util as u, importlib._bootstrap_external as b
    forged = u.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile("RESULT = 'forged'", "f", "exec"))
    b.SourcelessFileLoader.get_data = lambda self, path: forged
    try:
        code = b.SourcelessFileLoader("f", os.__file__).get_code("f")
        ns = {}
        exec(code, ns)
        dut._log.info("RT marshal accepted: %s", ns["RESULT"])
    except RuntimeError as exc:
        dut._log.info("RT refused: %s", exc)
    finally:
        del b.SourcelessFileLoader.get_data
    import colorsys  # importlib's own .pyc loading still works
    dut._log.info("RT import after %s", colorsys.__name__)
"""


def test_marshal_through_a_replaced_get_data_is_refused(engine, weak) -> None:
    r = run_hack(engine, MARSHAL)
    assert "RT marshal accepted" not in (r.log or ""), describe(r)
    assert "RT refused: building code objects" in (r.log or ""), describe(r)
    assert "RT import after colorsys" in (r.log or ""), describe(r)
    assert_weak(r, weak)


# ---------------------------------------------------------------------------------------------
# 4. types.coroutine with stand-ins

#: Stand-ins pass types.coroutine's class checks (``__class__`` properties); the code's
#: ``replace`` is a partial of a real code object's with chosen bytecode and constants, called
#: from types.coroutine's own frame (the audit hook's exemption) with no Python frame between.
COROUTINE = """    import functools, types
    real = (lambda: "orig").__code__

    class FakeCode:
        __class__ = property(lambda self: types.CodeType)
        co_flags = real.co_flags | 0x20
        replace = functools.partial(real.replace, co_consts=("RT-FORGED",))

    class FakeFunction:
        __class__ = property(lambda self: types.FunctionType)
        __code__ = FakeCode()

        def __call__(self):
            pass

    fake = FakeFunction()
    try:
        types.coroutine(fake)
        dut._log.info("RT coroutine forged %r", fake.__code__.co_consts)
    except RuntimeError as exc:
        dut._log.info("RT refused: %s", exc)

    @types.coroutine
    def honest():
        yield
    dut._log.info("RT honest coroutine flags %#x", honest.__code__.co_flags & 0x100)
"""


def test_types_coroutine_with_stand_ins_is_refused(engine, weak) -> None:
    r = run_hack(engine, COROUTINE)
    assert "RT coroutine forged" not in (r.log or ""), describe(r)
    assert "RT refused: building code objects" in (r.log or ""), describe(r)
    assert "RT honest coroutine flags 0x100" in (r.log or ""), describe(r)
    assert_weak(r, weak)


# ---------------------------------------------------------------------------------------------
# 5. the simulator cannot write its coverage file: the test used up the descriptors

#: After the tests (results.xml written), Python's exit handlers run before the simulator's
#: final blocks and coverage write: this one takes every free descriptor.
EXHAUST = """    import atexit, os

    def take_all():
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass

    atexit.register(take_all)
"""


@pytest.mark.parametrize("which, stderr", [("fast", "kept"), ("verilator", "kept"), ("fast", "closed")])
def test_a_test_using_up_descriptors_is_a_resource_limit(shared_cache_dir, tmp_path, which: str, stderr: str) -> None:
    """Before: ``ok`` with reward 0 and no coverage, cached. ``closed``: the test also closed
    fd 2 (the guard writes to its saved copy and its record file)."""
    from reward_service.cache import ResultCache
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    caching = Engine(Settings(cache_dir=shared_cache_dir, result_cache=True))
    caching.results = ResultCache(tmp_path / "results")  # its own: nothing of other runs
    hack = EXHAUST + ("    os.close(2)\n" if stderr == "closed" else "")
    req = request(WEAK_21.replace(HACK, hack), which)
    r = caching.score(req)
    assert r.status.value == "resource_limit" and r.reward == 0.0 and r.passed is False, describe(r)
    assert "rs-guard: the simulator could not write its coverage file" in r.message, describe(r)
    assert "descriptors" in r.message or "Too many open files" in r.message, describe(r)
    again = caching.score(req)
    assert not again.cache.result, "a resource_limit was cached"


# ---------------------------------------------------------------------------------------------
# 6. the same routes as a policy would write them inside its test (the Python half's message
#    first; with the loader wrapper taken away, the C guard alone)

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


@pytest.mark.parametrize("name", ["_testcapi", "_xxsubinterpreters", "_json"])
def test_an_extension_copied_into_a_memory_file_does_not_load(engine, weak, name: str) -> None:
    so = _extension(name)
    hack = load(name, '"/pr" + f"oc/{os.getpid()}/fd/{fd}"', MEMFD.replace("__SO__", repr(str(so))))
    r = engine.score(request(WEAK_21.replace(HACK, hack), "fast"))
    assert "RT load refused" in (r.log or "") and "RT load loaded" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak["fast"].reward, describe(r)


@pytest.mark.parametrize("name", ["_xxsubinterpreters", "_xxinterpchannels", "_xxlimited"])
def test_the_standard_librarys_xx_modules_do_not_load(engine, weak, name: str) -> None:
    _extension(name)
    r = engine.score(request(WEAK_21.replace(HACK, XX_IMPORT.replace("__NAME__", name)), "fast"))
    log = r.log or ""
    assert "RT xx refused" in log and "RT xx loaded" not in log, describe(r)
    assert "not available in a guarded cocotb run" in log, describe(r)
    assert r.status.value == "ok" and r.reward == weak["fast"].reward, describe(r)


def test_a_refused_library_named_under_proc_does_not_load(engine, weak) -> None:
    """/proc/<pid>/root/<path> names a real file by another path: the guard loads what the path
    resolves to and checks that, so the interpreter's `_testcapi` named that way is refused as
    by its own path (a trusted file named that way loads from its resolved path, harmlessly)."""
    so = _extension("_testcapi")
    hack = load("_testcapi", f'"/pr" + f"oc/{{os.getpid()}}/root{so}"')
    r = engine.score(request(WEAK_21.replace(HACK, hack), "fast"))
    assert "RT load refused" in (r.log or "") and "RT load loaded" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak["fast"].reward, describe(r)


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


#: A test that prints what only the guard or the sandbox may say: the guard's cannot-write line
#: and record, and the shell's report of a file over the size limit (attacker review 12-05:
#: each gave an uncached resource_limit, a failure a trainer may drop instead of learning it).
FORGED_LINES = """    import sys
    print("rs-guard: the simulator could not write its coverage file x: Too many open files", flush=True)
    print('RS_COCOTB_GUARD {"event": "cannot_write", "file": "x", "error": "Too many open files"}', flush=True)
    print("File size limit exceeded", flush=True)
    sys.stderr.write("File size limit exceeded\\n")
"""


@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_a_test_printing_the_guards_or_the_sandboxs_lines_is_scored_as_without(engine, weak, which: str) -> None:
    r = run_hack(engine, FORGED_LINES, which)
    assert "could not write its coverage file x" in (r.log or ""), describe(r)
    assert_weak(r, weak, which)
