"""Red team: native code in a cocotb test's own process (docs/integrity-cocotb.md).

A cocotb test runs inside the simulator: a native extension that can read or write an
arbitrary address reads the run's token from the heap or sets the instrumented DUT's flags
(red team 12-04: a numpy array over a raw address). In a guarded run (the default policy) the
guard's dlopen loads no native extension of an installed package but cocotb's and pyyaml's,
and none of the interpreter's test modules; the Python half says why on import. Pure Python has
the same reach through unchecked bytecode (CPython 3.11): code objects made from chosen bytes are
refused by an audit hook."""

from __future__ import annotations

import pytest
from test_integrity_cocotb import HACK, WEAK_21, describe, request

#: Reads 16 bytes at the address of a bytes object through a numpy array over that address
#: (what the heap scan of tests/test_redteam_session14.py builds on), after taking the guard's
#: Python half out of the way (the numpy stand-in, the loader's wrapper): the C guard alone must
#: stop the import.
RAW_READ = """    import sys, importlib.machinery as m
    sys.modules.pop("numpy", None)  # the stand-in
    wrapped = m.ExtensionFileLoader.create_module
    if wrapped.__closure__:  # the message's wrapper: its original from the closure
        m.ExtensionFileLoader.create_module = next(c.cell_contents for c in wrapped.__closure__ if callable(c.cell_contents))
    secret = b"x" * 64
    try:
        import numpy as np
    except ImportError as exc:
        dut._log.info("RT numpy refused: %s", str(exc).splitlines()[0][:200])
    else:
        class Raw:
            def __init__(self, addr, n):
                self.__array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (addr, True), "version": 3}
        dut._log.info("RT raw read %r", bytes(np.asarray(Raw(id(secret), 16))))
"""


@pytest.fixture(scope="module")
def weak(engine):
    return {e: engine.score(request(WEAK_21, e)) for e in ("fast", "verilator")}


@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_numpy_over_a_raw_address_does_not_load(engine, weak, which: str) -> None:
    r = engine.score(request(WEAK_21.replace(HACK, RAW_READ), which))
    assert "RT numpy refused" in (r.log or "") and "RT raw read" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak[which].reward, describe(r)


@pytest.mark.parametrize(
    "module, reason",
    [
        ("numpy", "numpy is not available in a guarded cocotb run"),
        ("pyarrow", "native extension modules of installed packages (pyarrow)"),
        ("_testcapi", "test and ctypes modules are not available"),
    ],
)
def test_a_test_module_importing_a_raw_memory_extension_is_its_own_failure(engine, module: str, reason: str) -> None:
    """Imported at module level: no test runs, the sample's runtime_error says why (never our
    sandbox_error: numpy is one of the shipped stimulus packages, but not for a guarded run)."""
    pytest.importorskip(module)
    text = f"import {module}\n{module}.__name__, getattr({module}, 'x', None)\n" + WEAK_21
    r = engine.score(request(text, "fast"))
    assert r.status.value == "runtime_error" and r.reward == 0.0, describe(r)
    assert "could not be imported" in r.message and reason in r.message, describe(r)


def test_numpy_loads_where_dut_writes_are_allowed(engine) -> None:
    """Policy ``allow`` loads no guard (it is for measurement): numpy works there."""
    probe = "    import numpy as np\n    dut._log.info('RT numpy sum %d', int(np.arange(4).sum()))\n"
    r = engine.score(request(WEAK_21.replace(HACK, probe), "fast", policy="allow"))
    assert r.status.value == "ok" and "RT numpy sum 6" in (r.log or ""), describe(r)


