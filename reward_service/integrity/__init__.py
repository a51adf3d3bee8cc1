"""Reward integrity: a sample earns coverage only for what it makes the DUT do through its ports.

The scoring pipeline calls these checks for every engine and stimulus kind
(docs/integrity.md): SystemVerilog stimulus is checked on the elaborated design before it runs;
cocotb writes to non-port handles are refused at the simulator-interface write path of the run.
A refusal is a :class:`~reward_service.models.ScoreResult` with status ``refused`` and the
:class:`~reward_service.models.IntegrityViolation` s that caused it.

- :mod:`.policy`: the request's policy (:func:`~.policy.refuses_dut_writes`), the check the
  engine runs before simulating (:func:`~.policy.check_stimulus`) and the refused result
  (:func:`~.policy.refusal`);
- :mod:`.sv`: SystemVerilog stimulus on the pyslang-elaborated design (writes into the DUT,
  DUT parameter overrides), imported on first use (pyslang);
- :mod:`.races`: on the same elaboration, the testbench's races with the DUT at a clock edge and
  the ``#0`` insertions that make every engine decide them one documented way (docs/semantics.md).
"""
