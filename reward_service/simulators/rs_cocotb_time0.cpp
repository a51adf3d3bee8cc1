// Time-0 settling of toggle points for cocotb's Verilator main (cocotb's own verilator.cpp,
// which we do not replace): rs_toggle_time0.h's rewrite runs at the first VPI cbNextSimTime
// after time 0 (cocotb's main calls them when it advances time, before the model evaluates the
// new time, so the counters are as time 0 left them), or at cbEndOfSimulation (before cocotb
// writes coverage.dat) when time never left 0. Linked into cocotb's model build with the
// -Wl,--wrap flags of verilator.py (COCOTB_TIME0_ARGS).
//
// Unlike rs_main.cpp, no extra sample is taken at time 0 (cocotb's main owns the loop): a
// value a DUT's own timed process writes after a `#0` at time 0 is counted when Verilator next
// samples it, as before.
#include "rs_toggle_time0.h"

#include "vpi_user.h"

static PLI_INT32 rs_time0_at_next_time(p_cb_data);

static void rs_time0_register(PLI_INT32 reason) {
    s_cb_data cb{};
    cb.reason = reason;
    cb.cb_rtn = rs_time0_at_next_time;
    vpi_register_cb(&cb);
}

static PLI_INT32 rs_time0_at_next_time(p_cb_data data) {
    s_vpi_time now{};
    now.type = vpiSimTime;
    vpi_get_time(nullptr, &now);
    if (data->reason == cbNextSimTime && now.high == 0 && now.low == 0) {
        rs_time0_register(cbNextSimTime);  // cocotb's main went round at time 0 again
        return 0;
    }
    settle_time0();
    return 0;
}

extern "C" void rs_time0_first_point() {
    rs_time0_register(cbNextSimTime);
    rs_time0_register(cbEndOfSimulation);
}
