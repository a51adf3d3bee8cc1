"""TRL: the reward function called the way GRPOTrainer calls it.

In a TRL run (the dataset has a ``problem_id`` column next to ``prompt``):

    from reward_service.adapters.trl import CoverageReward
    trainer = GRPOTrainer(model="Qwen/Qwen2.5-Coder-7B-Instruct", train_dataset=dataset,
                          reward_funcs=[CoverageReward("http://127.0.0.1:8000")])

Run against a service: ``reward-service serve --port 8000 & python examples/trainers/trl_example.py``
"""

from _shared import COMPLETIONS, PROBLEM_ID, setup

from reward_service.adapters.trl import CoverageReward

url, prompt = setup()
# diversity_weight: each completion also gets 0.1 x its GRPO-group diversity (bins it covers
# that few others in the group cover), so rewards can exceed chorus's 1 + coverage <= 2
reward = CoverageReward(url, diversity_weight=0.1)
n = len(COMPLETIONS)
# standard format: strings; dataset columns arrive as keyword lists, one entry per completion
print("standard:", reward(prompts=[prompt] * n, completions=COMPLETIONS, problem_id=[PROBLEM_ID] * n))
# conversational format: lists of {"role", "content"} messages
print(
    "conversational:",
    reward(
        prompts=[[{"role": "user", "content": prompt}]] * n,
        completions=[[{"role": "assistant", "content": c}] for c in COMPLETIONS],
        problem_id=[PROBLEM_ID] * n,
    ),
)
