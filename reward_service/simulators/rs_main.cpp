// reward-service main() for Verilator SV testbench builds (used instead of --main).
//
// Why not Verilator's generated main: it aborts on $stop/$fatal and is killed at a time limit
// without writing coverage.dat, so LLM testbenches that end with $stop/$fatal or hang would lose
// their coverage. This main (1) turns $stop/$fatal into an orderly end (fatalOnError(false)),
// (2) writes coverage on every ending, including Verilator runtime errors (exit callback) and
// the run's CPU-time limit (a watchdog thread: the limit counts the CPU this process used, not
// the wall clock, so a loaded machine cannot time a run out), (3) records how the run ended in
// rs_end.txt,
// (4) writes coverage per instance, and (5) applies the time-0 settling rule to toggle points
// (docs/semantics.md, "Time-0 settling and toggles"): when time first leaves 0 (or at the end
// if it never does), each toggle bit's counts so far become `0->1` = the value it settled to,
// `1->0` = 0; transitions after time 0 count on top as usual.
#include "verilated.h"
#include "verilated_cov.h"
#include "Vtop.h"
#include "Vtop___024root.h"

#include "rs_stops.h"  // generated per build: RS_STOPS, the "file:line" of each $stop call

#include <atomic>
#include <cstring>
#include <limits>
#include <string>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <ctime>
#include <unistd.h>

static VerilatedContext* g_ctx = nullptr;
static std::atomic<bool> g_written{false};
// A per-run secret from the host (env RS_TOKEN), echoed in rs_end.txt: the host accepts the
// coverage only with it, so a testbench that writes its own coverage.dat/rs_end.txt and then
// dies cannot pass forged coverage. The value is wiped from the environment block at start-up
// (so /proc/self/environ no longer shows it).
static char g_token[96] = {0};

// -- time-0 settling of toggle points ------------------------------------------------------
// Verilator counts a toggle bit in two adjacent uint32_t counters (1->0, 0->1; see
// VL_COV_TOGGLE_CHG_* in verilated_cov.h), registered through VerilatedCovContext::_inserti and
// the _insertp overload with two int values (VL_COVER_INSERT in the model's
// __vlCoverToggleInsert). The model's counter array is private to it, so the build links with
// -Wl,--wrap of those two symbols (TIME0_LINK_FLAGS in verilator.py) and the wrappers below
// note which counters are toggle points: only they are rewritten, line/branch/expr never.
extern "C" {
void __real__ZN19VerilatedCovContext8_insertiEPj(VerilatedCovContext* self, uint32_t* itemp);
void __real__ZN19VerilatedCovContext8_insertpEPKcS1_S1_S1_S1_iS1_iS1_S1_S1_S1_S1_S1_S1_S1_(
    VerilatedCovContext* self, const char* key0, const char* valp0, const char* key1,
    const char* valp1, const char* key2, int val2, const char* key3, int val3, const char* key4,
    const char* valp4, const char* key5, const char* valp5, const char* key6, const char* valp6,
    const char* key7, const char* valp7);
}

struct TogglePair {
    uint32_t* fall;  // the bit's 1->0 counter
    uint32_t* rise;  // its 0->1 counter
};
static std::vector<TogglePair> g_toggles;
static uint32_t* g_inserting = nullptr;   // the counter of the point being registered
static uint32_t* g_fall_pending = nullptr;  // a toggle bit's 1->0 counter, until its 0->1 one
static bool g_settled = false;

static bool ends_with(const char* s, const char* tail) {
    const size_t n = std::strlen(s), m = std::strlen(tail);
    return n >= m && std::strcmp(s + n - m, tail) == 0;
}

extern "C" void __wrap__ZN19VerilatedCovContext8_insertiEPj(VerilatedCovContext* self,
                                                            uint32_t* itemp) {
    g_inserting = itemp;
    __real__ZN19VerilatedCovContext8_insertiEPj(self, itemp);
}

extern "C" void __wrap__ZN19VerilatedCovContext8_insertpEPKcS1_S1_S1_S1_iS1_iS1_S1_S1_S1_S1_S1_S1_S1_(
    VerilatedCovContext* self, const char* key0, const char* valp0, const char* key1,
    const char* valp1, const char* key2, int val2, const char* key3, int val3, const char* key4,
    const char* valp4, const char* key5, const char* valp5, const char* key6, const char* valp6,
    const char* key7, const char* valp7) {
    // __vlCoverToggleInsert registers bit i's 1->0 counter, then its 0->1 counter (keys:
    // filename, lineno, column, hier, page "v_toggle/<module>", comment "<sig>[i]:1->0")
    if (key5 && valp5 && key6 && valp6 && std::strcmp(key5, "page") == 0
        && std::strncmp(valp5, "v_toggle/", 9) == 0 && std::strcmp(key6, "comment") == 0) {
        if (ends_with(valp6, ":1->0")) {
            g_fall_pending = g_inserting;
        } else if (ends_with(valp6, ":0->1") && g_fall_pending) {
            // a disabled point (coverage_off) shares one static zero counter for both
            if (g_fall_pending != g_inserting) g_toggles.push_back({g_fall_pending, g_inserting});
            g_fall_pending = nullptr;
        }
    }
    __real__ZN19VerilatedCovContext8_insertpEPKcS1_S1_S1_S1_iS1_iS1_S1_S1_S1_S1_S1_S1_S1_(
        self, key0, valp0, key1, valp1, key2, val2, key3, val3, key4, valp4, key5, valp5, key6,
        valp6, key7, valp7);
}

