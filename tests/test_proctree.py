"""The no-cgroup tree watcher's view of a real process tree (reward_service.sandbox.proctree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from reward_service.sandbox import proctree
from reward_service.sandbox.base import ExecSpec
from reward_service.sandbox.bwrap import BwrapSandbox

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


def test_a_lost_proc_descriptor_is_opened_again_not_read_as_an_empty_tree(tree):
    """The watcher reads /proc through one held descriptor; closed under it (something of the
    process closing descriptors), every read failed as if the process had ended: an empty
    tree, the step's limits unenforced. It is opened again; and again after a fork."""
    if not proctree._have_children_files():
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
    assert proctree.sample_tree(tree).tasks == 4
    os.close(proctree._proc_fd())
    sample = proctree.sample_tree(tree)
    assert sample.tasks == 4 and sample.rss_bytes >= 64 << 20
    child = os.fork()
    if child == 0:  # a forked pool process: its own descriptor, the same tree
        os._exit(0 if proctree.sample_tree(tree).tasks == 4 else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_tree_without_descendants_is_empty():
    proc = subprocess.Popen(["sleep", "5"])
    try:
        assert proctree.sample_tree(proc.pid) == proctree.TreeSample(0, 0)
    finally:
        proc.kill()
        proc.wait()


def test_a_pid_listed_twice_in_one_walk_is_counted_once(tree, monkeypatch):
    # Two children files read at different moments can both list one pid (a reused pid, or a
    # child seen under its exiting parent and again under the reaper): one process, one count.
    if not proctree._have_children_files():
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
    real = proctree._children
    monkeypatch.setattr(proctree, "_children", lambda pid, *rest: real(pid, *rest) * 2)
    sample = proctree.sample_tree(tree)
    assert sample.tasks == 4
    assert 64 << 20 <= sample.rss_bytes < 128 << 20


# main() returns through pthread_exit while a second thread touches argv[1] MiB and sleeps: the
# leader is then a zombie whose /proc/<pid>/stat shows 0 resident pages, the memory is the thread's.
_LEADER_EXITS = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void *hold(void *arg) {
    size_t n = (size_t)atol((const char *)arg) << 20;
    char *p = malloc(n);
    if (p == NULL) { perror("malloc"); exit(1); }
    for (size_t i = 0; i < n; i += 4096) ((volatile char *)p)[i] = 1;  /* volatile: not elided */
    printf("ready\n"); fflush(stdout);
    sleep(30);
    return NULL;
}
int main(int argc, char **argv) {
    pthread_t t;
    if (pthread_create(&t, NULL, hold, argc > 1 ? argv[1] : "100") != 0) return 1;
    pthread_exit(NULL);
}
"""


@pytest.fixture(scope="module")
def leader_exits(tmp_path_factory):
    """A compiled program whose main thread exits while a second one holds the memory."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path_factory.mktemp("leader") / "leader.c"
    src.write_text(_LEADER_EXITS)
    subprocess.run([cc, "-O1", "-pthread", "-o", str(src.with_suffix("")), str(src)], check=True)
    return src.with_suffix("")


@pytest.mark.parametrize("children_files", [True, False])
def test_memory_of_a_process_whose_main_thread_exited_is_counted(leader_exits, monkeypatch, children_files):
    if children_files and not proctree._have_children_files():
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
    monkeypatch.setattr(proctree, "_have_children_files", lambda: children_files)
    proc = subprocess.Popen(["/bin/sh", "-c", f"{leader_exits} 100 & wait"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        sample = proctree.sample_tree(proc.pid)
        # The zombie leader and its live thread; before the fix rss_bytes was 0 here.
        assert sample.tasks == 2
        assert 100 << 20 <= sample.rss_bytes < 160 << 20, sample
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
        proc.kill()
        proc.wait()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_a_step_whose_main_thread_exited_is_held_to_its_memory_limit(leader_exits, tmp_path):
    # Without a cgroup the tree watcher is the memory limit: 200 MiB held by a thread of an
    # exited leader ran to its time limit under memory_mb=64 before the fix (RLIMIT_AS of
    # 1088 MiB lets it allocate).
    shutil.copy(leader_exits, tmp_path / "leader")
    result = BwrapSandbox(use_cgroups=False).run(
        ExecSpec(argv=["/work/leader", "200"], workdir=tmp_path, memory_mb=64, timeout_s=10)
    )
    assert result.oom and not result.timed_out, (result, result.output)
    assert result.duration_ms < 5_000
