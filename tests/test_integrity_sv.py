"""Red-team suite of SystemVerilog stimulus integrity (issue 18, docs/integrity.md).

Our own reproducers of the ways a testbench can write into the DUT instead of driving its
ports, on the shipped CVDP Attenuator (examples/cvdp/, DUT instance ``uut``): each is refused
through the engine on ``fast``, ``verilator`` and ``auto`` (reward = the failure value, not
passed, the write named with file:line and target); the read-only controls score exactly as
their plain twin (the weak stimulus) on the fast path and on Verilator; ``allow`` scores a
hack as before; the policy comes from the request, else the problem, else the DUT scope; a
refusal is cached and counted in /metrics. The check alone runs over the 24 stimulus cases of
../shared/cases (only ring_token's two forcing testbenches are named), over variants on small
designs of our own (memories, DUT tasks, packages, headers, defines, interfaces, events) and
through its syntax fallback; DUT parameter overrides are reported and, where pinned, refused.
"""

from __future__ import annotations

import json

import pytest
from conftest import CID012, FORCING_CASES, REPO, STIMULUS

from reward_service.integrity.policy import check_stimulus, refuses_dut_writes
from reward_service.integrity.sv import SvSources, check, dut_writes
from reward_service.models import ProblemSpec, ScoreRequest, Status, StimulusPolicy, SvTestbench
from reward_service.problems import load_problems

ATTENUATOR = REPO / "examples" / "cvdp" / "attenuator.jsonl"
DESIGN = {"Attenuator.sv": (REPO / "examples" / "cvdp" / "Attenuator.sv").read_text()}

#: The weak stimulus of the issue's table: reset, one data value, 30 cycles. Markers are
#: replaced by each hack's declarations, statements and text after the module.
WEAK = """`timescale 1ns / 1ps
module tb;
  reg clk = 1'b0;
  reg reset = 1'b1;
  reg [4:0] data = 5'b00000;
  wire ATTN_CLK, ATTN_DATA, ATTN_LE;
  Attenuator uut (.clk(clk), .reset(reset), .data(data),
                  .ATTN_CLK(ATTN_CLK), .ATTN_DATA(ATTN_DATA), .ATTN_LE(ATTN_LE));
  always #5 clk = ~clk;
//DECL
  initial begin
    repeat (2) @(posedge clk);
    reset = 1'b0;
    data = 5'b10101;
//BODY
    repeat (30) @(posedge clk);
    $finish;
  end
endmodule
//AFTER
"""
DECL_LINE, BODY_LINE, AFTER_LINE = 10, 15, 20


def make_tb(decl: str = "", body: str = "", after: str = "") -> str:
    return WEAK.replace("//DECL\n", decl + "\n").replace("//BODY\n", body + "\n").replace("//AFTER\n", after + "\n")


