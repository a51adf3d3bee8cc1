"""Trainer adapters: the few lines that connect an RL trainer to the reward service.

- :mod:`.verl` -- ``compute_score`` (per sample, sync and async) and ``compute_score_batch``;
- :mod:`.trl` -- :class:`~reward_service.adapters.trl.CoverageReward`, a ``reward_funcs`` entry;
- :mod:`.openrlhf` -- the remote reward model (``--remote_rm_url``; served at
  ``POST /v1/openrlhf/reward``) and its Python-file form ``reward_func``;
- :mod:`.slime` -- ``reward_func`` / ``batched_reward_func`` for ``--custom-rm-path``.

They share :mod:`.common` (problem ids, completions, groups, rewards, clients). None imports
its trainer: the trainers call them with plain Python values. See docs/trainers.md.
"""
