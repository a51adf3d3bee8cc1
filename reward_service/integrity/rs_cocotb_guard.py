"""Where a cocotb test wrote: the test's file:line of each write, for the write guard's record.

Standalone (no reward_service import): staged next to ``cocotb_driver.py`` and imported in the
simulator's embedded Python. The guard itself is C (``cocotb_guard.c``, preloaded into the
simulator): it refuses a write at libgpi's entry points, writes its record, then asks
:func:`locate` where the test made the write. This module only adds that location; the test can
replace or break it, which leaves only the location out of the record (never the refusal).

cocotb applies most writes later than the test makes them (2.1 queues deposits until the
ReadWrite phase; 1.9 every ``.value``/``<=`` write), so :func:`install` wraps cocotb's write
scheduling to keep, per handle path, the test frame that asked for the last write;
:func:`locate` takes the test frame on the live stack when there is one (``Force``,
``Release``, ``setimmediatevalue``, writes made in ReadWrite), else that kept frame.
"""

from __future__ import annotations

import os
import sys

_TEST_DIR = os.path.realpath(os.environ.get("RS_GUARD_TEST_DIR") or os.getcwd())
#: The simulator's working directory (the run dir), as cocotb_guard.c keeps it.
_CWD = os.getcwd().rstrip("/") + "/" if os.getcwd() != "/" else "\0"
_writes: dict[str, str] = {}


def _test_frame(frame) -> str | None:
    """``file:line`` of the innermost frame of a file under the test dir (relative to it)."""
    prefix = _TEST_DIR.rstrip("/") + "/"
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(prefix):
            return f"{name[len(prefix) :]}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _keep(handle) -> None:
    try:
        where = _test_frame(sys._getframe(2))
        if where is not None:
            _writes[str(handle._path)] = where
    except Exception:
        pass


def stub_ctypes() -> None:
    """In a guarded run ``_ctypes`` does not load (the guard hides its init symbol), but
    packages import ``ctypes`` at import time for things a test does not need: cocotb 1.9
    (``cocotb.handle``, ``cocotb.utils``: an ``isinstance`` check, two deprecated helpers),
    cocotb-test and find_libpython (``ctypes.util.find_library``), numpy (optional). They get a
    stand-in holding only ``Structure`` (an empty class nothing is an instance of) and
    ``util.find_library`` (finds nothing); any other name raises AttributeError. Does nothing
    when ``ctypes`` is imported already or loads (an unguarded run). Call before cocotb 1.9 is
    imported, and before the test module."""
    if "ctypes" in sys.modules:
        return
    try:
        import _ctypes  # noqa: F401
    except ImportError:
        pass
    else:
        return
    import types

    module = types.ModuleType("ctypes", "stand-in: ctypes is not available in a guarded cocotb run")

    class Structure:
        pass

    def missing(name: str):
        raise AttributeError(f"ctypes.{name}: ctypes is not available in a guarded cocotb run")

    util = types.ModuleType("ctypes.util", "stand-in: no shared library is found")
    util.find_library = lambda name: None  # type: ignore[attr-defined]
    module.Structure = Structure  # type: ignore[attr-defined]
    module.util = util  # type: ignore[attr-defined]
    module.__path__ = []  # a package, so that `import ctypes.util` works
    module.__getattr__ = missing  # type: ignore[method-assign]
    sys.modules["ctypes"] = module
    sys.modules["ctypes.util"] = util


#: Native extensions a guarded test may load from installed packages (top-level package names):
#: cocotb's and pyyaml's. The guard's dlopen refuses the rest (cocotb_guard.c
#: raw_memory_extension): numpy arrays over a raw address read the simulator's heap.
NATIVE_ALLOWED = frozenset({"cocotb", "pygpi", "yaml", "_yaml"})


#: Places native code is not loaded from (cocotb_guard.c untrusted_place): where a test can
#: write, and what the kernel makes up (a memfd or a deleted file behind /proc/<pid>/fd/<n>).
_NO_NATIVE = ("/work/", "/tmp/", "/dev/", "/proc/", "/sys/", "/var/tmp/", "/run/", "/var/run/")
#: The interpreter's own extension modules that are not loaded (cocotb_guard.c
#: raw_memory_extension): test modules, ctypes, and the _xx*/xx* ones (_xxsubinterpreters runs
#: code in a subinterpreter, which has none of this interpreter's audit hooks).
_NO_DYNLOAD = ("_test", "_ctypes", "_xx", "xx")


