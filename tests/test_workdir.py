"""scoring.workdir: per-sample work dirs are removed off the scoring thread, completely, in a
forked child too, and by the caller once too many wait."""

from __future__ import annotations

import os
from pathlib import Path

from reward_service.scoring import workdir


def _work_dir(root: Path, name: str) -> Path:
    d = root / name
    (d / "obj" / "status").mkdir(parents=True)
    (d / "src.sv").write_text("module m; endmodule\n")
    (d / "obj" / "status" / "build.rc").write_text("0\n")
    return d


def test_a_work_dir_handed_over_is_removed(tmp_path):
    dirs = [_work_dir(tmp_path, f"rs-{i}") for i in range(20)]
    for d in dirs:
        workdir.remove_later(d)
    assert workdir.drain(30)
    assert list(tmp_path.iterdir()) == []


def test_past_the_bound_the_caller_removes_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir, "MAX_PENDING", 0)
    d = _work_dir(tmp_path, "rs-now")
    workdir.remove_later(d)
    assert not d.exists()  # no drain: removed before remove_later returned


def test_a_forked_child_removes_its_own_dirs(tmp_path):
    workdir.remove_later(_work_dir(tmp_path, "rs-parent"))  # the parent's thread exists now
    assert workdir.drain(30)
    child_dir = _work_dir(tmp_path, "rs-child")
    pid = os.fork()
    if pid == 0:  # the child: a new thread, nothing pending of the parent's
        try:
            workdir.remove_later(child_dir)
            ok = workdir.drain(30)
            os._exit(0 if ok and not child_dir.exists() else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert list(tmp_path.iterdir()) == []
