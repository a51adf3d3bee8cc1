"""verl: the custom reward functions called the way verl's reward managers call them.

In a verl 0.9 run (the problem id in each row's ``reward_model.ground_truth``):

    reward.custom_reward_function.path=$(python -c 'import reward_service.adapters.verl as m; print(m.__file__)')
    reward.custom_reward_function.name=compute_score_async     # verl 0.9's reward loop
    +reward.custom_reward_function.reward_kwargs.service_url=http://127.0.0.1:8000

Older verl: ``custom_reward_function.name=compute_score_batch`` with
``reward_model.reward_manager=batch`` (verl 0.9 has no ``batch`` manager), or ``compute_score``
with the naive manager.

Run against a service: ``reward-service serve --port 8000 & python examples/trainers/verl_example.py``
"""

import asyncio
import json

from _shared import COMPLETIONS, PROBLEM_ID, setup

from reward_service.adapters.verl import compute_score, compute_score_async, compute_score_batch

url, _ = setup()
n = len(COMPLETIONS)
# the batch manager: one call per step (index = dataset row: the group of the diversity term)
batch = compute_score_batch(
    data_sources=["cvdp_cid012"] * n,
    solution_strs=COMPLETIONS,
    ground_truths=[PROBLEM_ID] * n,
    extra_infos=[{"index": 0}] * n,
    service_url=url,
)
print("compute_score_batch:", batch)
# the naive manager: one call per sample
print(
    "compute_score:",
    [compute_score("cvdp_cid012", text, PROBLEM_ID, {"index": 0}, service_url=url) for text in COMPLETIONS],
)


async def reward_loop() -> list[float]:  # verl's reward loop awaits async functions concurrently
    return await asyncio.gather(
        *[
            compute_score_async("cvdp_cid012", text, json.dumps({"problem_id": PROBLEM_ID}), None, service_url=url)
            for text in COMPLETIONS
        ]
    )


print("compute_score_async:", asyncio.run(reward_loop()))
