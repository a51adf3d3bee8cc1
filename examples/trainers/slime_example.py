"""slime: the custom reward functions awaited the way slime's rollout awaits them.

In a slime run (the dataset's ``problem_id`` column as the label):

    --custom-rm-path reward_service.adapters.slime.reward_func --label-key problem_id
    # per group, with the diversity term (REWARD_SERVICE_DIVERSITY_WEIGHT=0.1):
    --custom-rm-path reward_service.adapters.slime.batched_reward_func --group-rm --label-key problem_id

Run against a service: ``reward-service serve --port 8000 & python examples/trainers/slime_example.py``
"""

import asyncio
from argparse import Namespace

from _shared import COMPLETIONS, PROBLEM_ID, setup

from reward_service.adapters.slime import batched_reward_func, reward_func

try:
    from slime.utils.types import Sample
except ImportError:  # slime not installed: the fields the reward functions read
    from dataclasses import dataclass, field

    @dataclass
    class Sample:
        group_index: int | None = None
        index: int | None = None
        prompt: str = ""
        response: str = ""
        label: str | None = None
        metadata: dict = field(default_factory=dict)


url, prompt = setup()
args = Namespace(reward_service_url=url)  # or REWARD_SERVICE_URL in the environment
group = [
    Sample(group_index=0, index=i, prompt=prompt, response=text, label=PROBLEM_ID) for i, text in enumerate(COMPLETIONS)
]


async def rollout():
    single = await asyncio.gather(*[reward_func(args, s) for s in group])
    return single, await batched_reward_func(args, group, diversity_weight=0.1)


single, batched = asyncio.run(rollout())
print("reward_func:", single)
print("batched_reward_func (diversity 0.1):", batched)
