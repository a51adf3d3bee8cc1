/* The cocotb write guard: refuses writes to DUT handles that are not top-level ports of the
 * toplevel, below the reach of the cocotb test (docs/integrity-cocotb.md).
 *
 * Loaded with LD_PRELOAD into the simulator process of a cocotb test step (vvp, or the
 * Verilator model binary), for cocotb 2.1 and 1.9 alike. Every write cocotb makes (a `.value`
 * assignment, `<=`, `setimmediatevalue`, Deposit/Force/Freeze/Release, the C++ Clock's
 * toggles) goes from cocotb's Python extension to one of libgpi's four
 * gpi_set_signal_value_* entry points. The extension and libgpi are shared libraries, so the
 * extension's calls resolve through the global symbol scope, where a preloaded library comes
 * before libgpi: these definitions run instead, and call libgpi's only for allowed writes.
 * (vpi_put_value itself cannot be interposed: vvp and Verilator's model define it in the
 * executable, which comes first in the lookup.)
 *
 * A refused write never reaches the simulator: its record (JSON, one line) goes to the record
 * file and to stderr (the step's output, which the test cannot take back), then the process
 * ends at once (_exit). The engine refuses the sample on either record; a run whose records
 * were both suppressed still has no results.xml and fails.
 *
 * Environment (read once, before any Python runs): RS_GUARD_TOP (the toplevel's name),
 * RS_GUARD_PORTS (the names of its ports a test drives, comma-separated), RS_GUARD_OUTPUTS
 * (its output ports' names: writes dropped), RS_GUARD_FILE (the record file). Without
 * RS_GUARD_TOP the library does nothing but pass calls on.
 *
 * Besides, it takes away what in-process code could use to go around libgpi: ctypes and cffi
 * (their extension modules' init symbols are not found, so `import ctypes` fails), native
 * code from writable or kernel-made places (dlopen of a path that does not resolve, or resolves
 * under /work, /tmp, /dev, /proc, ..., is refused), extensions that reach raw memory, the
 * process's own memory through /proc/<pid>/mem (open refused), and other processes' access to
 * it (PR_SET_DUMPABLE 0), and processes: an armed simulator forks, spawns and execs nothing
 * (EPERM), so no process of the test outlives the simulator's coverage write to rewrite it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define GUARD_EXIT 86
#define CANNOT_WRITE_EXIT 70 /* EX_SOFTWARE: a scorer file could not be written */
#define VPI_TYPE 1       /* vpiType */
#define VPI_FULL_NAME 3  /* vpiFullName */
#define VPI_NET 36       /* vpiNet */
#define PROC_MAGIC 0x9fa0

/* Everything the check reads, on pages of their own that are made read-only once armed: a test
 * with a raw memory write in its own process (numpy arrays over an address) could otherwise add
 * names to the port list or disarm the guard. */
static struct {
    int armed;
    int record_fd;
    int log_fd;
    char top[512];
    char ports[16384];   /* ",a,b,c,": the ports a test drives (inputs, inouts) */
    char outputs[16384]; /* the output ports: DUT state, their writes dropped */
    char cwd[4096];      /* the step's working directory when the simulator started (/work) */
} __attribute__((aligned(4096))) st = {0, -1, -1, {0}, {0}, {0}, {0}};
#define armed st.armed
#define record_fd st.record_fd
#define log_fd st.log_fd
#define top st.top
#define ports st.ports
#define outputs st.outputs

/* The scorer's files the simulator itself created (see fopen64 below): read-only but while the
 * guard notes a new one, so a raw memory write cannot make a file the test planted count as one. */
#define MADE_SLOTS 8
static struct {
    int n;
    struct {
        char name[64];
        dev_t dev;
        ino_t ino;
    } files[MADE_SLOTS];
} __attribute__((aligned(4096))) made;

typedef void (*set_int_t)(void *, int32_t, int);
typedef void (*set_real_t)(void *, double, int);
typedef void (*set_str_t)(void *, const char *, int);
typedef char *(*vpi_get_str_t)(int, void *);
typedef int (*vpi_get_t)(int, void *);
typedef void *(*dlsym_t)(void *, const char *);
typedef void *(*dlopen_t)(const char *, int);
typedef int (*open_t)(const char *, int, ...);
typedef int (*openat_t)(int, const char *, int, ...);

