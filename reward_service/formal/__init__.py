"""Formal unreachability of coverage points: the DUT's points as a synthesizable
model (:mod:`.model`), proved unreachable with yosys + ABC (:mod:`.prover`). See docs/formal.md."""