// Verilator samples a toggle signal written by a timed process (initial, `#`, `@`) when its
// delay trigger fires, before the processes due then resume: a value written after that last
// sample at time 0 (after a `#0`) is counted only at the next trigger, after time 0. One more
// trigger at time 0 (a coroutine that does nothing, due at the current time in the active
// region: the scheduler's UINT64_MAX delay, its fork..join_none sentinel; a delay of 0 would
// wait in the inactive region, which raises no trigger) makes the model take that sample while
// still at time 0. Only for a model with timing (it has a delay scheduler).
template <typename Root>
static VlCoroutine rs_time0_wake(Root* rootp) {
    co_await rootp->__VdlySched.delay(std::numeric_limits<uint64_t>::max(), nullptr, "rs_main.cpp",
                                      __LINE__);
}

template <typename Root>
static void sample_time0(Root* rootp, Vtop* topp) {
    if constexpr (requires { rootp->__VdlySched; }) {
        rs_time0_wake(rootp);
        topp->eval();
    }
}

// Once, when time 0 has settled (after sample_time0): a bit's counts so far become 0->1 = its
// settled value, 1->0 = 0. Counting starts from Verilator's zero state and rises and falls
// alternate, so the settled value is rise - fall (1 or 0). Ports share their counters with the
// connected signal (one pair, listed once per instance): the rewrite is idempotent.
static void settle_time0() {
    if (g_settled) return;
    g_settled = true;
    for (const TogglePair& t : g_toggles) {
        *t.rise = *t.rise > *t.fall ? 1 : 0;
        *t.fall = 0;
    }
}

static void write_end(const char* why) {
    // Only the first ending writes; later ones (e.g. the watchdog racing a normal end) return.
    bool expected = false;
    if (!g_written.compare_exchange_strong(expected, true)) return;
    settle_time0();  // time never left 0: all of the run was time 0
    // One record per instance (Verilator's default merges the instances of a module into one
    // record, `tb.*`): the host keeps the DUT instance's own hierarchy and merges within it
    // (reward_service/coverage/instances.py), so a reference-model instance does not count.
    g_ctx->coveragep()->forcePerInstance(true);
    g_ctx->coveragep()->write("coverage.dat");
    if (FILE* f = std::fopen("rs_end.txt", "w")) {
        std::fprintf(f, "%s %llu %s\n", why, (unsigned long long)g_ctx->time(), g_token);
        std::fclose(f);
    }
    std::fflush(stdout);
}

// Built with -DVL_USER_STOP_MAYBE, so this replaces Verilator's own. Verilator routes $stop,
// $error and failed assertions all through here with maybe=true (and $fatal with maybe=false);
// its default error limit of 1 ends the run at the first $error. Icarus and commercial
// simulators report an $error and go on, so we do too: only a real $stop (a line listed in
// RS_STOPS) or $fatal ends the run.
void vl_stop_maybe(const char* filename, int linenum, const char* hier, bool maybe) VL_MT_UNSAFE {
    if (maybe) {
        const std::string here = std::string(filename) + ":" + std::to_string(linenum);
        bool is_stop = false;
        for (const char* const* s = RS_STOPS; *s; ++s) is_stop = is_stop || here == *s;
        if (!is_stop) {
            Verilated::threadContextp()->errorCountInc();
            return;
        }
    }
    vl_stop(filename, linenum, hier);
}

int main(int argc, char** argv, char**) {
    if (char* token = std::getenv("RS_TOKEN")) {
        std::strncpy(g_token, token, sizeof(g_token) - 1);
        std::memset(token, 'x', std::strlen(token));
    }
    Verilated::debug(0);
    const std::unique_ptr<VerilatedContext> contextp{new VerilatedContext};
    g_ctx = contextp.get();
    contextp->threads(1);
    contextp->fatalOnError(false);  // $stop/$fatal end the loop instead of abort()
    contextp->commandArgs(argc, argv);
    const std::unique_ptr<Vtop> topp{new Vtop{contextp.get(), ""}};
    Verilated::addExitCb([](void*) { write_end("error"); }, nullptr);  // runtime fatal

    const char* limit = std::getenv("RS_RUN_LIMIT_S");
    if (limit && std::atof(limit) > 0) {
        const double seconds = std::atof(limit);
        std::thread([seconds] {
            // The process's CPU time (all threads; the watchdog's own wake-ups are negligible).
            for (;;) {
                timespec used{};
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
                const double left = seconds - (used.tv_sec + used.tv_nsec * 1e-9);
                if (left <= 0) break;
                std::this_thread::sleep_for(std::chrono::duration<double>(left < 0.05 ? left : 0.05));
            }
            if (g_written.load()) return;
            write_end("timeout");
            std::fflush(nullptr);
            _exit(124);
        }).detach();
    }

    while (VL_LIKELY(!contextp->gotFinish())) {
        topp->eval();
        const bool pending = topp->eventsPending();
        // time 0 has settled when time leaves it (a `#0` wakes up at 0 again) or events run out
        if (!g_settled && (!pending || topp->nextTimeSlot() > 0) && !contextp->gotFinish()) {
            sample_time0(topp->rootp, topp.get());
            settle_time0();
            if (contextp->gotFinish()) break;
        }
        if (!pending) break;
        contextp->time(topp->nextTimeSlot());
    }
    const char* why = contextp->gotError() ? "stop" : contextp->gotFinish() ? "finish" : "no_events";
    topp->final();
    write_end(why);
    return 0;
}
