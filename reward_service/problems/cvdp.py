"""CVDP cid012 ("testbench stimulus generation") problems as :class:`Problem` objects.

Source: NVIDIA's CVDP benchmark v1.0.2, category cid012, one JSON object per line (see
``shared/cases/README.md``). Two row shapes exist:

* non-agentic: ``{id, categories: ["cid012", difficulty], input: {prompt, context},
  output: {response, context: {"verif/<tb>.sv": ""}}, harness: {files: {path: text}}}``;
* agentic: ``{id, categories, system_message, prompt, context: {"docs/<spec>.md": text},
  patch: {"verif/<tb>.sv": ""}, harness: {path: text}}`` (the harness is a flat dict of files).

Where each :class:`Problem` field comes from:

* ``design.files``: the harness files ``src/*.sv``, ``src/*.v`` (and ``.svh``/``.vh`` headers),
  with the ``src/`` prefix removed;
* ``design.toplevel``: the DUT module, i.e. the module declared in those files that no other of
  them instantiates; when several qualify, the one the prompt names (`` `name` `` or ``**name**``),
  then the one whose file is named after it;
* ``dut_instance``: the instance name the original checker (``src/process.py``) looks up in the
  coverage report: the quoted key of ``metrics["uut"]`` / ``metrics.get("uut", ...)`` in its
  ``assert`` (or ``metrics[dut]`` with ``dut = "name"`` assigned in the file); for checkers reading ``metrics[os.getenv("TOPLEVEL")]`` the ``TOPLEVEL`` of
  ``src/.env``; for ``os.getenv("TOP_MODULE", "<default>")`` that variable or its default; as a
  last resort the prompt's "instantiated as `uut`" / "Name the instance ... as `uut`" text;
* ``target_percent``: ``TARGET`` of ``src/.env`` (the original harness passes when the DUT
  instance's overall average coverage is >= TARGET);
* ``engine``: ``settings.cvdp_engine`` (applied by :func:`~reward_service.engine_choice.choose_engine`), by
  default ``auto`` (the fast path for designs whose self-check agrees with Verilator);
* ``testbench_path``: the single key of ``output.context`` (non-agentic) or ``patch`` (agentic);
* ``prompt``: ``input.prompt`` or ``prompt``; ``context``: ``input.context`` or ``context``
  (spec documents, partial testbenches); ``difficulty``: the second category.

Errors: :func:`problem_from_row` raises :class:`ValueError` for a row it cannot understand;
:func:`load_problems` re-raises it with the file name and line number.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward_service import hdl
from reward_service.models import (
    DEFAULT_METRICS,
    CocotbStimulus,
    Completion,
    Design,
    Metric,
    ProblemSpec,
    ScoreRequest,
    Simulator,
    SvTestbench,
    Target,
)
from reward_service.settings import get_settings

__all__ = [
    "Problem",
    "load_problems",
    "problem_from_row",
    "find_toplevel",
    "parse_env",
]

RTL_SUFFIXES = (".sv", ".v") + hdl.HEADER_SUFFIXES
_HEADER_SUFFIXES = hdl.HEADER_SUFFIXES

# process.py lookups of the DUT instance in the coverage report
_METRICS_KEY = re.compile(r"""metrics\s*(?:\[\s*|\.get\(\s*)(["'])(\w+)\1""")
_METRICS_VAR = re.compile(r"""metrics\s*\[\s*([A-Za-z_]\w*)\s*\]""")
_GETENV_TOPLEVEL = re.compile(r"""metrics\s*\[\s*os\.getenv\(\s*["'](\w+)["']\s*\)""")
_GETENV_DEFAULT = re.compile(r"""os\.getenv\(\s*["'](TOP_MODULE|TOPLEVEL|DUT_INSTANCE)["']\s*,\s*["'](\w+)["']""")
# prompt text naming the instance
_PROMPT_INSTANCE = [
    re.compile(r"[Nn]ame the instance[^\n.]*?\bas\s*[`*]*\s*(\w+)"),
    re.compile(r"instantiated\s+as\s*[`*]*\s*(\w+)"),
    re.compile(r"[Ii]nstantiate the\s+[`*]*\w+[`*]*\s+module\s+as\s*[`*]*\s*(\w+)"),
    re.compile(r"instance of the (?:RTL|module)[^\n.]*?(?:named|as)\s*[`*]*\s*(\w+)"),
]


def find_toplevel(files: dict[str, str], prompt: str = "") -> str:
    """The DUT module of RTL ``files``: the declared module that no other module instantiates.

    Ties are broken by the prompt (a candidate written as `` `name` `` or ``**name**``, then
    one mentioned as a word), then by file name (``name.sv``). Raises ``ValueError`` when no
    module is declared or the tie cannot be broken.
    """
    modules = [name for text in files.values() for name in hdl.module_names(text)]
    if not modules:
        raise ValueError(f"no Verilog module declared in the RTL files {sorted(files)}")
    # mutual instantiation should not happen; then fall back to all modules
    candidates = hdl.top_modules(list(files.values())) or modules
    if len(candidates) == 1:
        return candidates[0]
    for test in (
        lambda n: re.search(rf"(`|\*\*){re.escape(n)}\1", prompt),
        lambda n: re.search(rf"(?<!\w){re.escape(n)}(?!\w)", prompt),
        lambda n: any(posixpath.splitext(posixpath.basename(f))[0] == n for f in files),
    ):
        chosen = [n for n in candidates if test(n)]
        if len(chosen) == 1:
            return chosen[0]
        if chosen:
            candidates = chosen
    raise ValueError(f"cannot tell the DUT module among the uninstantiated modules {sorted(candidates)}")


def parse_env(text: str) -> dict[str, str]:
    """Parse a docker ``.env`` file (``KEY = value`` lines, ``#`` comments)."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        env[key.strip()] = value.strip().strip("\"'")
    return env


def _dut_instance(process_py: str, env: dict[str, str], prompt: str) -> str:
    for line in process_py.splitlines():
        stripped = line.strip()
        if not stripped.startswith("assert"):
            continue
        condition = stripped.split(",", 1)[0] if "metrics.get" not in stripped else stripped
        m = _METRICS_KEY.search(condition)
        if m:
            return m.group(2)
        m = _METRICS_VAR.search(condition)  # dut = "door_lock_inst" ... metrics[dut]
        if m:
            value = re.search(rf"""^[ \t]*{m.group(1)}\s*=\s*(["'])(\w+)\1""", process_py, re.MULTILINE)
            if value:
                return value.group(2)
    m = _GETENV_TOPLEVEL.search(process_py)
    if m and env.get(m.group(1)):
        return env[m.group(1)]
    m = _GETENV_DEFAULT.search(process_py)
    if m:
        return env.get(m.group(1)) or m.group(2)
    for pattern in _PROMPT_INSTANCE:
        m = pattern.search(prompt)
        if m:
            return m.group(1)
    raise ValueError("cannot find the DUT instance name in src/process.py, src/.env or the prompt")


class Problem(BaseModel):
    """One cid012 problem: the DUT, what the testbench must look like, and the pass target."""

    model_config = ConfigDict(extra="forbid")

    id: str
    difficulty: str | None = None
    agentic: bool = False
    design: Design = Field(description="RTL files (harness src/ without the prefix) and the DUT module")
    dut_instance: str = Field(description="instance name of the DUT the testbench must use (coverage scope)")
    target_percent: float = Field(ge=0, le=100, description="TARGET of src/.env")
    metrics: list[Metric] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    testbench_path: str = Field(description="where the original harness expects the testbench")
    prompt: str
    context: dict[str, str] = Field(default_factory=dict, description="files given with the prompt")
    simulator: Simulator = Simulator.verilator
    engine: Literal["verilator", "fast", "auto"] | None = Field(
        "auto",
        description="code-coverage engine of its samples: auto = the fast path once the design "
        "passed its self-check against Verilator, decided once per design (docs/fastcov.md)",
    )

    @property
    def toplevel(self) -> str | None:
        """The DUT module name."""
        return self.design.toplevel

    def spec(self) -> ProblemSpec:
        """This problem as the API registers it: one ``overall >= target_percent`` target and
        ``exclude_unreachable=True`` (TARGETs were calibrated on a commercial flow; points
        proved unreachable are excluded from the judged figure, where CVDP's own grading did
        not; docs/formal.md). Raises ``pydantic.ValidationError`` when the id is not one the API
        registers (:data:`~reward_service.models.PROBLEM_ID_PATTERN`)."""
        return ProblemSpec(**self._spec_fields())

    def _spec_fields(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "design": self.design,
            "dut_instance": self.dut_instance,
            "metrics": list(self.metrics),
            "targets": [Target(metric="overall", percent=self.target_percent)],
            "simulator": self.simulator,
            "engine": self.engine,
            "exclude_unreachable": True,
            "difficulty": self.difficulty,
            "prompt": self.prompt,
            "context": dict(self.context),
            "testbench_path": self.testbench_path,
        }

    def request(self, stimulus: SvTestbench | CocotbStimulus | Completion | str, **overrides: Any) -> ScoreRequest:
        """A :class:`ScoreRequest` scoring ``stimulus`` on this problem (its :meth:`spec`'s
        :meth:`~reward_service.models.ProblemSpec.request`: design, ``coverage`` with scope =
        ``dut_instance``, ``metrics`` and one ``overall >= target_percent`` target, simulator,
        engine); ``overrides`` replace any top-level field (e.g.
        ``reward=RewardSpec(shaping="ratio")``, ``seed=3``). Raises ``pydantic.ValidationError``
        for invalid overrides."""
        # Not validated as a ProblemSpec: its fields come from this validated problem, and the
        # id (which the request does not carry) may be any string of a cid012 file the CLI and
        # rescore load, not only one the API registers (PROBLEM_ID_PATTERN).
        spec = ProblemSpec.model_construct(**self._spec_fields())
        return spec.request(stimulus, **overrides)


def _harness_files(row: dict[str, Any]) -> dict[str, str]:
    harness = row.get("harness")
    if not isinstance(harness, dict):
        raise ValueError("row has no `harness` object")
    files = harness.get("files")
    files = files if isinstance(files, dict) else harness
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ValueError("harness files must map path strings to text")
    return files


def problem_from_row(row: dict[str, Any]) -> Problem:
    """Build a :class:`Problem` from one decoded cid012 JSONL row. Raises ``ValueError``."""
    if not isinstance(row, dict):
        raise ValueError(f"row must be a JSON object, got {type(row).__name__}")
    pid = row.get("id")
    if not isinstance(pid, str) or not pid:
        raise ValueError("row has no string `id`")
    agentic = "patch" in row
    if agentic:
        prompt, context, out = row.get("prompt"), row.get("context") or {}, row.get("patch")
    else:
        inp, output = row.get("input"), row.get("output")
        if not isinstance(inp, dict) or not isinstance(output, dict):
            raise ValueError(f"{pid}: non-agentic row needs `input` and `output` objects")
        prompt, context, out = inp.get("prompt"), inp.get("context") or {}, output.get("context")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{pid}: row has no prompt")
    if not isinstance(out, dict) or len(out) != 1:
        raise ValueError(f"{pid}: expected exactly one testbench path in output.context/patch, got {out!r}")
    testbench_path = next(iter(out))

    files = _harness_files(row)
    rtl = {
        path[len("src/") :]: text
        for path, text in files.items()
        if path.startswith("src/") and path.endswith(RTL_SUFFIXES)
    }
    if not any(not name.endswith(_HEADER_SUFFIXES) for name in rtl):
        raise ValueError(f"{pid}: the harness holds no RTL file (src/*.sv, src/*.v)")
    if "src/.env" not in files:
        raise ValueError(f"{pid}: the harness has no src/.env")
    env = parse_env(files["src/.env"])
    try:
        target = float(env["TARGET"])
    except (KeyError, ValueError):
        raise ValueError(f"{pid}: src/.env has no numeric TARGET") from None
    try:
        toplevel = find_toplevel({n: t for n, t in rtl.items() if not n.endswith(_HEADER_SUFFIXES)}, prompt)
        dut_instance = _dut_instance(files.get("src/process.py", ""), env, prompt)
    except ValueError as exc:
        raise ValueError(f"{pid}: {exc}") from None

    categories = row.get("categories")
    categories = categories if isinstance(categories, list) else []  # a dict or string is no list of tags
    difficulty = categories[1] if len(categories) > 1 and isinstance(categories[1], str) else None
    return Problem(
        id=pid,
        difficulty=difficulty,
        agentic=agentic,
        design=Design(files=rtl, toplevel=toplevel),
        dut_instance=dut_instance,
        target_percent=target,
        testbench_path=testbench_path,
        prompt=prompt,
        context={k: v for k, v in context.items() if isinstance(v, str)} if isinstance(context, dict) else {},
        engine=get_settings().cvdp_engine,
    )


def _rows(lines: Iterable[str], source: str) -> dict[str, Problem]:
    problems: dict[str, Problem] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            problem = problem_from_row(json.loads(line))
        except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError, ValidationError are ValueErrors
            raise ValueError(f"{source}:{lineno}: bad cid012 row: {exc}") from exc
        except RecursionError:  # json.loads of "[[[[...": nesting deeper than the interpreter's stack
            raise ValueError(f"{source}:{lineno}: bad cid012 row: JSON nested too deeply") from None
        if problem.id in problems:
            raise ValueError(f"{source}:{lineno}: duplicate problem id {problem.id!r}")
        problems[problem.id] = problem
    return problems


def load_problems(path: str | os.PathLike[str]) -> dict[str, Problem]:
    """Load a cid012 JSONL file: problem id -> :class:`Problem`, in file order.

    Raises ``ValueError("<path>:<line>: bad cid012 row: ...")`` for a malformed row or a
    duplicate id, and ``OSError`` when the file cannot be read.
    """
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        return _rows(f, str(path))