static dlsym_t real_dlsym(void) {
    static dlsym_t fn;
    if (!fn) fn = (dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!fn) fn = (dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return fn;
}

static void *next_fn(const char *name) {
    dlsym_t fn = real_dlsym();
    return fn ? fn(RTLD_NEXT, name) : NULL;
}

static void write_all(int fd, const char *buf, size_t len) {
    while (fd >= 0 && len > 0) {
        /* the system call itself: the write wrapper below refuses the (protected) record file */
        ssize_t n = syscall(SYS_write, fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

/* Both records: the file and the saved stderr. */
static void record(const char *line) {
    size_t len = strlen(line);
    write_all(record_fd, line, len);
    write_all(log_fd, line, len);
}

static void json_str(char *out, size_t cap, const char *s) {
    size_t o = 0;
    for (; s && *s && o + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = 0;
}

__attribute__((constructor)) static void guard_init(void) {
    const char *t = getenv("RS_GUARD_TOP");
    const char *p = getenv("RS_GUARD_PORTS");
    const char *o = getenv("RS_GUARD_OUTPUTS");
    const char *f = getenv("RS_GUARD_FILE");
    if (!t || !*t || strlen(t) >= sizeof top) return;
    snprintf(top, sizeof top, "%s", t);
    snprintf(ports, sizeof ports, ",%s,", p ? p : "");
    snprintf(outputs, sizeof outputs, ",%s,", o ? o : "");
    /* A saved copy of stderr: the test may redirect fd 2 (it can still close this one). */
    log_fd = fcntl(2, F_DUPFD_CLOEXEC, 900);
    if (!getcwd(st.cwd, sizeof st.cwd)) st.cwd[0] = 0;
    mprotect(&made, sizeof made, PROT_READ);
    if (f && *f) record_fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    armed = 1;
    if (mprotect(&st, sizeof st, PROT_READ) != 0) {
        /* an unprotected guard is no guard: the engine sees no "armed" record (sandbox_error) */
        armed = 0;
        return;
    }
    char line[700], esc[600];
    json_str(esc, sizeof esc, top);
    snprintf(line, sizeof line, "RS_COCOTB_GUARD {\"event\": \"armed\", \"top\": \"%s\", \"pid\": %d}\n", esc,
             (int)getpid());
    record(line);
}

/* The VPI handle behind a GPI handle: GpiHdl is {vtable, GpiImplInterface *m_impl, void
 * *m_obj_hdl} in cocotb 1.9 and 2.1 (gpi_priv.h); both our simulators' GPI layers are VPI. */
static const char *full_name(void *gpi_hdl) {
    static vpi_get_str_t get_str;
    if (!get_str) get_str = (vpi_get_str_t)real_dlsym()(RTLD_DEFAULT, "vpi_get_str");
    if (!get_str || !gpi_hdl) return NULL;
    void *vpi_hdl = ((void **)gpi_hdl)[2];
    return vpi_hdl ? get_str(VPI_FULL_NAME, vpi_hdl) : NULL;
}

/* A top-level port, or a part of one: "<top>.<port>", "<top>.<port>[i]" (an element of an
 * unpacked array port), "<top>.<port>.<member>" (of a struct or interface port); <port> one of
 * `list` (",a,b,"). Nothing else can be named under a port's name. Verilator names the ports
 * "TOP.<port>" (its wrapper's scope, where cocotb finds them) and "TOP.<top>.<port>". */
static int is_port(const char *name, const char *list) {
    if (!name) return 0;
    size_t tl = strlen(top);
    const char *port = NULL;
    if (strncmp(name, top, tl) == 0 && name[tl] == '.') {
        port = name + tl + 1;
    } else if (strncmp(name, "TOP.", 4) == 0) {
        const char *inner = name + 4;
        port = strncmp(inner, top, tl) == 0 && inner[tl] == '.' ? inner + tl + 1 : inner;
    }
    if (!port) return 0;
    size_t len = strcspn(port, "[.");
    if (len == 0 || len > 500) return 0;
    char key[504];
    snprintf(key, sizeof key, ",%.*s,", (int)len, port);
    return strstr(list, key) != NULL;
}

/* Where the test asked for the write: rs_cocotb_guard.locate(target) in the simulator's Python
 * (it keeps the test's frame of each write it saw scheduled). Best effort: the record is
 * written before this runs, and a failure leaves only the location out. */
static void locate(const char *target, char *where, size_t cap) {
    where[0] = 0;
    dlsym_t sym = real_dlsym();
    int (*ensure)(void) = (int (*)(void))sym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))sym(RTLD_DEFAULT, "PyGILState_Release");
    void *(*import)(const char *) = (void *(*)(const char *))sym(RTLD_DEFAULT, "PyImport_ImportModule");
    void *(*call_method)(void *, const char *, const char *, ...) =
        (void *(*)(void *, const char *, const char *, ...))sym(RTLD_DEFAULT, "PyObject_CallMethod");
    const char *(*as_utf8)(void *) = (const char *(*)(void *))sym(RTLD_DEFAULT, "PyUnicode_AsUTF8");
    void (*err_clear)(void) = (void (*)(void))sym(RTLD_DEFAULT, "PyErr_Clear");
    void (*decref)(void *) = (void (*)(void *))sym(RTLD_DEFAULT, "Py_DecRef");
    if (!ensure || !release || !import || !call_method || !as_utf8 || !err_clear || !decref) return;
    int state = ensure();
    void *module = import("rs_cocotb_guard");
    if (module) {
        void *res = call_method(module, "locate", "s", target);
        if (res) {
            const char *s = as_utf8(res);
            if (s) snprintf(where, cap, "%s", s);
            decref(res);
        }
        decref(module);
    }
    err_clear();
    release(state);
}

static const char *action_name(int action) {
    switch (action) {
        case 0: return "deposit";
        case 1: return "force";
        case 2: return "release";
        case 3: return "deposit_no_delay";
        default: return "write";
    }
}

static void refuse(void *hdl, int action) {
    const char *name = full_name(hdl);
    char target[1024], esc[2200], where[1200], wesc[2500], line[5200];
    snprintf(target, sizeof target, "%s", name ? name : "?");
    json_str(esc, sizeof esc, target);
    snprintf(line, sizeof line,
             "RS_COCOTB_GUARD {\"event\": \"refused\", \"target\": \"%s\", \"action\": \"%s\"}\n", esc,
             action_name(action));
    record(line);
    locate(target, where, sizeof where);
    if (where[0]) {
        json_str(wesc, sizeof wesc, where);
        snprintf(line, sizeof line,
                 "RS_COCOTB_GUARD {\"event\": \"where\", \"target\": \"%s\", \"where\": \"%s\"}\n", esc, wesc);
        record(line);
    }
    _exit(GUARD_EXIT);
}

/* cocotb 1.x test harnesses zero "every input" with `for s in dut: if s._type == "GPI_NET":
 * s.value = 0` (at the start, some after a reset too), which on 1.9 also writes the toplevel's
 * internal nets (on 2.x the loop does nothing). Such a write (a deposit of zero to a net, or of
 * zero to anything at time 0) is dropped rather than refused: it never takes effect, so it
 * cannot pay, and honest 1.x harnesses run as they do on cocotb 2.1. */
static int dropped_zero(void *hdl, int action, int is_zero) {
    static void (*sim_time)(uint32_t *, uint32_t *);
    static vpi_get_t get;
    if (!is_zero || (action != 0 && action != 3)) return 0;
    if (!get) get = (vpi_get_t)real_dlsym()(RTLD_DEFAULT, "vpi_get");
    if (get && hdl && ((void **)hdl)[2] && get(VPI_TYPE, ((void **)hdl)[2]) == VPI_NET) return 1;
    if (!sim_time) sim_time = (void (*)(uint32_t *, uint32_t *))real_dlsym()(RTLD_DEFAULT, "gpi_get_sim_time");
    if (!sim_time) return 0;
    uint32_t high = 1, low = 1;
    sim_time(&high, &low);
    return high == 0 && low == 0;
}

/* A dropped write's record (the first 50 of each kind: a note in the result). */
static void note_dropped(const char *event, const char *name, int *count) {
    if ((*count)++ >= 50) return;
    char esc[2200], line[2400];
    json_str(esc, sizeof esc, name ? name : "?");
    snprintf(line, sizeof line, "RS_COCOTB_GUARD {\"event\": \"%s\", \"target\": \"%s\"}\n", event, esc);
    write_all(record_fd, line, strlen(line));
}

/* Whether to pass the write on: a driven port; or nothing: an output port's (DUT state: a
 * deposit on an `output reg` held the test's value until the DUT's next assignment, and its
 * toggles paid; dropped, as engineers' tests initialise outputs), a zero that never takes
 * effect (dropped), anything else (refused: does not return). */
static int check(void *hdl, int action, int is_zero) {
    static int dropped, dropped_outputs;
    if (!armed) return 1;
    const char *name = full_name(hdl);
    if (is_port(name, ports)) return 1;
    if (is_port(name, outputs)) {
        note_dropped("dropped_output", name, &dropped_outputs);
        return 0;
    }
    if (dropped_zero(hdl, action, is_zero)) {
        note_dropped("dropped", name, &dropped);
        return 0;
    }
    refuse(hdl, action);
    return 0;
}

static int zero_str(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (*s != '0') return 0;
    return 1;
}

void gpi_set_signal_value_int(void *hdl, int32_t value, int action) {
    static set_int_t real;
    if (!check(hdl, action, value == 0)) return;
    if (!real) real = (set_int_t)next_fn("gpi_set_signal_value_int");
    real(hdl, value, action);
}

void gpi_set_signal_value_real(void *hdl, double value, int action) {
    static set_real_t real;
    if (!check(hdl, action, value == 0.0)) return;
    if (!real) real = (set_real_t)next_fn("gpi_set_signal_value_real");
    real(hdl, value, action);
}

void gpi_set_signal_value_binstr(void *hdl, const char *value, int action) {
    static set_str_t real;
    if (!check(hdl, action, zero_str(value))) return;
    if (!real) real = (set_str_t)next_fn("gpi_set_signal_value_binstr");
    real(hdl, value, action);
}

void gpi_set_signal_value_str(void *hdl, const char *value, int action) {
    static set_str_t real;
    if (!check(hdl, action, 0)) return;
    if (!real) real = (set_str_t)next_fn("gpi_set_signal_value_str");
    real(hdl, value, action);
}

/* --- what could go around libgpi ------------------------------------------------------- */

#pragma GCC diagnostic ignored "-Wnonnull-compare"
void *dlsym(void *handle, const char *name) {
    if (armed && name &&
        (strcmp(name, "PyInit__ctypes") == 0 || strcmp(name, "PyInit__cffi_backend") == 0 ||
         strncmp(name, "PyInit__xx", 10) == 0)) {
        return NULL;
    }
    dlsym_t fn = real_dlsym();
    return fn ? fn(handle, name) : NULL;
}

/* Native code only from a file of a read-only tree, named by its resolved path: not from a
 * place the test can write (the run dir, /tmp, /dev/shm, ...), nor from what the kernel makes
 * up under /proc and /dev: a copy of a refused extension in a memfd, or a deleted file, loads
 * through /proc/self/fd/<n> (whose link names no file: realpath fails), /proc/<pid>/map_files,
 * /proc/self/root/... (red team 12-05: _testcapi loaded from a memfd). A path that does not
 * resolve is refused too. */
static int untrusted_place(const char *resolved) {
    static const char *places[] = {"/work/", "/tmp/", "/dev/", "/proc/", "/sys/", "/var/tmp/", "/run/", "/var/run/",
                                   NULL};
    for (int i = 0; places[i]; i++)
        if (strncmp(resolved, places[i], strlen(places[i])) == 0) return 1;
    size_t cl = strlen(st.cwd); /* the step's working directory (the run dir) */
    return cl > 1 && strncmp(resolved, st.cwd, cl) == 0 && (resolved[cl] == '/' || resolved[cl] == 0);
}

/* A native extension the test could use to read or write the process's memory: any from an
 * installed package but cocotb's own (and pyyaml's parser, which cocotb-coverage loads): numpy
 * arrays over a raw address read the run's token from the heap (red team 12-04), pyarrow's
 * foreign_buffer does the same; the interpreter's own test modules (_testcapi,
 * _testinternalcapi, ...) and its _xx* and xx* modules (_xxsubinterpreters runs code in a
 * subinterpreter, which has none of this interpreter's audit hooks; the others are examples
 * and fuzz targets nothing needs). The standard library's other extensions stay. `resolved` is
 * a realpath (`cocotb/../numpy/...` names numpy). The Python half
 * (rs_cocotb_guard.refuse_native_extensions) gives the import a message first. */
static int raw_memory_extension(const char *resolved) {
    static const char *allowed[] = {"cocotb/", "pygpi/", "yaml/", "_yaml/", NULL};
    static const char *refused[] = {"_test", "_ctypes", "_xx", "xx", NULL};
    const char *sp = strstr(resolved, "/site-packages/");
    if (!sp) sp = strstr(resolved, "/dist-packages/");
    if (sp) {
        const char *pkg = sp + 15;
        for (int i = 0; allowed[i]; i++)
            if (strncmp(pkg, allowed[i], strlen(allowed[i])) == 0) return 0;
        return 1;
    }
    const char *base = strrchr(resolved, '/');
    base = base ? base + 1 : resolved;
    if (!strstr(resolved, "/lib-dynload/")) return 0;
    for (int i = 0; refused[i]; i++)
        if (strncmp(base, refused[i], strlen(refused[i])) == 0) return 1;
    return 0;
}

/* Whether dlopen(path) is refused in an armed process (path has a slash): the path is resolved
 * (into `resolved`, what is then loaded, so no symlink can be switched in between) and must name
 * a file of a trusted place that is no refused extension. */
static int refused_native(const char *path, char *resolved) {
    if (realpath(path, resolved) && !untrusted_place(resolved) && !raw_memory_extension(resolved)) return 0;
    char line[600];
    snprintf(line, sizeof line, "rs-guard: native code from %.400s refused\n", path);
    write_all(log_fd, line, strlen(line));
    errno = EACCES;
    return 1;
}

__attribute__((noinline)) static void *checked_dlopen(dlopen_t real, const char *path, int flags) {
    char resolved[4096];
    return refused_native(path, resolved) ? NULL : real(resolved, flags);
}

/* A bare name (no slash) is searched in the library path the loader fixed at start-up and in the
 * calling object's RUNPATH: that call must stay a tail call (no local of dlopen's own may have
 * its address taken), so that the loader sees the caller's return address, not the guard's
 * (cocotb 1.9 opens "libcocotb.so" by its RUNPATH). */
void *dlopen(const char *path, int flags) {
    static dlopen_t real;
    if (!real) real = (dlopen_t)next_fn("dlopen");
    if (!armed || !path || !strchr(path, '/')) return real(path, flags);
    return checked_dlopen(real, path, flags);
}

typedef void *(*dlmopen_t)(long, const char *, int);

__attribute__((noinline)) static void *checked_dlmopen(dlmopen_t real, long lmid, const char *path, int flags) {
    char resolved[4096];
    return refused_native(path, resolved) ? NULL : real(lmid, resolved, flags);
}

void *dlmopen(long lmid, const char *path, int flags) {
    static dlmopen_t real;
    if (!real) real = (dlmopen_t)next_fn("dlmopen");
    if (!armed || !path || !strchr(path, '/')) return real(lmid, path, flags);
    return checked_dlmopen(real, lmid, path, flags);
}

/* A /proc file that gives the process's addresses (where the guard's pages are): the layout a
 * raw memory write needs. */
static int address_map(const char *path) {
    static const char *ends[] = {"/maps", "/smaps", "/smaps_rollup", "/numa_maps", "/pagemap", "/map_files",
                                 "/syscall", "/auxv", "/stat", "/stack", NULL};
    size_t len = strlen(path);
    if (strncmp(path, "/proc/", 6) != 0 || strcmp(path, "/proc/stat") == 0) return 0;
    for (int i = 0; ends[i]; i++) {
        size_t el = strlen(ends[i]);
        if (len >= el && strcmp(path + len - el, ends[i]) == 0) return 1;
    }
    return 0;
}

/* A file the scorer reads after the run, or the compiled model that holds the run's token: the
 * fast path's flag file and a `.vvp` (its flag lines carry the token), Verilator's coverage.dat
 * and run-end file, the guard's own record file. The simulator writes them through stdio
 * (fopen, ofstream), whose opens stay inside libc and never reach the wrappers below; a test's
 * Python reaches them only through open/openat/rename/link/truncate, which these wrappers refuse
 * (red team: a test read the token from /model/sim.vvp and appended flag lines with every flag
 * set, reward 2.0; a thread could rewrite coverage.dat after the model wrote it). */
static int scorer_file(const char *path) {
    if (!path) return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    static const char *names[] = {"rs_fastcov.txt", "coverage.dat", "rs_end.txt", "rs_guard.jsonl", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(base, names[i]) == 0) return 1;
    return strncmp(base, "rs_cov_", 7) == 0 || (n >= 4 && strcmp(base + n - 4, ".vvp") == 0);
}

static int refused_file(const char *path) {
    if (!armed || !scorer_file(path)) return 0;
    errno = EACCES;
    return 1;
}

/* After an open succeeded: a /proc/<pid>/mem, an address map or a scorer file (under any name:
 * a symlink, /proc/self/fd/<n>, `..`) is closed again. */
static int checked_fd(int fd) {
    if (!armed || fd < 0) return fd;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return fd;
    target[n] = 0;
    size_t len = (size_t)n;
    struct statfs fs;
    int proc = fstatfs(fd, &fs) == 0 && fs.f_type == PROC_MAGIC;
    if ((proc && len >= 4 && (strcmp(target + len - 4, "/mem") == 0 || address_map(target))) ||
        (!proc && target[0] == '/' && scorer_file(target))) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    return fd;
}

#define OPEN_MODE(flags, mode)                                   \
    mode_t mode = 0;                                             \
    if ((flags) & (O_CREAT | O_TMPFILE)) {                       \
        va_list ap;                                              \
        va_start(ap, flags);                                     \
        mode = (mode_t)va_arg(ap, int);                          \
        va_end(ap);                                              \
    }

int open(const char *path, int flags, ...) {
    if (refused_file(path)) return -1;
    static open_t real;
    OPEN_MODE(flags, mode)
    if (!real) real = (open_t)next_fn("open");
    return checked_fd(real(path, flags, mode));
}

int open64(const char *path, int flags, ...) {
    if (refused_file(path)) return -1;
    static open_t real;
    OPEN_MODE(flags, mode)
    if (!real) real = (open_t)next_fn("open64");
    return checked_fd(real(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...) {
    if (refused_file(path)) return -1;
    static openat_t real;
    OPEN_MODE(flags, mode)
    if (!real) real = (openat_t)next_fn("openat");
    return checked_fd(real(dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...) {
    if (refused_file(path)) return -1;
    static openat_t real;
    OPEN_MODE(flags, mode)
    if (!real) real = (openat_t)next_fn("openat64");
    return checked_fd(real(dirfd, path, flags, mode));
}

/* Directory listings: /proc/<pid>/map_files names each mapping by its address range (glibc's
 * opendir opens the directory internally, past the open wrappers above). */
typedef DIR *(*opendir_t)(const char *);
typedef DIR *(*fdopendir_t)(int);

DIR *opendir(const char *path) {
    static opendir_t real;
    if (!real) real = (opendir_t)next_fn("opendir");
    char resolved[4096];
    if (armed && path && realpath(path, resolved) && address_map(resolved)) {
        errno = EACCES;
        return NULL;
    }
    return real(path);
}

DIR *fdopendir(int fd) {
    static fdopendir_t real;
    if (!real) real = (fdopendir_t)next_fn("fdopendir");
    if (checked_fd(fd) < 0) return NULL; /* closed: an address map */
    return real(fd);
}

/* --- a guarded simulator starts no process -------------------------------------------
 * A process the test starts (fork, a program) can outlive the simulator's own coverage write
 * and append to the coverage file or rewrite it (the red team's forge: a forked child copied
 * the fast path's flag lines with every flag set, reward 2.0). So an armed simulator creates no
 * process and replaces itself with no program: each call fails with EPERM (the test sees an
 * OSError and goes on or fails, its coverage counted as run) and says why on the saved stderr.
 * Threads (pthread_create's internal clone) are not affected. */
static void no_process(const char *what) {
    static int said; /* once: a loop of refused forks must not flood the step's output */
    errno = EPERM;
    if (said++) return;
    char line[200];
    snprintf(line, sizeof line, "reward-service: %s refused: a cocotb test may not start processes or programs\n",
             what);
    write_all(log_fd, line, strlen(line));
}

typedef pid_t (*fork_t)(void);

pid_t fork(void) {
    static fork_t real;
    if (armed) {
        no_process("fork");
        return -1;
    }
    if (!real) real = (fork_t)next_fn("fork");
    return real();
}

/* vfork's child shares the caller's stack frame: calling the real vfork from a wrapper would
 * return into a frame the child's return destroys. Unarmed, fork does the same job. */
pid_t vfork(void) { return fork(); }

int system(const char *command) {
    typedef int (*system_t)(const char *);
    static system_t real;
    if (armed) {
        if (!command) return 0; /* "is there a shell": none to use */
        no_process("system");
        return -1;
    }
    if (!real) real = (system_t)next_fn("system");
    return real(command);
}

pid_t forkpty(int *amaster, char *name, const void *termp, const void *winp) {
    typedef pid_t (*forkpty_t)(int *, char *, const void *, const void *);
    static forkpty_t real;
    if (armed) {
        no_process("forkpty");
        return -1;
    }
    if (!real) real = (forkpty_t)next_fn("forkpty");
    return real(amaster, name, termp, winp);
}

typedef int (*execve_t)(const char *, char *const[], char *const[]);
typedef int (*spawn_t)(void *, const char *, const void *, const void *, char *const[], char *const[]);
extern char **environ;

int execve(const char *path, char *const argv[], char *const envp[]) {
    static execve_t real;
    if (armed) {
        no_process("exec");
        return -1;
    }
    if (!real) real = (execve_t)next_fn("execve");
    return real(path, argv, envp);
}

int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

int fexecve(int fd, char *const argv[], char *const envp[]) {
    typedef int (*fexecve_t)(int, char *const[], char *const[]);
    static fexecve_t real;
    if (armed) {
        no_process("exec");
        return -1;
    }
    if (!real) real = (fexecve_t)next_fn("fexecve");
    return real(fd, argv, envp);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    static execve_t real;
    if (armed) {
        no_process("exec");
        return -1;
    }
    if (!real) real = (execve_t)next_fn("execvpe");
    return real(file, argv, envp);
}

int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

int posix_spawn(void *pid, const char *path, const void *actions, const void *attr, char *const argv[],
                char *const envp[]) {
    static spawn_t real;
    if (armed) {
        no_process("posix_spawn");
        return EPERM;
    }
    if (!real) real = (spawn_t)next_fn("posix_spawn");
    return real(pid, path, actions, attr, argv, envp);
}

int posix_spawnp(void *pid, const char *file, const void *actions, const void *attr, char *const argv[],
                 char *const envp[]) {
    static spawn_t real;
    if (armed) {
        no_process("posix_spawn");
        return EPERM;
    }
    if (!real) real = (spawn_t)next_fn("posix_spawnp");
    return real(pid, file, actions, attr, argv, envp);
}

typedef int (*open2_t)(const char *, int);

int __open_2(const char *path, int flags) {
    if (refused_file(path)) return -1;
    static open2_t real;
    if (!real) real = (open2_t)next_fn("__open_2");
    return checked_fd(real(path, flags));
}

int __open64_2(const char *path, int flags) {
    if (refused_file(path)) return -1;
    static open2_t real;
    if (!real) real = (open2_t)next_fn("__open64_2");
    return checked_fd(real(path, flags));
}

/* --- the scorer's files cannot be renamed, linked, truncated or made by another name ------- */
typedef int (*rename_t)(const char *, const char *);
typedef int (*renameat_t)(int, const char *, int, const char *);
typedef int (*renameat2_t)(int, const char *, int, const char *, unsigned int);
typedef int (*linkat_t)(int, const char *, int, const char *, int);
typedef int (*truncate_t)(const char *, off_t);

int rename(const char *old, const char *new) {
    static rename_t real;
    if (refused_file(old) || refused_file(new)) return -1;
    if (!real) real = (rename_t)next_fn("rename");
    return real(old, new);
}

int renameat(int olddir, const char *old, int newdir, const char *new) {
    static renameat_t real;
    if (refused_file(old) || refused_file(new)) return -1;
    if (!real) real = (renameat_t)next_fn("renameat");
    return real(olddir, old, newdir, new);
}

int renameat2(int olddir, const char *old, int newdir, const char *new, unsigned int flags) {
    static renameat2_t real;
    if (refused_file(old) || refused_file(new)) return -1;
    if (!real) real = (renameat2_t)next_fn("renameat2");
    return real(olddir, old, newdir, new, flags);
}

/* A hard link's source through a symlink (`linkat(.., AT_SYMLINK_FOLLOW)`) is the file it names. */
static int refused_source(const char *old) {
    char resolved[4096];
    return refused_file(old) || (armed && old && realpath(old, resolved) && refused_file(resolved));
}

int link(const char *old, const char *new) {
    static rename_t real;
    if (refused_source(old) || refused_file(new)) return -1;
    if (!real) real = (rename_t)next_fn("link");
    return real(old, new);
}

int linkat(int olddir, const char *old, int newdir, const char *new, int flags) {
    static linkat_t real;
    /* relative to a directory descriptor or an open file (AT_EMPTY_PATH): not resolvable here,
     * and no test needs it */
    if (armed && (olddir != AT_FDCWD || (flags & AT_EMPTY_PATH))) {
        errno = EACCES;
        return -1;
    }
    if (refused_source(old) || refused_file(new)) return -1;
    if (!real) real = (linkat_t)next_fn("linkat");
    return real(olddir, old, newdir, new, flags);
}

int symlink(const char *target, const char *name) {
    static rename_t real;
    if (refused_file(name) || refused_file(target)) return -1;
    if (!real) real = (rename_t)next_fn("symlink");
    return real(target, name);
}

int symlinkat(const char *target, int dir, const char *name) {
    typedef int (*symlinkat_t)(const char *, int, const char *);
    static symlinkat_t real;
    if (refused_file(name) || refused_file(target)) return -1;
    if (!real) real = (symlinkat_t)next_fn("symlinkat");
    return real(target, dir, name);
}

int truncate(const char *path, off_t length) {
    static truncate_t real;
    if (refused_file(path)) return -1;
    if (!real) real = (truncate_t)next_fn("truncate");
    return real(path, length);
}

int truncate64(const char *path, off_t length) {
    static truncate_t real;
    if (refused_file(path)) return -1;
    if (!real) real = (truncate_t)next_fn("truncate64");
    return real(path, length);
}

/* --- nor written through a descriptor the test did not open -----------------------------
 * Between a final block's $fopen and $fclose (or after Verilator's model opened coverage.dat) a
 * thread of the test could find the descriptor in /proc/self/fd and write, truncate or map it.
 * The simulator's own writes go through stdio inside libc (vvp) or libstdc++ (Verilator's
 * ofstream); any other caller's write to a scorer file is refused. */
static int scorer_fd(int fd, void *caller) {
    if (!armed || fd < 0) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    if (target[0] != '/' || !scorer_file(target)) return 0;
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libstdc++")) return 0;
    errno = EACCES;
    return 1;
}

#define CALLER __builtin_return_address(0)

ssize_t write(int fd, const void *buf, size_t count) {
    typedef ssize_t (*write_t)(int, const void *, size_t);
    static write_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (write_t)next_fn("write");
    return real(fd, buf, count);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    typedef ssize_t (*writev_t)(int, const struct iovec *, int);
    static writev_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (writev_t)next_fn("writev");
    return real(fd, iov, n);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    typedef ssize_t (*pwrite_t)(int, const void *, size_t, off_t);
    static pwrite_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (pwrite_t)next_fn("pwrite");
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    typedef ssize_t (*pwrite_t)(int, const void *, size_t, off_t);
    static pwrite_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (pwrite_t)next_fn("pwrite64");
    return real(fd, buf, count, offset);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t offset) {
    typedef ssize_t (*pwritev_t)(int, const struct iovec *, int, off_t);
    static pwritev_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (pwritev_t)next_fn("pwritev");
    return real(fd, iov, n, offset);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t offset, int flags) {
    typedef ssize_t (*pwritev2_t)(int, const struct iovec *, int, off_t, int);
    static pwritev2_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (pwritev2_t)next_fn("pwritev2");
    return real(fd, iov, n, offset, flags);
}

int ftruncate(int fd, off_t length) {
    typedef int (*ftruncate_t)(int, off_t);
    static ftruncate_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (ftruncate_t)next_fn("ftruncate");
    return real(fd, length);
}

int ftruncate64(int fd, off_t length) {
    typedef int (*ftruncate_t)(int, off_t);
    static ftruncate_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (ftruncate_t)next_fn("ftruncate64");
    return real(fd, length);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
    typedef int (*fallocate_t)(int, int, off_t, off_t);
    static fallocate_t real;
    if (scorer_fd(fd, CALLER)) return -1;
    if (!real) real = (fallocate_t)next_fn("fallocate");
    return real(fd, mode, offset, len);
}

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
    typedef void *(*mmap_t)(void *, size_t, int, int, int, off_t);
    static mmap_t real;
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED) && scorer_fd(fd, CALLER)) return MAP_FAILED;
    if (!real) real = (mmap_t)next_fn("mmap");
    return real(addr, length, prot, flags, fd, offset);
}

void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
    typedef void *(*mmap_t)(void *, size_t, int, int, int, off_t);
    static mmap_t real;
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED) && scorer_fd(fd, CALLER)) return MAP_FAILED;
    if (!real) real = (mmap_t)next_fn("mmap64");
    return real(addr, length, prot, flags, fd, offset);
}

ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
    typedef ssize_t (*sendfile_t)(int, int, off_t *, size_t);
    static sendfile_t real;
    if (scorer_fd(out, CALLER)) return -1;
    if (!real) real = (sendfile_t)next_fn("sendfile");
    return real(out, in, offset, count);
}

ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t len, unsigned int flags) {
    typedef ssize_t (*cfr_t)(int, off_t *, int, off_t *, size_t, unsigned int);
    static cfr_t real;
    if (scorer_fd(out, CALLER)) return -1;
    if (!real) real = (cfr_t)next_fn("copy_file_range");
    return real(in, in_off, out, out_off, len, flags);
}

ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len, unsigned int flags) {
    typedef ssize_t (*splice_t)(int, loff_t *, int, loff_t *, size_t, unsigned int);
    static splice_t real;
    if (scorer_fd(out, CALLER)) return -1;
    if (!real) real = (splice_t)next_fn("splice");
    return real(in, in_off, out, out_off, len, flags);
}

