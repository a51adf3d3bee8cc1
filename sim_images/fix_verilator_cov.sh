#!/bin/sh
# Fix Verilator's toggle counting of signals over 64 bits, in place, in the VERILATOR_ROOT given
# (idempotent; used by scripts/install.sh and sim_images/Dockerfile for both Verilators).
#
# VL_COV_TOGGLE_CHG_ST_W / _MT_W (include/verilated_cov.h, 5.040 to at least 5.052) walk bit j of
# word i for j up to the signal's remaining width, past the word's 32 bits: `chgData >> j` then
# shifts by j mod 32 on x86, so a change of bit b of a word is also counted at b+32, b+64, ...
# (a 75-bit port whose bit 2 rises is covered at 2, 34 and 66). The bound becomes the word's.
# reward_service/sandbox/toolchain_probe.py refuses a Verilator without this fix.
set -eu
root="$1"
header="$root/include/verilated_cov.h"
[ -f "$header" ] || { echo "fix_verilator_cov.sh: $header missing" >&2; exit 1; }
sed -i 's/for (int j = 0; j < width - i \* VL_EDATASIZE; ++j)/for (int j = 0; j < VL_EDATASIZE \&\& j < width - i * VL_EDATASIZE; ++j)/' "$header"
if grep -q 'for (int j = 0; j < width - i \* VL_EDATASIZE; ++j)' "$header"; then
  echo "fix_verilator_cov.sh: $header still has the unbounded loop" >&2
  exit 1
fi
