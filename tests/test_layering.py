"""Import layering, read from the source with ast (every import statement, late ones and
``TYPE_CHECKING`` ones included): the sandbox layer imports nothing above it, the simulators
nothing above them, and the cocotb flow neither simulator module (no import loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import reward_service

PACKAGE = Path(reward_service.__file__).parent
#: What the sandbox layer must not import: the layers that run on top of it.
ABOVE_SANDBOX = (
    "reward_service.simulators",
    "reward_service.fastcov",
    "reward_service.scoring",
    "reward_service.engine",
)


def imports(text: str, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``text`` (in line order), the source of a module in ``package``:
    ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a
    submodule); relative imports are resolved against ``package``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return sorted(found)


def offending(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    """``file:line: imports module`` for each import in ``path`` of a module under ``forbidden``."""
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {module}"
        for line, module in imports(path.read_text(), package)
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    ]


def test_the_checker_sees_every_kind_of_import():
    """The walker finds top-level, late, ``from``-style and relative imports (so the layering
    tests below can fail), and not a sibling whose name merely starts alike."""
    text = (
        "import reward_service.engine\n"
        "def f():\n    from reward_service.simulators import cocotb_flow\n"
        "from ..fastcov import backend\n"
        "from reward_service import scoring, settings\n"
        "import reward_service.engineering\n"
        "from . import base\n"
    )
    found = [
        (line, m)
        for line, m in imports(text, "reward_service.sandbox")
        if any(m == f or m.startswith(f + ".") for f in ABOVE_SANDBOX)
    ]
    assert found == [
        (1, "reward_service.engine"),
        (3, "reward_service.simulators"),
        (3, "reward_service.simulators.cocotb_flow"),
        (4, "reward_service.fastcov"),
        (4, "reward_service.fastcov.backend"),
        (5, "reward_service.scoring"),
    ]
    assert (7, "reward_service.sandbox.base") in imports(text, "reward_service.sandbox")


def test_the_sandbox_does_not_import_upward():
    """No module under reward_service/sandbox imports the simulators, the fast path or the
    scoring pipeline (the sandbox runs commands; the layers above it decide which)."""
    modules = sorted((PACKAGE / "sandbox").rglob("*.py"))
    assert len(modules) > 5
    bad = [line for path in modules for line in offending(path, ABOVE_SANDBOX)]
    assert bad == []


def test_the_simulators_do_not_import_upward():
    """The simulators run a job in the sandbox; the fast path (which instruments the DUT and
    runs it through them) and scoring sit above them."""
    modules = sorted((PACKAGE / "simulators").rglob("*.py"))
    bad = [
        line
        for path in modules
        for line in offending(path, ("reward_service.fastcov", "reward_service.scoring", "reward_service.engine"))
    ]
    assert bad == []


def test_the_cocotb_flow_does_not_import_the_simulators():
    """The cocotb flow is driven through the simulator object it is given (its build step is
    the simulator's own method): it imports neither simulator module, so there is no loop."""
    flow = PACKAGE / "simulators" / "cocotb_flow.py"
    assert offending(flow, ("reward_service.simulators.verilator", "reward_service.simulators.icarus")) == []


def test_the_wire_models_import_only_the_engine_choice():
    """The wire models (shared with a client-only install) import nothing of the service but the
    pure engine-choice rule, which itself imports nothing of the service: a problem's
    ``request()`` applies the same rule as the scoring layer without importing it."""
    models = PACKAGE / "models.py"
    choice = PACKAGE / "engine_choice.py"
    assert offending(choice, ("reward_service",)) == []
    service = {m for _, m in imports(models.read_text(), "reward_service") if m.split(".")[0] == "reward_service"}
    assert service == {"reward_service.engine_choice"} | {
        f"reward_service.engine_choice.{name}" for name in ("EngineName", "choose_engine")
    }


def test_scoring_is_given_the_fast_path_and_the_prover():
    """The scoring pipeline imports neither the fast path nor the prover (issue 20, item 3): it
    is given them as plug-ins (``scoring.types.Plugins``), wired at the composition root,
    ``reward_service/engine.py``, which makes the engine everything else uses."""
    modules = sorted((PACKAGE / "scoring").rglob("*.py"))
    assert len(modules) > 5
    bad = [line for path in modules for line in offending(path, ("reward_service.fastcov", "reward_service.formal"))]
    assert bad == []
    root = PACKAGE / "engine.py"
    wired = {m for _, m in imports(root.read_text(), "reward_service")}
    assert {"reward_service.fastcov.routing", "reward_service.formal.reachable.reachable"} <= wired


def test_an_engine_without_the_fast_path_says_so(tmp_path):
    """The scoring engine alone (no plug-ins) cannot score ``engine=fast``: ours, a
    ``sandbox_error`` naming what is missing, never a quiet Verilator or Icarus score; the wired
    engine has both plug-ins."""
    from reward_service import engine as composition
    from reward_service.models import Status
    from reward_service.scoring import Engine as Bare
    from reward_service.settings import Settings

    design = "module d(input logic a, output logic y); assign y = a; endmodule\n"
    tb = "module tb; logic a; wire y; d dut(.a(a), .y(y)); initial begin a = 1; #1 $finish; end endmodule\n"
    request = {
        "design": {"files": {"d.sv": design}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "dut"},
        "engine": "fast",
    }
    result = Bare(Settings(cache_dir=tmp_path, result_cache=False)).score(request)
    assert result.status == Status.sandbox_error and result.reward is None
    assert "needs the fast path and this engine was given none" in (result.message or "")
    wired = composition.Engine(Settings(cache_dir=tmp_path, result_cache=False))
    assert wired.plugins is composition.PLUGINS
    assert wired.plugins.fast_path is not None and wired.plugins.prover is not None


def test_the_plug_ins_import_only_the_scoring_types():
    """The fast path and the prover are plug-ins of the scoring pipeline: of it they import only
    the contract (``scoring.types``), never the engine or its stages, and never the composition
    root (``reward_service.engine``), which imports them."""
    modules = sorted([*(PACKAGE / "fastcov").rglob("*.py"), *(PACKAGE / "formal").rglob("*.py")])
    assert len(modules) > 10
    bad = [
        line
        for path in modules
        for line in offending(path, ("reward_service.scoring", "reward_service.engine"))
        if not line.endswith("imports reward_service.scoring.types") and ".scoring.types." not in line
    ]
    assert bad == []
