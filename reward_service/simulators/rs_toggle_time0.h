// Time-0 settling of toggle points (docs/semantics.md, "Time-0 settling and toggles"), shared
// by rs_main.cpp (SV testbenches) and rs_cocotb_time0.cpp (cocotb's Verilator main): a toggle
// bit's transitions at time 0 count only from 0 to the value it settled to. Included by exactly
// one translation unit of a build (it defines the wrapped symbols).
#pragma once

#include "verilated.h"
#include "verilated_cov.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

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
static std::atomic<bool> g_settled{false};  // the watchdog's timeout ending may race the main loop

static bool ends_with(const char* s, const char* tail) {
    const size_t n = std::strlen(s), m = std::strlen(tail);
    return n >= m && std::strcmp(s + n - m, tail) == 0;
}

// Defined by rs_cocotb_time0.cpp (cocotb builds): called once, at the model's first coverage
// point, to hook the end of time 0 into cocotb's main.
extern "C" void rs_time0_first_point() __attribute__((weak));

extern "C" void __wrap__ZN19VerilatedCovContext8_insertiEPj(VerilatedCovContext* self,
                                                            uint32_t* itemp) {
    static bool s_first = true;
    if (s_first && rs_time0_first_point) rs_time0_first_point();
    s_first = false;
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

// Once, when time 0 has settled (rs_main.cpp first takes one more sample): a bit's counts so
// far become 0->1 = its settled value, 1->0 = 0. Counting starts from Verilator's zero state
// (the model resets its toggle shadows to 0) and rises and falls alternate, so the settled
// value is rise - fall (1 or 0). Ports share their counters with the connected signal (one
// pair, listed once per instance): the rewrite is idempotent. The watchdog thread may call it
// for a run timed out within time 0 (then all of the run was time 0).
static void settle_time0() {
    if (g_settled.exchange(true)) return;
    for (const TogglePair& t : g_toggles) {
        *t.rise = *t.rise > *t.fall ? 1 : 0;
        *t.fall = 0;
    }
}

