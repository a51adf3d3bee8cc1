"""Red team: a cocotb test forging the files the scorer reads after the run (docs/integrity-cocotb.md).

A cocotb test runs inside the simulator process: whatever Python can reach, it can write. The
fast path's flag file (``rs_fastcov.txt``), Verilator's ``coverage.dat`` and the compiled model
holding the run's token are the scorer's; the guard (``integrity/cocotb_guard.c``) refuses the
test every open, rename, link, truncate and write of them, while the simulator's own writes
(stdio inside libc, Verilator's ofstream) go through. Each attack catches its own errors, as a
policy would, so a refused attack leaves an honest-looking run that must score exactly as the
weak stimulus does; before the guard refused them each raised the reward.
"""

from __future__ import annotations

import pytest
from test_integrity_cocotb import HACK, WEAK_21, describe, request

#: Rewrites a scorer file with every point covered: flag lines with every bit set (fast path),
#: coverage.dat records with every count 1 (Verilator). True when it wrote something.
FORGE = """    import atexit, os, re, threading, time
    def forge(name):
        try:
            with open(name) as f:
                text = f.read()
        except OSError:
            return False
        out = []
        for line in text.splitlines():
            w = line.split()
            if len(w) == 10 and w[1] == "T":
                w[8], w[9] = "1" * len(w[8]), "1" * len(w[9])
                line = " ".join(w)
            elif len(w) == 7 and w[1] == "F":
                w[5] = "1" * len(w[5])
                line = " ".join(w)
            elif line.startswith("C "):
                line = re.sub(r" 0$", " 1", line)
            out.append(line)
        try:
            with open(name, "w") as f:
                f.write("\\n".join(out) + "\\n")
        except OSError:
            return False
        return bool(out)
    FLAGS, COV = "rs_fast" + "cov.txt", "cover" + "age.dat"
"""

#: name -> lines put at HACK (after FORGE): each gets a forged file past the simulator's write.
ATTACKS = {
    # Python's exit handlers run after the final blocks and after Verilator's coverage write
    "atexit": "    atexit.register(lambda: [forge(FLAGS), forge(COV)])\n",
    # a thread rewrites the files whenever they change, up to the process's end
    "thread": """    def watch():
        while True:
            forge(FLAGS); forge(COV); time.sleep(0.0005)
    threading.Thread(target=watch, daemon=True).start()
""",
    # the file under another name: a link made now points at what the simulator writes later
    "symlink": """    open("x", "w").close()
    for name in (FLAGS, COV):
        try:
            os.symlink("x", name)
        except OSError:
            pass
    atexit.register(lambda: [forge("x")])
""",
    # a file written now, renamed over the scorer's at exit
    "rename": """    def swap():
        for name in (FLAGS, COV):
            try:
                os.link(name, "y")
                forge("y")
                os.replace("y", name)
            except OSError:
                pass
    atexit.register(swap)
""",
    # the descriptor the simulator itself opened, found in /proc/self/fd
    "proc_fd": """    def grab():
        while True:
            for fd in os.listdir("/pr" + "oc/se" + "lf/fd"):
                try:
                    if os.readlink("/pr" + "oc/se" + "lf/fd/" + fd).endswith((FLAGS, COV)):
                        n = int(fd)
                        os.ftruncate(n, 0)
                        os.write(n, b"")
                except OSError:
                    pass
            time.sleep(0.0002)
    threading.Thread(target=grab, daemon=True).start()
""",
}


@pytest.fixture(scope="module")
def weak(engine):
    return {e: engine.score(request(WEAK_21, e)) for e in ("fast", "verilator")}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_a_test_cannot_rewrite_the_scorers_files(engine, weak, which: str, attack: str) -> None:
    honest = weak[which]
    assert honest.status.value == "ok" and honest.reward is not None, describe(honest)
    r = engine.score(request(WEAK_21.replace(HACK, FORGE + ATTACKS[attack]), which))
    # the refused attack leaves the weak run: the same points, the same reward
    assert r.status.value == "ok", describe(r)
    assert r.engine == honest.engine and r.reward == honest.reward, describe(r)
    assert {m: (c.covered, c.total) for m, c in r.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in honest.coverage.metrics.items()
    }, describe(r)