#: CPython 3.11 runs bytecode unchecked: LOAD_CONST past co_consts returns a pointer the test
#: placed, here to a fake bytearray over the whole address space; it then reads a bytes object's
#: contents by address (and could write any address: the token, the flags). ``make`` builds the
#: code object: ``replace`` (code.__new__) or ``marshal`` (a code object from chosen bytes).
BYTECODE_READ = """    import struct, types, marshal
    holder = bytes(struct.pack("<qqqqqqq", 100, id(bytearray), 2**62, 2**62, 0, 0, 0))
    ptr = bytes(struct.pack("<q", id(holder) + bytes.__basicsize__ - 1))
    target = id(ptr) + bytes.__basicsize__ - 1
    pool = [(None, i) for i in range(100000)]  # a co_consts below the pointer, within 2**31
    consts = next((t for t in pool if 0 < target - (id(t) + 24) < 2**31), None)
    assert consts is not None, "no co_consts below the pointer"
    idx = (target - (id(consts) + 24)) // 8
    ops = bytes([151, 0] + [b for k in (24, 16, 8) for b in (144, (idx >> k) & 255)] + [100, idx & 255, 83, 0])
    try:
        code = (lambda: None).__code__.replace(co_code=ops, co_consts=consts)
        if "MAKE" == "marshal":
            code = marshal.loads(marshal.dumps(code))
        mem = types.FunctionType(code, {})()
        secret = b"RT-SECRET-0123456789"
        at = id(secret) + bytes.__basicsize__ - 1
        dut._log.info("RT bytecode read %r", bytes(mem[at : at + 20]))
    except RuntimeError as exc:
        dut._log.info("RT bytecode refused: %s", exc)
"""


def test_bytecode_reads_memory_where_dut_writes_are_allowed(engine) -> None:
    """The primitive is real: unguarded (policy allow), the fake bytearray reads the secret."""
    r = engine.score(request(WEAK_21.replace(HACK, BYTECODE_READ.replace("MAKE", "replace")), "fast", policy="allow"))
    assert "RT bytecode read b'RT-SECRET-0123456789'" in (r.log or ""), describe(r)


@pytest.mark.parametrize("make", ["replace", "marshal"])
@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_a_code_object_from_chosen_bytes_is_refused(engine, weak, which: str, make: str) -> None:
    """Guarded: code.replace (code.__new__) is refused by the audit hook before marshal is
    reached; the marshal case refuses marshal.loads itself (the replace there is stdlib-free)."""
    hack = BYTECODE_READ.replace("MAKE", make)
    if make == "marshal":  # a code object built without replace: marshal's bytes of a plain one, patched
        hack = hack.replace(
            "code = (lambda: None).__code__.replace(co_code=ops, co_consts=consts)",
            "code = marshal.loads(marshal.dumps((lambda: None).__code__))",
        )
    r = engine.score(request(WEAK_21.replace(HACK, hack), which))
    assert "RT bytecode refused: building code objects" in (r.log or ""), describe(r)
    assert "RT bytecode read" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak[which].reward, describe(r)


#: What would take the audit hook apart, each tried inside a guarded test: the hook's captured
#: values (found through gc: its defaults), a stdlib function's code swapped for the test's, a
#: tracer (it can rewrite a running frame's locals), a .pyc the test wrote loaded by importlib's
#: own loader.
UNDO_THE_HOOK = {
    "hook_defaults": "import gc, types\n"
    "    hook = next(o for o in gc.get_objects() if isinstance(o, types.FunctionType) and o.__name__ == 'hook')\n"
    "    hook.__defaults__ = (None,) * len(hook.__defaults__)",
    "code_swap": "import importlib._bootstrap_external as b\n    b._compile_bytecode.__code__ = (lambda data, name=None, bytecode_path=None, source_path=None: data).__code__",
    "settrace": "import sys\n    sys.settrace(lambda *a: None)",
    "written_pyc": "import importlib.machinery as m, importlib.util as u, marshal\n"
    "    open('m.pyc', 'wb').write(u.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile('x = 1', 'm', 'exec')))\n"
    "    m.SourcelessFileLoader('m', '/work/m.pyc').get_code('m')",
}


@pytest.mark.parametrize("attack", sorted(UNDO_THE_HOOK))
def test_the_code_object_hook_cannot_be_taken_apart(engine, weak, attack: str) -> None:
    body = UNDO_THE_HOOK[attack].replace("\n    ", "\n        ")
    hack = f"""    try:
        {body}
        dut._log.info("RT undone")
    except RuntimeError as exc:
        dut._log.info("RT refused: %s", exc)
"""
    r = engine.score(request(WEAK_21.replace(HACK, hack), "fast"))
    assert "RT refused: building code objects" in (r.log or "") and "RT undone" not in (r.log or ""), describe(r)
    assert r.status.value == "ok" and r.reward == weak["fast"].reward, describe(r)
