"""TRL ``environment_factory`` end to end: a real ``GRPOTrainer`` whose rollouts are two-round
coverage-closure episodes on the service, the model calling the episode's tools.

``GRPOTrainer(environment_factory=...)`` (TRL 1.16) makes one
:class:`~reward_service.adapters.trl.CoverageEnvironment` per rollout: ``reset`` opens an
episode on the service (``POST /v1/episodes``, 2 rounds) and its text is appended to the
prompt; the environment's public methods (``read_file``, ``simulate``, ``submit``) are the
model's tools, rendered into the prompt by the tokenizer's chat template (Qwen3's, which TRL
knows how to parse tool calls from); TRL's own loop generates, parses each
``<tool_call>``, calls the tool, appends its answer (``<tool_response>``) and generates again;
``get_reward`` gives the rollout's reward (the last submitted round's, which the service
scored as ``/v1/score`` would).

Nothing comes from a model hub. The policy is a tiny Qwen2 model built from a config, with a
byte-level BPE tokenizer trained here on the rendered conversation. A tiny random model does not
write tool calls, so it is first warm-started (TRL's ``SFTTrainer``) on one **demonstration**:
a two-round episode played on the service by the same environment class — submit a weak
testbench (one data change: 89.5%, under the 90% target), read the coverage report, submit the
team's full testbench (examples/cvdp/tb_attenuator.sv: target met). The demonstration's tool
answers are the service's real ones. After the warm start the model reproduces the two tool
calls; during GRPO they are parsed, executed and answered by TRL against fresh episodes, so
every submission is really simulated and every observation is the service's answer of that
rollout. What is scripted is the policy's *choice* of testbenches (it learned them by heart);
the round-2 call is made after the round-1 coverage report is in its context, not because of it.

Run against a service (the ``trl`` extra: ``scripts/install.sh --test`` installs it), from the checkout's root::

    reward-service serve --port 8000 &
    until curl -sf localhost:8000/readyz >/dev/null; do sleep 1; done
    python examples/trainers/trl_environment_tiny.py --steps 2 --log-history /tmp/env.json

It prints each GRPO step's rewards and, per rollout, the episode and the rewards of its rounds;
with ``--log-history`` it writes the trainer's ``state.log_history``, the demonstration and every
rollout (episode id, the messages TRL built — tool calls and tool answers —, the environment's
rewards) as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _shared, when run from elsewhere
from _shared import CVDP, PROBLEM_ID, setup
from trl_grpo_tiny import build_model, train_bpe, trainer_arguments, warm_start

from reward_service.adapters.trl import CoverageEnvironment

ROUNDS = 2
TASK = (
    "Write a SystemVerilog testbench for the CVDP Attenuator and submit it with the `submit` tool; "
    "the coverage report of a submission tells what is left to cover."
)
#: Round 1 of the demonstration: resets and drives one data change (89.5%: under the 90% target).
WEAK_TB = (CVDP / "tb_attenuator_weak.sv").read_text()
#: Round 2: the team's full testbench (meets the target).
GOOD_TB = (CVDP / "tb_attenuator.sv").read_text()
CLOSING = "The testbench meets the coverage target."
SPECIAL = {"pad": "<|endoftext|>", "eos": "<|im_end|>"}
#: Qwen3's chat-template markers: whole tokens, so that BPE never merges them with their neighbours.
MARKERS = ["<|im_start|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def prompt_messages() -> list[dict[str, str]]:
    """The dataset's conversational prompt (TRL appends the environment's ``reset`` text to it)."""
    return [{"role": "user", "content": TASK}]


def submit_call(testbench: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [submit_tool_call(testbench)]}


def submit_tool_call(testbench: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "submit", "arguments": {"testbench": testbench}}}


def demonstration(url: str) -> list[dict[str, Any]]:
    """A two-round episode played on the service through :class:`CoverageEnvironment` (the same
    calls TRL makes), as chat messages: the prompt with the ``reset`` text, each ``submit`` call
    and the service's answer to it, and a closing remark."""
    env = CoverageEnvironment(url, rounds=ROUNDS)
    intro = env.reset(prompt=prompt_messages(), problem_id=PROBLEM_ID)
    weak, good = env.submit(WEAK_TB), env.submit(GOOD_TB)
    if "not met" not in weak or not good.endswith("The episode is over."):
        raise SystemExit(f"unexpected demonstration episode:\n{weak}\n---\n{good}")
    return [
        {"role": "user", "content": TASK + intro},
        submit_call(WEAK_TB),
        {"role": "tool", "name": "submit", "content": weak},
        submit_call(GOOD_TB),
        {"role": "tool", "name": "submit", "content": good},
        {"role": "assistant", "content": CLOSING},
    ]


def chat_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on ``texts`` with Qwen3's chat template, so that TRL
    renders the tools and parses tool calls as for Qwen3."""
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(texts, vocab_size, [SPECIAL["pad"], SPECIAL["eos"], *MARKERS]),
        eos_token=SPECIAL["eos"],
        pad_token=SPECIAL["pad"],
        padding_side="left",
    )
    tokenizer.chat_template = qwen3_chat_template
    return tokenizer


def rendering_template(tokenizer) -> str | None:
    """The template TRL renders prompts with in multi-turn training (its prefix-preserving
    variant of Qwen3's, as ``GRPOTrainer`` picks it), so the warm start sees the same text."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def render(tokenizer, messages: list[dict[str, Any]], tools: list, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(
        messages,
        tools=tools,
        chat_template=rendering_template(tokenizer),
        add_generation_prompt=generation_prompt,
        tokenize=False,
    )


