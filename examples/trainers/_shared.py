"""What the trainer examples share: the service they score against, the shipped CVDP problem
(examples/cvdp/attenuator.jsonl) and three completions a policy could have written for it."""

from __future__ import annotations

import time
from pathlib import Path

from reward_service.adapters.common import service_url
from reward_service.client import RewardClient

CVDP = Path(__file__).resolve().parents[1] / "cvdp"
PROBLEM_ID = "cvdp_copilot_Attenuator_0011"

#: A good answer (prose + code block), the bare testbench, and an answer without code.
COMPLETIONS = [
    (CVDP / "completion.md").read_text(),
    f"```verilog\n{(CVDP / 'tb_attenuator.sv').read_text()}```",
    "I would toggle the inputs and watch ATTN_LE; I cannot write the testbench now.",
]


def setup() -> tuple[str, str]:
    """Register the problem on the service ($REWARD_SERVICE_URL, default http://127.0.0.1:8000);
    return (URL, the problem's prompt)."""
    url = service_url()
    with RewardClient(url) as client:
        deadline = time.monotonic() + 30  # `reward-service serve ... &` may still be starting
        while not client.health():
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"no reward service at {url} after 30 s: start one with "
                    "`reward-service serve --port 8000` or set REWARD_SERVICE_URL"
                )
            time.sleep(0.5)
        client.load_problems_jsonl(CVDP / "attenuator.jsonl")
        return url, client.get_problem(PROBLEM_ID).prompt or ""
