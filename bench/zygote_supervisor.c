/* bench/bench_zygote.py --mode c: the persistent sandbox's supervisor (a prototype for the
   measurement). Reads length-prefixed requests (NUL-separated: work dir, /tmp KiB, cwd, argc,
   argv..., envc, env...) on stdin; per request forks a child that makes new mount, pid and IPC
   namespaces, binds the work dir at /work, mounts /tmp, an empty /proc and a cover over /pool,
   drops capabilities, installs the seccomp filter (argv[1]) and Landlock's TCP refusal and
   scopes, and execs; replies "<status> <bytes>\n" and the output (its first 64 KiB wrap). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/capability.h>
static struct sock_fprog prog;
static int readall(int fd, void *b, size_t n) { size_t g = 0; while (g < n) { ssize_t r = read(fd, (char *)b + g, n - g); if (r <= 0) return -1; g += r; } return 0; }
#define CHK(x, what) do { if ((x) < 0) { perror(what); _exit(127); } } while (0)
int main(int argc, char **argv) {
  int f = open(argv[1], O_RDONLY); static char fb[1 << 16]; ssize_t fl = read(f, fb, sizeof fb); close(f);
  prog.len = fl / 8; prog.filter = (struct sock_filter *)fb;
  for (;;) {
    uint32_t len; if (readall(0, &len, 4) < 0) return 0;
    char *buf = malloc(len); if (readall(0, buf, len) < 0) return 1;
    char *fields[4096]; int nf = 0; for (char *p = buf; p < buf + len && nf < 4096; p += strlen(p) + 1) fields[nf++] = p;
    char *dir = fields[0], *tmp = fields[1], *cwd = fields[2]; int na = atoi(fields[3]);
    char **av = calloc(na + 1, sizeof *av); for (int i = 0; i < na; i++) av[i] = fields[4 + i];
    int ne = atoi(fields[4 + na]); char **ev = calloc(ne + 1, sizeof *ev); for (int i = 0; i < ne; i++) ev[i] = fields[5 + na + i];
    int p[2]; pipe(p);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]); setsid(); dup2(p[1], 1); dup2(p[1], 2); close(p[1]);
      CHK(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC), "unshare");
      pid_t g = fork();
      if (g) { int st; waitpid(g, &st, 0); _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)); }
      CHK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "private");
      CHK(mount(dir, "/work", NULL, MS_BIND | MS_REC, NULL), "work");
      char opt[64]; snprintf(opt, sizeof opt, "size=%sk", tmp);
      CHK(mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opt), "tmp");
      CHK(mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k"), "proc");
      CHK(mount("tmpfs", "/pool", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k"), "pool");
      for (int c = 0; c < 64; c++) if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) break;
      prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
      struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0}; struct __user_cap_data_struct d[2] = {{0}};
      CHK(syscall(SYS_capset, &h, d), "capset");
      CHK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "nnp");
      CHK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "seccomp");
      uint64_t attr[3] = {0, 3, 3};
      int rs = syscall(444, attr, sizeof attr, 0); CHK(rs, "landlock"); CHK(syscall(446, rs, 0), "restrict"); close(rs);
      CHK(chdir(cwd), "chdir");
      execve(av[0], av, ev); perror("execve"); _exit(127);
    }
    close(p[1]);
    static char ob[65536]; size_t n = 0; ssize_t r;
    while ((r = read(p[0], ob + n, sizeof ob - n)) > 0) { n += r; if (n == sizeof ob) n = 0; }
    close(p[0]);
    int st; waitpid(pid, &st, 0);
    printf("%d %zu\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st), n);
    fwrite(ob, 1, n, stdout); fflush(stdout);
    free(buf); free(av); free(ev);
  }
}
