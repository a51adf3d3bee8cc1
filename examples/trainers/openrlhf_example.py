"""OpenRLHF: the remote reward model, sent exactly what OpenRLHF's ``remote_rm_fn`` sends.

In an OpenRLHF run (the dataset's ``problem_id`` column becomes the labels):

    python -m openrlhf.cli.train_ppo_ray ... \\
        --reward.remote_url http://127.0.0.1:8000/v1/openrlhf/reward --data.label_key problem_id

(OpenRLHF before 0.11: ``--remote_rm_url ... --label_key problem_id``.)

Run against a service: ``reward-service serve --port 8000 & python examples/trainers/openrlhf_example.py``
"""

import httpx
from _shared import COMPLETIONS, PROBLEM_ID, setup

from reward_service.adapters.openrlhf import reward_func

url, prompt = setup()
n = len(COMPLETIONS)
body = {"query": [prompt + c for c in COMPLETIONS], "prompts": [prompt] * n, "labels": [PROBLEM_ID] * n}
answer = httpx.post(f"{url}/v1/openrlhf/reward", json=body, headers={"Content-Type": "application/json"}, timeout=600)
answer.raise_for_status()
print("POST /v1/openrlhf/reward:", answer.json())
# the Python-file form (--reward.remote_url /path/to/reward_service/adapters/openrlhf.py; before 0.11 --remote_rm_url)
rewards = reward_func(body["query"], body["prompts"], body["labels"], service_url=url)["rewards"]
print("reward_func:", [float(r) for r in rewards])  # a torch tensor where torch is installed