def _refusal(name: str, origin: str) -> str | None:
    """Why the guard will not load the native extension module ``name`` from file ``origin``
    (None: it will). The message of cocotb_guard.c's dlopen refusal, which decides."""
    if name.split(".")[-1].startswith("_xx"):
        return (
            f"{name}: the interpreter's _xx* modules are not available in a guarded cocotb run "
            "(_xxsubinterpreters runs code in a subinterpreter, which has none of this interpreter's checks)"
        )
    if "/" not in origin:
        return None
    try:
        resolved = os.path.realpath(origin, strict=True)
    except (OSError, ValueError):
        resolved = None
    if resolved is None or resolved.startswith(_NO_NATIVE) or resolved.startswith(_CWD):
        return (
            f"{name}: native code from {origin} is not loaded in a guarded cocotb run: "
            f"{'it names no file' if resolved is None else 'it is ' + resolved} (only files of the read-only "
            "trees load: not a memfd or deleted file behind /proc/<pid>/fd, nor a place the test writes)"
        )
    parts = resolved.split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            top = parts[parts.index(marker) + 1] if parts.index(marker) + 1 < len(parts) else ""
            if top in NATIVE_ALLOWED:
                return None
            return (
                f"{name}: native extension modules of installed packages ({top}) are not available in a guarded "
                "cocotb run: they can read and write the simulator's memory (pure-Python packages, cocotb's and "
                "the standard library's own extensions are)"
            )
    if "lib-dynload" in parts and parts[-1].startswith(_NO_DYNLOAD):
        if parts[-1].startswith(("_xx", "xx")):
            return (
                f"{name}: the interpreter's _xx* and xx* modules are not available in a guarded cocotb run "
                "(_xxsubinterpreters runs code in a subinterpreter, which has none of this interpreter's checks)"
            )
        return f"{name}: the interpreter's test and ctypes modules are not available in a guarded cocotb run"
    return None


#: What a guarded test gets for ``import numpy`` (one of the shipped stimulus packages: its own
#: error on the refused extension would hide why).
NUMPY_REFUSED = (
    "numpy is not available in a guarded cocotb run: its arrays over a raw address read and write the "
    "simulator's memory (it is with stimulus_policy dut_writes: allow)"
)


