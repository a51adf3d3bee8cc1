"""The no-cgroup tree watcher's view of a real process tree (reward_service.sandbox.proctree)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from reward_service.sandbox import proctree

# A parent shell with three sleeping children and one Python holding 64 MiB it has touched.
_TREE = (
    "sleep 30 & sleep 30 & sleep 30 & "
    f'{sys.executable} -c \'import time; b = bytearray(64 << 20); b[::4096] = b"x" * len(b[::4096]); '
    'print("ready", flush=True); time.sleep(30)\' & wait'
)


@pytest.fixture
def tree():
    proc = subprocess.Popen(["/bin/sh", "-c", _TREE], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.1)  # the sleeps have exec'd
        yield proc.pid
    finally:
        proc.kill()
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=False)
        proc.wait()


@pytest.mark.parametrize("children_files", [True, False])
def test_both_walks_see_the_same_tree(tree, monkeypatch, children_files):
    if children_files and not proctree._have_children_files():
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
    monkeypatch.setattr(proctree, "_have_children_files", lambda: children_files)
    sample = proctree.sample_tree(tree)
    assert sample.tasks == 4  # three sleeps and the single-threaded Python (the root not counted)
    assert 64 << 20 <= sample.rss_bytes < 128 << 20


def test_a_tree_without_descendants_is_empty():
    proc = subprocess.Popen(["sleep", "5"])
    try:
        assert proctree.sample_tree(proc.pid) == proctree.TreeSample(0, 0)
    finally:
        proc.kill()
        proc.wait()