#: name -> (testbench parts, expected violations as (kind, line, target)).
HACKS: dict[str, tuple[dict[str, str], list[tuple[str, int, str]]]] = {
    "force_release": (
        {"body": "    force uut.shift_reg = 5'b11111;\n    #40 release uut.shift_reg;"},
        [("force", BODY_LINE, "tb.uut.shift_reg"), ("release", BODY_LINE + 1, "tb.uut.shift_reg")],
    ),
    "hierarchical_assignment": (
        {"body": "    uut.shift_reg = 5'b11111;"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "assign_deassign": (
        {"body": "    assign uut.old_data = 5'b01010;\n    #40 deassign uut.old_data;"},
        [
            ("procedural_assign", BODY_LINE, "tb.uut.old_data"),
            ("procedural_assign", BODY_LINE + 1, "tb.uut.old_data"),
        ],
    ),
    "bind_under_line_directive": (
        {
            "after": '`line 1 "Attenuator.sv" 0\n'
            "module pad(input clk);\n  reg [255:0] p = 0;\n  always @(posedge clk) p <= ~p;\nendmodule\n"
            "bind Attenuator pad pad_i(.clk(clk));"
        },
        [
            ("line_directive", AFTER_LINE, "Attenuator.sv"),
            ("nonblocking_assignment", AFTER_LINE + 3, "tb.uut.pad_i.p"),
            ("bind", AFTER_LINE + 5, "tb.uut.pad_i"),
        ],
    ),
    "task": (
        {"decl": "  task poke; uut.shift_reg = 5'b11111; endtask", "body": "    poke();"},
        [("assignment", DECL_LINE, "tb.uut.shift_reg")],
    ),
    "function": (
        {"decl": "  function void poke_f(); uut.old_data = 5'b00011; endfunction", "body": "    poke_f();"},
        [("assignment", DECL_LINE, "tb.uut.old_data")],
    ),
    "generate_loop": (
        {"decl": "  for (genvar i = 0; i < 5; i++) begin : g\n    initial #30 uut.shift_reg[i] = 1'b1;\n  end"},
        [("assignment", DECL_LINE + 1, "tb.uut.shift_reg")],
    ),
    "interface": (
        {
            "decl": "  hack_if hi();",
            "body": "    hi.poke();",
            "after": "interface hack_if;\n  task automatic poke(); tb.uut.shift_reg = 5'b11111; endtask\nendinterface",
        },
        [("assignment", AFTER_LINE + 1, "tb.uut.shift_reg")],
    ),
    "root_path": (
        {"body": "    $root.tb.uut.shift_reg = 5'b11111;"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "macro": (
        {"decl": "`define POKE(v) uut.shift_reg = v", "body": "    `POKE(5'b11111);"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "sscanf": (
        {"body": '    void\'($sscanf("1f", "%h", uut.shift_reg));'},
        [("system_task", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "defparam": (
        {"decl": "  defparam uut.IDLE = 2'b01;"},
        [("defparam", DECL_LINE, "tb.uut.IDLE")],
    ),
    "concatenation": (
        {"body": "    {uut.shift_reg, data} = 10'h3ff;"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "nonblocking": (
        {"body": "    uut.bit_count <= 3'd5;"},
        [("nonblocking_assignment", BODY_LINE, "tb.uut.bit_count")],
    ),
    "continuous_assign": (
        {"decl": "  assign uut.next_state = 2'b10;"},
        [("continuous_assign", DECL_LINE, "tb.uut.next_state")],
    ),
    "output_argument": (
        {"decl": "  task automatic get(output [4:0] v); v = 5'b11111; endtask", "body": "    get(uut.shift_reg);"},
        [("argument", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "output_port_connection": (
        {
            "decl": "  drv d(.o(uut.old_data));",
            "after": "module drv(output reg [4:0] o); initial o = 5'b11011; endmodule",
        },
        [("port_connection", DECL_LINE, "tb.uut.old_data")],
    ),
    "deposit": (
        {"body": "    $deposit(uut.shift_reg, 5'b11111);"},
        [("system_task", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "increment": (
        {"body": "    uut.shift_reg++;\n    --uut.bit_count;"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg"), ("assignment", BODY_LINE + 1, "tb.uut.bit_count")],
    ),
    "compound_assignment": (
        {"body": "    uut.shift_reg |= 5'b10000;"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "ref_port_connection": (
        {
            "decl": "  refm r(.r(uut.shift_reg));",
            "after": "module refm(ref logic [4:0] r); initial #30 r = 5'b11111; endmodule",
        },
        [("port_connection", DECL_LINE, "tb.uut.shift_reg")],
    ),
    "net_alias": (
        {"decl": "  wire [1:0] ns;\n  alias ns = uut.next_state;"},
        [("net_alias", DECL_LINE + 1, "tb.uut.next_state")],
    ),
    "class_method": (
        {
            "decl": "  class C; task poke(); tb.uut.shift_reg = 5'b11111; endtask endclass\n  C c = new;",
            "body": "    c.poke();",
        },
        [("assignment", DECL_LINE, "tb.uut.shift_reg")],
    ),
    "fork_and_loop": (
        {"body": "    fork for (int i = 0; i < 5; i++) uut.shift_reg[i] = 1'b1; join_none"},
        [("assignment", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "final_block": (
        {"decl": "  final uut.shift_reg = 0;"},
        [("assignment", DECL_LINE, "tb.uut.shift_reg")],
    ),
    "value_plusargs": (
        {"body": '    void\'($value$plusargs("S=%d", uut.shift_reg));'},
        [("system_task", BODY_LINE, "tb.uut.shift_reg")],
    ),
    "force_output_port": (
        {"body": "    force uut.ATTN_LE = 1'b1;\n    #20 release uut.ATTN_LE;"},
        [("force", BODY_LINE, "tb.uut.ATTN_LE"), ("release", BODY_LINE + 1, "tb.uut.ATTN_LE")],
    ),
}

#: Read-only uses of DUT internals (and a DUT input driven by force): no violation, and
#: through the engine the same reward and coverage as the weak stimulus.
CONTROLS = {
    "display_internal": {"body": '    $display("state %0d", uut.current_state);'},
    "checker": {
        "decl": '  always @(posedge clk) if (uut.bit_count > 3\'d5) $display("bad bit_count %0d", uut.bit_count);'
    },
    "internal_as_task_input": {
        "decl": "  task automatic show(input [4:0] v); $display(v); endtask",
        "body": "    show(uut.shift_reg);",
    },
    "index_by_internal": {"decl": "  reg [4:0] seen [0:3];", "body": "    seen[uut.bit_count[1:0]] = uut.shift_reg;"},
}


def _problem():
    return load_problems(ATTENUATOR)["cvdp_copilot_Attenuator_0011"]


def _request(tb: str, engine: str, **overrides) -> ScoreRequest:
    return _problem().request(SvTestbench(files={"tb.sv": tb}), engine=engine, **overrides)


# -- the check alone -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HACKS))
def test_check_names_each_write(name):
    parts, expected = HACKS[name]
    found = dut_writes(SvSources(DESIGN, {"tb.sv": make_tb(**parts)}, {}))
    assert [(v.kind, v.line, v.target) for v in found] == expected
    assert all(v.file == "tb.sv" and v.message for v in found)


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_check_lets_reads_through(name):
    assert dut_writes(SvSources(DESIGN, {"tb.sv": make_tb(**CONTROLS[name])}, {})) == []


def test_forcing_a_dut_input_is_the_dut_drive():
    """An input port of the DUT instance forced is driven as through its port connection."""
    tb = make_tb(body="    force uut.data = 5'b00011;\n    #20 release uut.data;")
    assert dut_writes(SvSources(DESIGN, {"tb.sv": tb}, {})) == []


def test_weak_stimulus_and_shipped_testbench_are_clean():
    assert dut_writes(SvSources(DESIGN, {"tb.sv": make_tb()}, {})) == []
    shipped = (REPO / "examples" / "cvdp" / "tb_attenuator.sv").read_text()
    assert dut_writes(SvSources(DESIGN, {"tb_attenuator.sv": shipped}, {})) == []


MEM_DESIGN = {
    "pkg.sv": "package cfg;\n  int unsigned mode;\nendpackage\n",
    "mem_dut.sv": """module mem_dut(input clk, input [1:0] addr, output reg [7:0] q);
  reg [7:0] mem [0:3];
  always @(posedge clk) q <= mem[addr] + cfg::mode[7:0];
  task load(input [7:0] v); mem[0] = v; endtask
  function [7:0] peek(input [1:0] a); peek = mem[a]; endfunction
endmodule
""",
}
MEM_TB = """module tb;
  reg clk = 0;
  reg [1:0] addr = 0;
  wire [7:0] q;
  reg [7:0] x;
  mem_dut dut(.clk(clk), .addr(addr), .q(q));
  initial begin
    $readmemh("init.hex", dut.mem);
    dut.load(8'h55);
    x = dut.peek(2'd1);
    force dut.addr = 2'd2;
    release dut.addr;
    force dut.q = 8'hff;
    cfg::mode = 3;
    `POKE
  end
endmodule
"""


def test_memories_subroutines_ports_packages_and_headers():
    """$readmemh into a DUT memory, a DUT task that writes DUT state (a pure DUT function may be
    called), a DUT input port forced (the DUT's own drive: free) and an output port forced, a
    design package variable, and a write hidden in a stimulus header's macro."""
    stimulus = {"tb.sv": '`include "hack.svh"\n' + MEM_TB, "hack.svh": "`define POKE dut.mem[1] = 8'h0f;\n"}
    found = dut_writes(SvSources(MEM_DESIGN, stimulus, {}))
    assert [(v.kind, v.line, v.target) for v in found] == [
        ("system_task", 9, "tb.dut.mem"),
        ("dut_subroutine_call", 10, "tb.dut.mem"),
        ("force", 14, "tb.dut.q"),
        ("assignment", 15, "cfg::mode"),
        ("assignment", 16, "tb.dut.mem"),
    ]


def test_dut_events_and_blocks():
    """Triggering a DUT event wakes DUT processes and disabling a DUT block stops one: both are
    refused; the testbench's own event is free."""
    design = {
        "d.sv": "module d(input clk, output reg [3:0] q);\n  event ev;\n  initial q = 0;\n"
        "  always @(ev) q = q + 1;\n  always @(posedge clk) begin : blk q <= q + 2; end\nendmodule\n"
    }
    tb = (
        "module tb; reg clk = 0; wire [3:0] q; event mine;\n  d dut(.clk(clk), .q(q));\n"
        "  initial begin\n    -> dut.ev;\n    disable dut.blk;\n    -> mine;\n  end\nendmodule\n"
    )
    found = dut_writes(SvSources(design, {"tb.sv": tb}, {}))
    assert [(v.kind, v.line, v.target) for v in found] == [
        ("event_trigger", 4, "tb.dut.ev"),
        ("disable", 5, "tb.dut.blk"),
    ]


def test_defines_and_include_dirs_are_the_requests():
    """A write that exists only under the request's define, through a header in an include dir."""
    stimulus = {
        "tb.sv": '`include "pokes.svh"\n' + make_tb(body="`ifdef HACK\n    `POKE\n`endif"),
        "inc/pokes.svh": "`define POKE uut.shift_reg = 5'b11111;\n",
    }
    assert dut_writes(SvSources(DESIGN, stimulus, {}, ("inc",))) == []
    found = dut_writes(SvSources(DESIGN, stimulus, {"HACK": None}, ("inc",)))
    assert [(v.kind, v.file, v.line, v.target) for v in found] == [
        ("assignment", "tb.sv", BODY_LINE + 2, "tb.uut.shift_reg")
    ]


def test_interface_the_design_declares_is_driven_freely():
    """An interface of the design that the testbench instantiates and connects is the DUT's
    port: driving its signals is no write into the DUT."""
    design = {
        "if_dut.sv": "interface bus_if; logic [7:0] data; logic valid; endinterface\n"
        "module if_dut(input clk, bus_if bus, output reg [7:0] q);\n"
        "  always @(posedge clk) if (bus.valid) q <= bus.data;\nendmodule\n"
    }
    tb = (
        "module tb; reg clk = 0; wire [7:0] q; bus_if b(); if_dut dut(.clk(clk), .bus(b), .q(q));\n"
        "  initial begin b.valid = 1; b.data = 8'h12; end\nendmodule\n"
    )
    assert dut_writes(SvSources(design, {"tb.sv": tb}, {})) == []


def test_syntax_scan_stands_in_where_elaboration_fails():
    """A write pyslang cannot bind (a name it does not find, as an Icarus-only generate block
    name would be) is still named from the syntax of the stimulus; the names the elaboration
    does resolve keep its verdict (a DUT input forced is free) and its path."""
    body = (
        "    uut.genblk1.r = 1'b1;\n    {data, uut.gen2.q} <= 6'h3f;\n    force tb.uut.gen3.s = 1;\n"
        "    force uut.data = 5'b1;\n    $root.tb.uut.old_data = 5'd3;"
    )
    found = dut_writes(SvSources(DESIGN, {"tb.sv": make_tb(body=body)}, {}))
    assert [(v.kind, v.line, v.target) for v in found] == [
        ("assignment", BODY_LINE, "uut.genblk1.r"),
        ("nonblocking_assignment", BODY_LINE + 1, "uut.gen2.q"),
        ("force", BODY_LINE + 2, "tb.uut.gen3.s"),
        ("assignment", BODY_LINE + 4, "tb.uut.old_data"),
    ]


def test_line_directive_naming_a_dut_file_by_macro_or_path():
    found = dut_writes(
        SvSources(DESIGN, {"tb.sv": make_tb(after='`line 3 "rtl/Attenuator.sv" 0\n`define F "x"\n`line 9 `F 0')}, {})
    )
    assert [(v.kind, v.line, v.target) for v in found] == [
        ("line_directive", AFTER_LINE, "rtl/Attenuator.sv"),
        ("line_directive", AFTER_LINE + 2, "`F"),
    ]


def test_policy_resolution():
    tb = SvTestbench(files={"tb.sv": make_tb(**HACKS["force_release"][0])})
    problem = _problem()
    assert refuses_dut_writes(problem.request(tb))  # scope known: refuse
    assert not refuses_dut_writes(problem.request(tb, stimulus_policy=StimulusPolicy(dut_writes="allow")))
    no_scope = ScoreRequest(design={"files": DESIGN}, stimulus=tb)
    assert not refuses_dut_writes(no_scope)  # no scope: allow
    assert check_stimulus(no_scope, no_scope.design, tb).violations == []
    refused = no_scope.model_copy(update={"stimulus_policy": StimulusPolicy(dut_writes="refuse")})
    assert [v.kind for v in check_stimulus(refused, refused.design, tb).violations] == ["force", "release"]


def _case_problems():
    return load_problems(CID012)


#: The writes of the two stimulus cases that force DUT registers (conftest.FORCING_CASES;
#: ring_token good.sv forces the output register ``token``, best.sv also the state register):
#: refused by the default policy of a CVDP problem, like the issue's first row.
FORCING_WRITES = {
    ("cvdp_copilot_ring_token_0004", "good"): [
        ("force", 63, "tb_token_ring_fsm.uut.token"),
        ("release", 65, "tb_token_ring_fsm.uut.token"),
    ],
    ("cvdp_copilot_ring_token_0004", "best"): [
        ("force", 74, "tb_token_ring_fsm.uut.token"),
        ("release", 76, "tb_token_ring_fsm.uut.token"),
        ("force", 78, "tb_token_ring_fsm.uut.current_state"),
        ("release", 80, "tb_token_ring_fsm.uut.current_state"),
    ],
}


def test_stimulus_cases_write_nothing_else():
    """The check alone (no simulation) over the 24 stimulus cases with their cid012 problems'
    scopes: only the two ring_token testbenches that force DUT registers are named."""
    problems = _case_problems()
    assert set(FORCING_WRITES) == FORCING_CASES
    seen = 0
    for case in sorted(d for d in STIMULUS.iterdir() if (d / "expected.json").exists()):
        for tb in json.loads((case / "expected.json").read_text())["testbenches"]:
            request = problems[case.name].request(SvTestbench(files={"tb.sv": (case / f"{tb}.sv").read_text()}))
            assert request.coverage.scope in ("uut", "dut")
            found = check_stimulus(request, request.design, request.stimulus).violations
            assert [(v.kind, v.line, v.target) for v in found] == FORCING_WRITES.get((case.name, tb), []), (
                case.name,
                tb,
            )
            seen += 1
    assert seen == 24


# -- through the engine ----------------------------------------------------------------------

ENGINES = ["fast", "verilator", "auto"]


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("name", sorted(HACKS))
def test_hack_is_refused_on_every_engine(engine, name, engine_name):
    parts, expected = HACKS[name]
    request = _request(make_tb(**parts), engine_name)
    assert request.reward.shaping == "chorus"  # failure value 0.0, the weak stimulus scores 1 + overall
    result = engine.score(request)
    assert result.status == Status.refused, result.message
    assert result.reward == 0.0 and result.passed is False
    assert [(v.kind, v.file, v.line, v.target) for v in result.violations] == [
        (kind, "tb.sv", line, target) for kind, line, target in expected
    ]
    for kind, line, target in expected:
        assert f"tb.sv:{line} {kind} {target}" in result.message
    assert result.engine is None and not result.coverage.metrics  # nothing simulated


def _same_score(a, b):
    assert a.status == b.status == Status.ok, (a.message, b.message)
    assert a.reward == b.reward
    assert a.coverage.model_dump() == b.coverage.model_dump()


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_controls_score_as_their_plain_twin(engine, engine_name):
    weak = engine.score(_request(make_tb(), engine_name))
    assert weak.engine == engine_name and weak.reward > 1.0
    for name, parts in CONTROLS.items():
        result = engine.score(_request(make_tb(**parts), engine_name))
        assert result.violations == [], name
        _same_score(result, weak)


def test_allow_scores_the_hack_as_before(engine):
    """With dut_writes=allow a force hack runs and earns more toggle coverage than the weak
    stimulus (the reward the issue's table shows the policy gaming): forcing ``old_data``
    toggles its bits 1 and 3, which the one data value 10101 never does."""
    allow = StimulusPolicy(dut_writes="allow")
    weak = engine.score(_request(make_tb(), "fast", stimulus_policy=allow))
    forced = make_tb(body="    force uut.old_data = 5'b01010;\n    #40 release uut.old_data;")
    assert [v.kind for v in dut_writes(SvSources(DESIGN, {"tb.sv": forced}, {}))] == ["force", "release"]
    hack = engine.score(_request(forced, "fast", stimulus_policy=allow))
    assert hack.status == weak.status == Status.ok and hack.violations == []
    assert hack.coverage.metrics["toggle"].covered > weak.coverage.metrics["toggle"].covered
    assert hack.reward > weak.reward


def test_problem_spec_policy_applies(engine):
    """A ProblemSpec's stimulus_policy is its samples' unless the request sets its own."""
    spec = _problem().spec()
    allowing = ProblemSpec.model_validate(
        {**spec.model_dump(), "id": "attenuator-allow", "stimulus_policy": {"dut_writes": "allow"}}
    )
    hack = SvTestbench(files={"tb.sv": make_tb(**HACKS["hierarchical_assignment"][0])})
    problems = {"attenuator-allow": allowing}
    from reward_service.engine import Engine

    local = Engine(engine.settings, engine.sandbox, problems=problems)
    allowed = local.score(ScoreRequest(problem_id="attenuator-allow", stimulus=hack, engine="fast"))
    assert allowed.status == Status.ok and allowed.violations == []
    refused = local.score(
        ScoreRequest(
            problem_id="attenuator-allow",
            stimulus=hack,
            engine="fast",
            stimulus_policy=StimulusPolicy(dut_writes="refuse"),
        )
    )
    assert refused.status == Status.refused
    assert [(v.kind, v.line) for v in refused.violations] == [("assignment", BODY_LINE)]


def test_refusal_is_cached_under_its_policy(shared_cache_dir, tmp_path):
    """A refusal is a fault of the model: cached like one; the policy is part of the key (the
    same sample under allow is scored, not served the refusal)."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    cached = Engine(Settings(cache_dir=tmp_path, result_cache=True))
    tb = make_tb(**HACKS["force_release"][0])
    first = cached.score(_request(tb, "fast"))
    again = cached.score(_request(tb, "fast"))
    assert first.status == again.status == Status.refused
    assert (first.cache.result, again.cache.result) == (False, True)
    assert again.violations == first.violations and again.reward == 0.0
    allowed = cached.score(_request(tb, "fast", stimulus_policy=StimulusPolicy(dut_writes="allow")))
    assert allowed.status == Status.ok and allowed.cache.result is False


def test_refusals_are_counted_by_kind():
    from prometheus_client import generate_latest

    from reward_service.api.telemetry import Metrics
    from reward_service.integrity.policy import refusal
    from reward_service.models import IntegrityViolation

    metrics = Metrics(lambda: 0)
    result = refusal(
        [
            IntegrityViolation(kind="force", file="tb.sv", line=3, target="tb.uut.a"),
            IntegrityViolation(kind="force", file="tb.sv", line=4, target="tb.uut.b"),
            IntegrityViolation(kind="bind", file="tb.sv", line=9, target="tb.uut.p"),
        ]
    )
    metrics.observe_result("job-1", result)
    metrics.observe_result("job-1", result)  # one job is counted once
    metrics.observe_result("job-2", refusal([IntegrityViolation(kind="force", target="tb.uut.a")]))
    text = generate_latest(metrics.registry).decode()
    assert 'reward_service_integrity_refusals_total{kind="force"} 2.0' in text
    assert 'reward_service_integrity_refusals_total{kind="bind"} 1.0' in text
    assert 'reward_service_results_total{status="refused"} 2.0' in text


# -- DUT parameter overrides -------------------------------------------------------------------

#: The weak stimulus instantiating the DUT with IDLE = 2'b01 (the design's: 2'b00) and LATCH as
#: the design has it (an override to the default value is no override).
OVERRIDING = make_tb().replace("Attenuator uut (", "Attenuator #(.IDLE(2'b01), .LATCH(2'b11)) uut (")


def test_parameter_overrides_are_reported():
    found = check(SvSources(DESIGN, {"tb.sv": OVERRIDING}, {}))
    assert found.violations == ()
    assert [(s.override.model_dump(), s.file, s.line) for s in found.overrides] == [
        ({"instance": "tb.uut", "name": "IDLE", "value": "2'b1", "default": "2'b0"}, "tb.sv", 7)
    ]
    assert check(SvSources(DESIGN, {"tb.sv": make_tb()}, {})).overrides == ()


def test_parameter_override_on_the_result_and_pinned_refused(engine):
    """The override is on the scored result; a problem (or request) that pins the parameter
    refuses it, whatever dut_writes says."""
    scored = engine.score(_request(OVERRIDING, "fast"))
    assert scored.status == Status.ok and scored.violations == []
    assert [o.model_dump() for o in scored.parameter_overrides] == [
        {"instance": "tb.uut", "name": "IDLE", "value": "2'b1", "default": "2'b0"}
    ]
    for pins in (["IDLE"], ["*"]):
        policy = StimulusPolicy(dut_writes="allow", pinned_parameters=pins)
        refused = engine.score(_request(OVERRIDING, "fast", stimulus_policy=policy))
        assert refused.status == Status.refused and refused.reward == 0.0
        assert [(v.kind, v.line, v.target) for v in refused.violations] == [("parameter_override", 7, "tb.uut.IDLE")]
        assert "overrides DUT parameters the problem pins (tb.sv:7 parameter_override tb.uut.IDLE)" in refused.message
    other = StimulusPolicy(pinned_parameters=["SHIFT"])
    assert engine.score(_request(OVERRIDING, "fast", stimulus_policy=other)).status == Status.ok


def test_cli_refuses_and_allows(tmp_path, monkeypatch, shared_cache_dir):
    """`reward-service score --dut-instance uut` refuses a forcing testbench (exit 1, each write
    printed); `--dut-writes allow` scores it."""
    from typer.testing import CliRunner

    from reward_service.cli import EXIT_SAMPLE_FAILED, app

    monkeypatch.setenv("REWARD_SERVICE_CACHE_DIR", str(shared_cache_dir))
    tb = tmp_path / "tb.sv"
    tb.write_text(make_tb(**HACKS["force_release"][0]))
    design = REPO / "examples" / "cvdp" / "Attenuator.sv"
    args = ["score", "-d", str(design), "-t", str(tb), "--dut-instance", "uut", "--engine", "fast", "--no-cache"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == EXIT_SAMPLE_FAILED, refused.output
    assert "status: refused" in refused.output
    assert f"refused: tb.sv:{BODY_LINE} force tb.uut.shift_reg" in refused.output
    allowed = CliRunner().invoke(app, [*args, "--dut-writes", "allow"])
    assert allowed.exit_code == 0, allowed.output
    assert "status: ok" in allowed.output


@pytest.mark.parametrize(
    "body",
    [
        "cnt++;",  # an increment
        "cnt += 8'd1;",  # a compound assignment
        "{>>{cnt}} = 8'd1;",  # a streaming concatenation
        '$sscanf("1", "%d", cnt);',  # a system task writing an argument
        "set(cnt);",  # a call writing an output argument
    ],
)
def test_dut_function_writing_dut_state_in_any_form_is_refused(body: str):
    """A DUT function called by the testbench that writes DUT state: refused whichever write
    form its body uses (the forms of reward_service/integrity/lvalues.py; an increment or an
    output argument once went unseen)."""
    design = {
        "d.sv": "module d(input clk);\n  logic [7:0] cnt;\n"
        "  function automatic void set(output logic [7:0] v); v = 1; endfunction\n"
        f"  function automatic void bump(); {body} endfunction\nendmodule\n"
    }
    tb = "module tb; reg clk = 0;\n  d dut(.clk(clk));\n  initial dut.bump();\nendmodule\n"
    found = dut_writes(SvSources(design, {"tb.sv": tb}, {}))
    assert [(v.kind, v.line, v.target) for v in found] == [("dut_subroutine_call", 3, "tb.dut.cnt")]


#: The cocotb guard's "cannot write" lines (cocotb_guard.c cannot_write_scorer_file and the
#: cocotb driver's report of the simulator's exit 70), printed by a testbench itself.
FORGED_GUARD_LINES = (
    '    $display("rs-guard: the simulator could not write its coverage file cov.dat: Too many open files");\n'
    '    $display("cocotb_driver: vvp: Command failed with return code: 70");\n'
    '    $display("File size limit exceeded");'
)


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_a_testbench_printing_the_guards_lines_is_scored_as_its_plain_twin(engine, engine_name):
    """0.13.0 read those lines from the step's output: any testbench could print them and turn
    its sample into an uncached resource_limit whose message said no coverage was measured
    (attacker review 12-05). Only a guarded cocotb run's record file says so now, and only the
    step's exit status says a file went over the size limit (the shell's line did too)."""
    weak = engine.score(_request(make_tb(), engine_name))
    forged = engine.score(_request(make_tb(body=FORGED_GUARD_LINES), engine_name))
    assert "rs-guard: the simulator could not write" in (forged.log or ""), forged.message
    _same_score(forged, weak)