/* --- the simulator writes its scorer files fresh, where it started -----------------------
 * vvp's $fopen (vpi_fopen) and Verilator's ofstream (libstdc++) open through fopen64; a test's
 * Python never calls fopen (no ctypes). Whatever the test left under a scorer file's name
 * before (a file made with mknod, a hard link it writes through, a read-only file, a directory,
 * a FIFO) is moved out of the way at the simulator's first open, which creates a new file
 * (O_EXCL) under the directory the simulator started in (a test's chdir does not move it); a
 * later open (the next final block's append) must find that same file (red team 12-04: a hard
 * link made through a symlink, written after the model's own write; a chdir sending the model's
 * coverage.dat elsewhere; reward 2.0 on every engine). */
typedef FILE *(*fopen_t)(const char *, const char *);

static int made_slot(const char *base) {
    for (int i = 0; i < made.n; i++)
        if (strcmp(made.files[i].name, base) == 0) return i;
    return -1;
}

static void note_made(const char *base, const struct stat *sb) {
    if (made.n >= MADE_SLOTS || strlen(base) >= sizeof made.files[0].name) return;
    if (mprotect(&made, sizeof made, PROT_READ | PROT_WRITE) != 0) return;
    snprintf(made.files[made.n].name, sizeof made.files[0].name, "%s", base);
    made.files[made.n].dev = sb->st_dev;
    made.files[made.n].ino = sb->st_ino;
    made.n++;
    mprotect(&made, sizeof made, PROT_READ);
}