def sft_example(tokenizer, messages: list[dict[str, Any]], tools: list) -> dict[str, str]:
    """The demonstration as a prompt/completion pair of rendered text: the prompt up to the
    first assistant header, the completion the rest (the tool answers included), ending in EOS."""
    prompt = render(tokenizer, messages[:1], tools, generation_prompt=True)
    full = render(tokenizer, messages, tools, generation_prompt=False).rstrip("\n")
    if not full.startswith(prompt):
        raise SystemExit("the chat template is not prefix-preserving: the warm start would see another prompt")
    return {"prompt": prompt, "completion": full[len(prompt) :]}


class Transcript:
    """A reward function that scores nothing (``None``: TRL leaves it out of the sum) and keeps,
    per rollout, what TRL passed: the messages it built (tool calls, tool answers) and the
    environment (its episode id and round rewards)."""

    __name__ = "transcript"

    def __init__(self) -> None:
        self.rollouts: list[dict[str, Any]] = []

    def __call__(self, prompts, completions, environments=None, **columns):
        for prompt, completion, env in zip(prompts, completions, environments or [None] * len(prompts)):
            self.rollouts.append(
                {
                    "prompt": prompt,
                    "completion": completion,
                    "episode_id": getattr(env, "episode_id", None),
                    "rewards": list(getattr(env, "rewards", [])),
                    "reward": env.get_reward() if env is not None else None,
                }
            )
        return [None] * len(completions)


def grpo(
    model, tokenizer, url: str, steps: int, generations: int, max_completion: int, args, workdir: str
) -> tuple[list[dict], Transcript]:
    """``steps`` GRPO steps of ``generations`` rollouts (one episode each); returns TRL's log history."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    transcript = Transcript()
    data = Dataset.from_dict({"prompt": [prompt_messages()] * steps, "problem_id": [PROBLEM_ID] * steps})
    config = GRPOConfig(
        output_dir=os.path.join(workdir, "grpo"),
        max_steps=steps,
        per_device_train_batch_size=generations,
        num_generations=generations,
        max_completion_length=max_completion,
        max_tool_calling_iterations=ROUNDS + 1,
        temperature=args.temperature,
        learning_rate=1e-5,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[transcript],
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        environment_factory=lambda: CoverageEnvironment(url, rounds=ROUNDS, reward_of="last"),
    )
    trainer.train()
    return trainer.state.log_history, transcript


def main(argv: list[str] | None = None) -> int:
    parser = trainer_arguments(__doc__, steps=2, generations=2, sft_steps=80, temperature=0.5)
    parser.add_argument("--vocab", type=int, default=1024, help="BPE vocabulary size")
    args = parser.parse_args(argv)

    import torch
    from transformers import set_seed

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.16
    torch.set_num_threads(1)  # a model this small runs slower on 2 threads (they wait on each other)
    set_seed(args.seed)
    url, _ = setup()
    started = time.monotonic()
    demo = demonstration(url)
    print(f"demonstration episode: {time.monotonic() - started:.0f} s")
    probe = CoverageEnvironment(url)
    tools = [probe.read_file, probe.simulate, probe.submit]  # as TRL lists them: the public methods, by name
    # the tokenizer is trained on the rendered demonstration: a first pass renders it with the template
    draft = chat_tokenizer([json.dumps(demo)], vocab_size=300)
    example = sft_example(draft, demo, tools)
    tokenizer = chat_tokenizer([example["prompt"], example["completion"]], vocab_size=args.vocab)
    example = sft_example(tokenizer, demo, tools)
    completion_tokens = len(tokenizer(example["completion"], add_special_tokens=False)["input_ids"])
    model = build_model(tokenizer, args.seed, max_positions=2048)
    with tempfile.TemporaryDirectory() as workdir:
        rows = [example] * 4  # one demonstration, one per SFT step
        sft_losses = warm_start(
            model, tokenizer, rows, args.sft_steps, workdir, args.seed, batch_size=1, max_length=2048
        )
        sft_s = time.monotonic() - started
        print(
            f"SFT: {args.sft_steps} steps in {sft_s:.0f} s on {completion_tokens} completion tokens, "
            f"loss {sft_losses[0]:.3f} -> {sft_losses[-1]:.4f}"
        )
        history, transcript = grpo(
            model, tokenizer, url, args.steps, args.generations, completion_tokens + 128, args, workdir
        )
    steps = [e for e in history if "reward" in e]
    for i, entry in enumerate(steps):
        print(f"GRPO step {i + 1}: reward mean {entry['reward']:.3f} std {entry['reward_std']:.3f}")
    for rollout in transcript.rollouts:
        calls = [m for m in rollout["completion"] if m.get("tool_calls")]
        print(f"episode {rollout['episode_id']}: {len(calls)} tool calls, round rewards {rollout['rewards']}")
    print(f"total {time.monotonic() - started:.0f} s")
    if args.log_history:
        args.log_history.write_text(
            json.dumps(
                {
                    "log_history": history,
                    "rollouts": transcript.rollouts,
                    "demonstration": demo,
                    "sft_losses": sft_losses,
                    "vocab_size": len(tokenizer),
                    "completion_tokens": completion_tokens,
                    "parameters": sum(p.numel() for p in model.parameters()),
                    "problem_id": PROBLEM_ID,
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
