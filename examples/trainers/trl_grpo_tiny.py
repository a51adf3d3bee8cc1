"""TRL end to end: a real ``GRPOTrainer`` run on CPU for a few steps, rewarded by the service.

Nothing comes from a model hub. The policy is a tiny Qwen2 model built from a config, with a
byte-level BPE tokenizer trained here (``tokenizers``) on the two testbenches this example ships
for the CVDP Attenuator problem (examples/cvdp/completion.md: 8 random values;
examples/cvdp/tb_attenuator.sv: directed patterns, higher coverage). A few SFT steps (TRL's
``SFTTrainer``) warm-start it on those two answers, so that sampling reproduces a valid
testbench (one of the two, or a mix) and the reward is not 0 everywhere. Then ``GRPOTrainer``
runs with :class:`~reward_service.adapters.trl.CoverageReward` as its only reward function:
each step samples ``--generations`` completions for the prompt, the service simulates them,
and TRL logs the rewards (``reward``, ``reward_std``, ``rewards/coverage_reward/mean``).

Run against a service (the ``trl`` extra: ``scripts/install.sh --test`` installs it), from the checkout's root::

    reward-service serve --port 8000 &
    until curl -sf localhost:8000/readyz >/dev/null; do sleep 1; done
    python examples/trainers/trl_grpo_tiny.py --steps 4 --log-history /tmp/grpo.json

It prints one line per GRPO step (reward mean/std, the rewards of the step's completions) and,
with ``--log-history``, writes the trainer's ``state.log_history`` and every scored completion
with its reward as JSON. About 50 s on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _shared, when run from elsewhere
from _shared import CVDP, PROBLEM_ID, setup

from reward_service.adapters.trl import CoverageReward

EOS, PAD, ANSWER = "<|endoftext|>", "<|pad|>", "<|answer|>"
#: The prompt the policy sees. It ends in a special token so that BPE never merges the prompt's
#: last characters with the answer's first ones (SFT and GRPO tokenize the prompt alone).
PROMPT = f"Write a SystemVerilog testbench for the CVDP Attenuator ({PROBLEM_ID}).{ANSWER}"


def answers() -> list[str]:
    """The two warm-start answers, as a model would write them: prose + fenced code, and a fenced file."""
    short = (CVDP / "completion.md").read_text()
    directed = f"```systemverilog\n{(CVDP / 'tb_attenuator.sv').read_text()}```\n"
    return [short, directed]


def train_bpe(texts: list[str], vocab_size: int, special_tokens: list[str]):
    """A byte-level BPE model (``tokenizers.Tokenizer``) trained on ``texts``; its merges may span
    spaces and newlines, so a testbench is a few hundred tokens. ``special_tokens`` come first in
    the vocabulary and are never split or merged."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=special_tokens,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return tok