/* Moves what stands at `full` out of the way (a directory under a new name, anything else
 * unlinked). 0 when nothing is there any more. */
static int clear_place(const char *full) {
    struct stat sb;
    if (lstat(full, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return syscall(SYS_unlinkat, AT_FDCWD, full, 0) == 0 ? 0 : -1;
    char aside[8400];
    for (int i = 0; i < 16; i++) {
        snprintf(aside, sizeof aside, "%s.made-by-test.%d.%d", full, (int)getpid(), i);
        if (syscall(SYS_renameat2, AT_FDCWD, full, AT_FDCWD, aside, 1 /* RENAME_NOREPLACE */) == 0) return 0;
    }
    return -1;
}

/* The simulator could not open a scorer file (the test used up the descriptors, filled the
 * disk, ...): say so and end the process. Returning NULL would leave vvp's flags unwritten (a
 * quiet low score) and deadlock Verilator (VL_FATAL in VerilatedCovImp::write runs the exit
 * callbacks, which write the coverage again under the mutex it holds: the run then waits for
 * the wall-clock backstop). The line goes to the saved stderr (the step's output, whatever the
 * test did to fd 2) and, as a record, to the record file (both descriptors opened at start, so
 * none is needed now); the engine scores the sample a resource_limit (its own doing, never
 * cached; cocotb_guard.CANNOT_WRITE). */
static void cannot_write_scorer_file(const char *base) {
    char line[512], esc_base[200], esc_err[200], rec[700];
    const char *why = strerror(errno);
    int n = snprintf(line, sizeof line, "rs-guard: the simulator could not write its coverage file %.100s: %.100s\n",
                     base, why);
    if (n > 0) write_all(log_fd >= 0 ? log_fd : 2, line, strlen(line));
    json_str(esc_base, sizeof esc_base, base);
    json_str(esc_err, sizeof esc_err, why);
    snprintf(rec, sizeof rec, "RS_COCOTB_GUARD {\"event\": \"cannot_write\", \"file\": \"%s\", \"error\": \"%s\"}\n",
             esc_base, esc_err);
    write_all(record_fd, rec, strlen(rec));
    _exit(CANNOT_WRITE_EXIT);
}

static FILE *scorer_fopen(const char *which, const char *path, const char *mode) {
    static fopen_t real_fopen, real_fopen64;
    fopen_t *slot = strcmp(which, "fopen") == 0 ? &real_fopen : &real_fopen64;
    if (!*slot) *slot = (fopen_t)next_fn(which);
    int writes = mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
    if (!armed || !path || !writes || !scorer_file(path) || !st.cwd[0]) return (*slot)(path, mode);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char full[8300];
    if (path[0] == '/')
        snprintf(full, sizeof full, "%s", path);
    else
        snprintf(full, sizeof full, "%s/%s", st.cwd, path);
    int append = strchr(mode, 'a') != NULL;
    int at = made_slot(base);
    int fd = -1;
    if (at >= 0 && append) { /* a later final block: the file this process made, still in place */
        fd = (int)syscall(SYS_openat, AT_FDCWD, full, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && (fstat(fd, &sb) != 0 || sb.st_dev != made.files[at].dev || sb.st_ino != made.files[at].ino)) {
            close(fd);
            errno = ESTALE; /* not the file it made: the test replaced it */
            fd = -1;
        }
    } else {
        /* the work directory is the simulator's: a test that took its write permission away
         * (chmod 0500) would otherwise keep the scorer from moving things aside or creating */
        if (path[0] != '/') syscall(SYS_fchmodat, AT_FDCWD, st.cwd, 0755);
        if (clear_place(full) != 0) cannot_write_scorer_file(base);
        int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0);
        fd = (int)syscall(SYS_openat, AT_FDCWD, full, flags, 0644);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && at < 0) note_made(base, &sb);
    }
    if (fd < 0) cannot_write_scorer_file(base);
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) close(fd);
    return f;
}

FILE *fopen(const char *path, const char *mode) { return scorer_fopen("fopen", path, mode); }

FILE *fopen64(const char *path, const char *mode) { return scorer_fopen("fopen64", path, mode); }