def test_the_token_cannot_be_read_from_the_model(engine, weak) -> None:
    """The run's copy of sim.vvp holds the token in its format strings: the test may not open it."""
    probe = """    try:
        open("/mo" + "del/sim" + ".v" + "vp", "rb").read(1)
        assert False, "the model was readable"
    except PermissionError:
        pass
"""
    r = engine.score(request(WEAK_21.replace(HACK, probe), "fast"))
    assert r.status.value == "ok" and r.reward == weak["fast"].reward, describe(r)


#: A one-module design for the flag reader: its module line and the element line of `q`.
COUNTER = {"c.v": "module c(input clk, output reg [1:0] q); always @(posedge clk) q <= q + 1; endmodule\n"}


def _flag_lines(token: str) -> tuple[str, str]:
    from reward_service.fastcov.instrument import instrument

    table = instrument(COUNTER, toplevel="c").tables["c"]
    index = next(i for i, s in enumerate(table.toggles) if s.name == "q")
    flags = "1" * (len(table.points) + 1)
    return f"{token} F c c - {flags} {'1' * table.n_scopes}", f"{token} T c {index} - c 1 0 01 00"


def test_the_flag_reader_counts_each_line_once() -> None:
    """A line of the run's token written twice (the design's final blocks write each once) is
    not the design's: the file is refused (the sample's 0), never counted twice or OR-ed."""
    from reward_service.fastcov.instrument import instrument
    from reward_service.fastcov.results import read_points

    inst = instrument(COUNTER, toplevel="c")
    module_line, toggle_line = _flag_lines("tok")
    points = read_points(f"{module_line}\n{toggle_line}\n", "tok", inst)
    toggles = {p.detail: p.count for p in points if p.metric == "toggle"}
    assert toggles == {"q[0]:0->1": 1, "q[0]:1->0": 0, "q[1]:0->1": 0, "q[1]:1->0": 0}
    forged = toggle_line.replace(" 01 00", " 11 11")
    for text in (f"{forged}\n{module_line}\n{toggle_line}\n", f"{module_line}\n{module_line}\n{toggle_line}\n"):
        with pytest.raises(ValueError, match="repeats"):
            read_points(text, "tok", inst)
    # another token's lines (an earlier run's, a forged file's) are not this run's
    assert read_points(f"{module_line}\n{toggle_line}\n{forged.replace('tok', 'old')}\n", "tok", inst) == points


def test_a_respelled_flag_line_is_a_repeat() -> None:
    """`02` is index 2 and `c.__rs_zz` the instance `c` to the reader: such a line beside the
    design's own is a repeat (red team 12-04: respelled indices slipped past a text compare)."""
    from reward_service.fastcov.instrument import instrument
    from reward_service.fastcov.results import read_points

    inst = instrument(COUNTER, toplevel="c")
    module_line, toggle_line = _flag_lines("tok")
    words = toggle_line.split()
    for respelled in (f"0{words[3]}", f"+{words[3]}"):
        line = " ".join([*words[:3], respelled, *words[4:]])
        with pytest.raises(ValueError, match="repeats"):
            read_points(f"{module_line}\n{toggle_line}\n{line}\n", "tok", inst)
    scoped = " ".join([*words[:5], "c.__rs_zz", *words[6:]])
    with pytest.raises(ValueError, match="repeats"):
        read_points(f"{module_line}\n{toggle_line}\n{scoped}\n", "tok", inst)


#: The test takes write permission from its work directory, after making a directory under the
#: coverage file's name (Verilator's) and the flag file's (the fast path's).
READ_ONLY_WORK_DIR = """    import os
    for name in ("cover" + "age.dat", "rs_fast" + "cov.txt"):
        os.mkdir(name)
    os.chmod(".", 0o500)
"""


@pytest.mark.parametrize("which", ["fast", "verilator"])
def test_a_read_only_work_dir_is_the_tests_failure_not_a_hung_worker(engine, which: str) -> None:
    """Before, Verilator could not open coverage.dat, VL_FATAL'd inside its coverage write and
    deadlocked on the write's own mutex: the sample held its worker until the 510 s wall-clock
    backstop (status timeout). The guard gives the directory back to the simulator at its
    scorer-file open; cocotb's results.xml (the test's own file) cannot be written: no test ran."""
    r = engine.score(request(WEAK_21.replace(HACK, READ_ONLY_WORK_DIR), which))
    assert r.status.value == "runtime_error" and r.engine == which, describe(r)
    assert "results.xml" in r.message and "Permission denied" in r.message, describe(r)
    assert r.reward == 0.0