def refuse_native_extensions() -> None:
    """Give the guard's refusal of native extensions (cocotb_guard.c raw_memory_extension) its
    message: the loader of extension modules raises ImportError with the reason (the guard's
    refusal alone reads as a broken library), and ``numpy`` is a stand-in whose every name
    raises ImportError(:data:`NUMPY_REFUSED`). The C guard is the barrier; this is its message.
    Does nothing when numpy is imported already (an unguarded run). Never raises."""
    import importlib.machinery
    import types

    loader = importlib.machinery.ExtensionFileLoader
    if not getattr(loader.create_module, "rs_guarded", False):
        original = loader.create_module

        def create_module(self, spec):
            why = _refusal(spec.name, spec.origin or "")
            if why is not None:
                raise ImportError(why, name=spec.name)
            return original(self, spec)

        create_module.rs_guarded = True  # type: ignore[attr-defined]
        loader.create_module = create_module  # type: ignore[method-assign]
    if "numpy" in sys.modules:
        return

    def refused(name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise ImportError(NUMPY_REFUSED, name="numpy")

    module = types.ModuleType("numpy", f"stand-in: {NUMPY_REFUSED}")
    module.__getattr__ = refused  # type: ignore[method-assign]
    sys.modules["numpy"] = module


#: Where a test can write files (cocotb_guard.c writable_place): never a trusted tree.
_WRITABLE = ("/work/", "/tmp/", "/dev/shm/", "/var/tmp/", "/run/", "/var/run/")
#: What a refused code object raises.
CODE_REFUSED = (
    "building code objects (types.CodeType, code.replace, marshal) is not available in a guarded cocotb run: "
    "unchecked bytecode reads and writes the simulator's memory"
)


#: What making a subinterpreter raises.
SUBINTERPRETER_REFUSED = (
    "subinterpreters are not available in a guarded cocotb run: code there runs without this interpreter's checks"
)


def refuse_code_objects() -> None:
    """Install an audit hook (PEP 578: it cannot be removed) that refuses what makes code
    objects from bytes the test chose: ``code.__new__`` (``types.CodeType``, ``code.replace``),
    ``marshal.load`` and ``marshal.loads`` except importlib's own load of a ``.pyc`` file
    under the interpreter's prefix (read-only; a stock ``SourceFileLoader``/``SourcelessFileLoader``
    reading through the stock ``_io``, and the bytes given the file's own, read here); and what
    would take the hook's checks apart: a function's ``__code__`` replaced,
    ``__defaults__``/``__kwdefaults__`` of this module's functions, ``sys.settrace``/``sys.setprofile``
    (a tracer can rewrite a running frame's locals), a subinterpreter (it has no hooks). Native
    extensions the C guard refuses get their ``ImportError`` here (the ``import`` event). CPython 3.11 runs bytecode unchecked: a ``LOAD_CONST`` past ``co_consts`` returns a
    fake ``bytearray`` over the whole address space in ~10 lines of pure Python (measured
    12-05), the token and the flags are then the test's. Compiled source (``compile``, ``exec``,
    imports of ``.py`` files) and ``types.coroutine`` (CO_ITERABLE_COROUTINE set on a real
    function's real code, nothing else changed) stay.
    What the hook compares with is bound as default arguments now, before the test runs (a
    closure cell or a module global could be rewritten; replacing the defaults is refused).
    Raises RuntimeError in the refused call; never raises here."""
    try:
        import _io
        import importlib._bootstrap_external as bootstrap
        import types

        compile_bytecode = getattr(bootstrap, "_compile_bytecode").__code__  # noqa: B009 (private: no stub)
        loaders = (bootstrap.SourceFileLoader, bootstrap.SourcelessFileLoader)
        get_codes = (bootstrap.SourceLoader.get_code.__code__, bootstrap.SourcelessFileLoader.get_code.__code__)
        io_module = getattr(bootstrap, "_io")  # noqa: B009
        io_calls = (_io.open_code, _io.FileIO)
        # the standard library's one maker of code objects at run time: the same code with a flag
        coroutine = types.coroutine.__code__
        # the standard library's directory and the import path as it is before the test runs
        # (an embedded interpreter's prefixes do not name the cocotb 1.9 venv's site-packages);
        # never one of the places a test writes
        trees = {os.path.dirname(os.__file__), sys.prefix, sys.base_prefix, *(p for p in sys.path if p.startswith("/"))}
        prefixes = tuple(
            t.rstrip("/") + "/" for t in trees if t and not (t.rstrip("/") + "/").startswith(_WRITABLE) and t != "/"
        )
    except (ImportError, AttributeError):
        return

    def hook(
        event: str,
        args: tuple,
        _getframe=sys._getframe,
        _function=types.FunctionType,
        _prefixes=prefixes,
        _type=type,
        _isinstance=isinstance,
        _getattribute=object.__getattribute__,
        _bootstrap_dict=bootstrap.__dict__,
        _io_dict=_io.__dict__,
        _compile_bytecode=compile_bytecode,
        _loaders=loaders,
        _get_codes=get_codes,
        _io_module=io_module,
        _io_calls=io_calls,
        _coroutine=coroutine,
        _here=__file__,
        _refused=CODE_REFUSED,
        _native=_refusal,
        _str=str,
        _bytes=bytes,
        _fileio=_io.FileIO,
        _codetype=types.CodeType,
    ) -> None:
        if event == "import":
            # an extension module's load (_imp.create_dynamic: args[1] its file) or any import of
            # a name (args[1] None): the message of the C guard's refusal (it decides)
            name, origin = args[0], args[1]
            why = _native(name, origin if _type(origin) is _str else "") if _type(name) is _str else None
            if why is not None:
                raise ImportError(why, name=name)
        elif event == "cpython.PyInterpreterState_New":
            # a subinterpreter has none of this interpreter's audit hooks (this one included)
            raise RuntimeError(SUBINTERPRETER_REFUSED)
        elif event == "code.__new__":
            # types.coroutine's one call, co.replace(co_flags=co.co_flags | 0x100), on a real
            # function's real code: stand-ins pass its __class__ checks, and a functools.partial of
            # a real code's replace as their `replace` would make any code object from its frame
            # with no Python frame between (red team 12-05). args: co_code, co_filename, co_name,
            # argcount, posonlyargcount, kwonlyargcount, nlocals, stacksize, flags.
            frame = _getframe(1)
            if frame.f_code is not _coroutine:
                raise RuntimeError(_refused)
            names = frame.f_locals
            func, co = names.get("func"), names.get("co")
            if (
                _type(func) is not _function
                or _type(co) is not _codetype
                or _getattribute(func, "__code__") is not co
                or _type(args[0]) is not _bytes
                or args[0] != co.co_code
                or args[1] != co.co_filename
                or args[2] != co.co_name
                or args[3:8]
                != (co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_nlocals, co.co_stacksize)
                or args[8] != co.co_flags | 0x100
            ):
                raise RuntimeError(_refused)
        elif event == "object.__setattr__":
            target, name = args[0], args[1]
            if _isinstance(target, _function) and name == "__code__":
                # only types.coroutine's: the function's own code with CO_ITERABLE_COROUTINE set
                if _getframe(1).f_code is not _coroutine:
                    raise RuntimeError(_refused)
                new, old = args[2], _getattribute(target, "__code__")
                if (
                    _type(new) is not _codetype
                    or new.co_flags != old.co_flags | 0x100
                    or new.co_consts is not old.co_consts
                    or new.co_names is not old.co_names
                    or (new.co_code, new.co_varnames, new.co_freevars, new.co_cellvars)
                    != (old.co_code, old.co_varnames, old.co_freevars, old.co_cellvars)
                    or (new.co_filename, new.co_name, new.co_qualname, new.co_firstlineno)
                    != (old.co_filename, old.co_name, old.co_qualname, old.co_firstlineno)
                    or (new.co_linetable, new.co_exceptiontable) != (old.co_linetable, old.co_exceptiontable)
                    or (new.co_argcount, new.co_posonlyargcount, new.co_kwonlyargcount)
                    != (old.co_argcount, old.co_posonlyargcount, old.co_kwonlyargcount)
                    or (new.co_nlocals, new.co_stacksize) != (old.co_nlocals, old.co_stacksize)
                ):
                    raise RuntimeError(_refused)
            elif _isinstance(target, _function) and (
                name in ("__defaults__", "__kwdefaults__") and target.__code__.co_filename == _here
            ):
                raise RuntimeError(_refused)
        elif event in ("marshal.load", "sys.settrace", "sys.setprofile"):
            raise RuntimeError(_refused)
        elif event == "marshal.loads":
            caller = _getframe(1)  # the caller of marshal.loads
            loader_frame = caller.f_back
            if caller.f_code is not _compile_bytecode or loader_frame is None:
                raise RuntimeError(_refused)
            if loader_frame.f_code is not _get_codes[0] and loader_frame.f_code is not _get_codes[1]:
                raise RuntimeError(_refused)
            loader = loader_frame.f_locals.get("self")
            if _type(loader) not in _loaders or "get_data" in _getattribute(loader, "__dict__"):
                raise RuntimeError(_refused)
            if (
                _bootstrap_dict.get("_io") is not _io_module
                or _io_dict.get("open_code") is not _io_calls[0]
                or _io_dict.get("FileIO") is not _io_calls[1]
            ):
                raise RuntimeError(_refused)
            # the file the stock get_code read: SourceLoader's bytecode_path, SourcelessFileLoader's path
            local = "bytecode_path" if loader_frame.f_code is _get_codes[0] else "path"
            path = loader_frame.f_locals.get(local)
            # under the interpreter's own read-only trees, which hold no symlink to a writable
            # place (os.path.realpath is Python over os functions a test can patch: not used)
            if _type(path) is not _str or not path.startswith(_prefixes) or "/.." in path or "/./" in path:
                raise RuntimeError(_refused)
            # and the bytes are that file's, read here: get_data (or get_filename, path_stats) may
            # be replaced at class level to hand importlib chosen bytes (red team 12-05)
            try:
                stream = _fileio(path, "r")
                try:
                    on_disk = stream.readall()
                finally:
                    stream.close()
            except OSError:
                raise RuntimeError(_refused) from None
            if _type(args[0]) is not _bytes or on_disk[16:] != args[0]:
                raise RuntimeError(_refused)

    sys.addaudithook(hook)


def install() -> None:
    """Wrap cocotb's write scheduling (2.1: ``cocotb.handle._schedule_write``; 1.9:
    ``Scheduler._schedule_write``) to keep the test's frame of each write, after giving
    ``ctypes`` its stand-in (:func:`stub_ctypes`) and refusing native extensions of installed
    packages with a message (:func:`refuse_native_extensions`) and code objects from chosen
    bytes (:func:`refuse_code_objects`). Never raises."""
    stub_ctypes()
    refuse_native_extensions()
    refuse_code_objects()
    try:
        import cocotb.handle as handle_module

        original = getattr(handle_module, "_schedule_write", None)
        if original is not None:  # cocotb 2.x

            def schedule_write(handle, write_func, action, value):
                _keep(handle)
                return original(handle, write_func, action, value)

            handle_module._schedule_write = schedule_write
            return
        from cocotb.scheduler import Scheduler  # cocotb 1.x

        original19 = Scheduler._schedule_write

        def schedule_write19(self, handle, write_func, *args):
            _keep(handle)
            return original19(self, handle, write_func, *args)

        Scheduler._schedule_write = schedule_write19
    except Exception as exc:  # a location is a nicety: never fail the run for it
        print(f"rs_cocotb_guard: cannot keep write locations: {exc}", file=sys.stderr)


def locate(target: str) -> str:
    """``file:line`` (relative to the test dir) where the test wrote ``target`` (the simulator's
    full name of the handle), or ``""`` when unknown."""
    live = _test_frame(sys._getframe(1))
    if live is not None:
        return live
    names = [target, target.removeprefix("TOP.")]
    for name in names:
        if name in _writes:
            return _writes[name]
    for path, where in reversed(list(_writes.items())):
        if any(n.endswith("." + path) or path.endswith("." + n) for n in names):
            return where
    return ""