def build_tokenizer(texts: list[str], vocab_size: int):
    """:func:`train_bpe` on ``texts`` as a ``PreTrainedTokenizerFast`` with EOS/PAD."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(texts, vocab_size, [PAD, EOS, ANSWER]),
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[ANSWER],
    )


def build_model(tokenizer, seed: int, max_positions: int = 1024):
    """A 2-layer Qwen2 decoder (~0.3 M parameters with a 768-token vocabulary) sized for CPU,
    for sequences of up to ``max_positions`` tokens."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def warm_start(
    model,
    tokenizer,
    rows: list[dict[str, str]],
    steps: int,
    workdir: str,
    seed: int,
    *,
    batch_size: int = 2,
    max_length: int = 1024,
) -> list[float]:
    """SFT on ``rows`` (``{"prompt", "completion"}`` text pairs; completion-only loss) until the
    model reproduces them; returns the logged losses (every 10 steps)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    data = Dataset.from_list(rows)
    config = SFTConfig(
        output_dir=os.path.join(workdir, "sft"),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        max_length=max_length,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    return [e["loss"] for e in trainer.state.log_history if "loss" in e]


class Recorded:
    """The reward function as TRL sees it (same name, same answers), keeping what it scored."""

    def __init__(self, reward: CoverageReward) -> None:
        self.reward, self.__name__, self.calls = reward, reward.__name__, []

    def __call__(self, prompts, completions, **columns):
        rewards = self.reward(prompts=prompts, completions=completions, **columns)
        self.calls.append({"completions": list(completions), "rewards": rewards})
        return rewards


def grpo(
    model, tokenizer, url: str, steps: int, generations: int, temperature: float, workdir: str, seed: int
) -> tuple[list[dict], Recorded]:
    """``steps`` GRPO steps, one prompt x ``generations`` completions each; returns TRL's log history."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    reward = Recorded(CoverageReward(url, timeout=600))
    data = Dataset.from_dict({"prompt": [PROMPT] * steps, "problem_id": [PROBLEM_ID] * steps})
    config = GRPOConfig(
        output_dir=os.path.join(workdir, "grpo"),
        max_steps=steps,
        per_device_train_batch_size=generations,
        num_generations=generations,
        max_completion_length=640,
        temperature=temperature,
        learning_rate=1e-5,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=[reward], args=config, train_dataset=data, processing_class=tokenizer
    )
    trainer.train()
    return trainer.state.log_history, reward


def trainer_arguments(
    doc: str | None, *, steps: int, generations: int, sft_steps: int, temperature: float
) -> argparse.ArgumentParser:
    """The options of the tiny trainer examples, with these defaults: ``--steps`` (GRPO steps),
    ``--generations`` (TRL ``num_generations``), ``--sft-steps``, ``--temperature``, ``--seed``,
    ``--log-history`` (a JSON file)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=steps, help="GRPO steps")
    parser.add_argument("--generations", type=int, default=generations, help="rollouts per step (num_generations)")
    parser.add_argument("--sft-steps", type=int, default=sft_steps, help="warm-start SFT steps")
    parser.add_argument("--temperature", type=float, default=temperature, help="sampling temperature of GRPO")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-history", type=Path, help="write the log history and what was scored here (JSON)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = trainer_arguments(__doc__, steps=4, generations=4, sft_steps=100, temperature=0.7)
    args = parser.parse_args(argv)

    import torch
    from transformers import set_seed

    torch.set_num_threads(1)  # a model this small runs slower on 2 threads (they wait on each other)
    set_seed(args.seed)
    url, _ = setup()
    started = time.monotonic()
    tokenizer = build_tokenizer([PROMPT, *answers()], vocab_size=768)
    model = build_model(tokenizer, args.seed)
    with tempfile.TemporaryDirectory() as workdir:
        rows = [{"prompt": PROMPT, "completion": a} for a in answers()] * 8
        sft_losses = warm_start(model, tokenizer, rows, args.sft_steps, workdir, args.seed)
        sft_s = time.monotonic() - started
        print(f"SFT: {args.sft_steps} steps in {sft_s:.0f} s, loss {sft_losses[0]:.3f} -> {sft_losses[-1]:.4f}")
        history, recorded = grpo(
            model, tokenizer, url, args.steps, args.generations, args.temperature, workdir, args.seed
        )
    steps = [e for e in history if "reward" in e]
    for i, (entry, call) in enumerate(zip(steps, recorded.calls)):
        print(
            f"GRPO step {i + 1}: reward mean {entry['reward']:.3f} std {entry['reward_std']:.3f}, "
            f"rewards {[None if r is None else round(r, 3) for r in call['rewards']]}"
        )
    print(f"total {time.monotonic() - started:.0f} s")
    if args.log_history:
        args.log_history.write_text(
            json.dumps(
                {
                    "log_history": history,
                    "scored": recorded.calls,
                    "sft_losses": sft_losses,
                    "vocab_size": len(tokenizer),
                    "parameters": sum(p.numel() for p in model.parameters()),
                    "prompt": PROMPT,
                    "problem_id": PROBLEM_ID,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
