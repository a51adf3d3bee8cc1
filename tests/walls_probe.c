/* Tries each system call the step's seccomp filter refuses (reward_service/sandbox/seccomp.py)
   and prints one line "<name> <errno name or OK>"; then that threads and fork still work.
   Compiled and run inside a step by tests/test_step_walls.py and tests/test_compose_stack.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char* name, long rc) {
    const char* what = rc == -1 ? (errno == EPERM ? "EPERM" : errno == ENOSYS ? "ENOSYS" : strerror(errno)) : "OK";
    printf("%s %s\n", name, what);
}

static void* thread_main(void* arg) { return arg; }

int main(void) {
    report("unshare_user", syscall(SYS_unshare, CLONE_NEWUSER));
    report("unshare_net", syscall(SYS_unshare, CLONE_NEWNET));
    report("unshare_mount", syscall(SYS_unshare, CLONE_NEWNS));
    report("clone_newpid", syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0));
    report("setns", syscall(SYS_setns, 0, 0));
    report("ptrace", syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0));
    report("process_vm_readv", syscall(SYS_process_vm_readv, 1, 0, 0, 0, 0, 0));
    report("bpf", syscall(SYS_bpf, 0, 0, 0));
    report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
    report("add_key", syscall(SYS_add_key, "user", "k", "v", 1, 0));
    report("request_key", syscall(SYS_request_key, "user", "k", 0, 0));
    report("perf_event_open", syscall(SYS_perf_event_open, 0, 0, -1, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    report("mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, 0));
    report("umount2", syscall(SYS_umount2, "/tmp", 0));
    report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
    report("open_tree", syscall(428 /* open_tree */, -100, "/tmp", 0));
    report("fsopen", syscall(430 /* fsopen */, "tmpfs", 0));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, 0, 0));
    report("init_module", syscall(SYS_init_module, 0, 0, ""));
    report("finit_module", syscall(SYS_finit_module, -1, "", 0));
    report("iopl", syscall(SYS_iopl, 3));
    report("ioperm", syscall(SYS_ioperm, 0, 1, 1));
    report("acct", syscall(SYS_acct, 0));
    report("swapon", syscall(SYS_swapon, "/tmp/x", 0));
    report("reboot", syscall(SYS_reboot, 0, 0, 0, 0));
    report("io_uring_setup", syscall(425 /* io_uring_setup */, 1, 0));
    report("personality_addr_no_randomize", syscall(SYS_personality, 0x0040000));
    report("clone3", syscall(435 /* clone3 */, 0, 0));
    /* what must keep working: threads (glibc falls back from clone3 to clone), fork, exec */
    pthread_t t;
    report("pthread_create", pthread_create(&t, 0, thread_main, 0) == 0 ? 0 : -1);
    pthread_join(t, 0);
    pid_t child = fork();
    if (child == 0) _exit(7);
    int status = 0;
    waitpid(child, &status, 0);
    report("fork", WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1);
    fflush(stdout);
    return 0;
}
