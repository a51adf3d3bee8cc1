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
#include "verilated_timing.h"  // VlCoroutine: a model without delays does not include it
#include "Vtop.h"
#include "Vtop___024root.h"

#include "rs_toggle_time0.h"  // settle_time0(): the time-0 rule for toggle points
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

static void write_end(const char* why) {
    // Only the first ending writes; later ones (e.g. the watchdog racing a normal end) return.
    bool expected = false;
    if (!g_written.compare_exchange_strong(expected, true)) return;
    settle_time0();  // time never left 0: all of the run was time 0
    // One record per instance (Verilator's default merges the instances of a module into one
    // record, `tb.*`): the host keeps the DUT instance's own hierarchy and merges within it
    // (reward_service/coverage/instances.py), so a reference-model instance does not count.
    g_ctx->coveragep()->forcePerInstance(true);
    // Written under a name only this process knows, then renamed over coverage.dat: a file the
    // testbench opened as coverage.dat (`$fopen(.., "a")` or "r+", its buffer flushed when the
    // process exits, after this write) refers to the replaced file, never to this one (red
    // team: appended records raised toggle 13/38 to 173/38+160). No rename, no rs_end.txt: the
    // host then trusts neither file.
    const std::string tmp = std::string("rs_cov_") + g_token + ".tmp";
    g_ctx->coveragep()->write(tmp.c_str());
    if (std::rename(tmp.c_str(), "coverage.dat") != 0) return;
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
