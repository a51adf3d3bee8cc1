"""The adapters through the released trainers' own reward code (what runs without a GPU):
verl 0.9.1 (the reward-loop worker and ``naive`` manager, the legacy ``naive`` and ``batch``
managers, loading ``custom_reward_function`` from the adapter's file) on a ``DataProto`` built
here, and OpenRLHF 0.11.2's ``SingleTurnAgentExecutor`` (remote reward URL and Python-file
reward) against the live embedded service. Rewards must be 1 + overall coverage from the
shared cases' expected.json (bare simulator runs) for the testbenches and the chorus failure
value for an answer without code. slime is not on PyPI (docs/trainers.md): its shape test is in
test_adapters.py, and with $REWARD_SERVICE_SLIME_SRC naming a slime checkout (its `slime`
package folder's parent) the adapters also run through slime's own rm_hub. scripts/install.sh --test
installs verl and puts OpenRLHF's wheel (no dependencies: its pins need CUDA builds) in
$REWARD_SERVICE_TRAINER_PACKAGES."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import sys
from copy import deepcopy
from types import SimpleNamespace

import pytest
from conftest import CID012, STIMULUS, case_expected, embedded_service, free_port

from reward_service.adapters import openrlhf as openrlhf_adapter
from reward_service.adapters import verl as verl_adapter
from reward_service.client import RewardClient
from reward_service.models import CoverageReport, RewardSpec, Status
from reward_service.reward import shape_reward

sys.path.append(os.environ.get("REWARD_SERVICE_TRAINER_PACKAGES", "/opt/reward-service/trainer-packages"))
if os.environ.get("REWARD_SERVICE_SLIME_SRC"):  # slime from a git checkout: it is not on PyPI
    sys.path.append(os.environ["REWARD_SERVICE_SLIME_SRC"])


def _has_slime() -> bool:
    try:
        return importlib.util.find_spec("slime.rollout.rm_hub") is not None
    except ImportError:  # no `slime`, or PyPI's unrelated one
        return False


PROBLEMS = ["cvdp_copilot_Attenuator_0011", "cvdp_copilot_gray_to_binary_0014"]
FAILURE = shape_reward(Status.compile_error, CoverageReport(), False, RewardSpec())
NO_CODE = "I would reset the design and drive random inputs, then check the outputs."


def _expected(pid: str, kind: str) -> float:
    coverage = case_expected(pid)["testbenches"][kind]["coverage"]
    ratios = [m["covered"] / m["total"] for m in coverage.values() if m["total"]]
    return 1.0 + sum(ratios) / len(ratios)


@functools.cache
def _samples() -> list[tuple[str, str, float]]:
    """(problem id, response, expected reward): weak, good, no code for each problem."""
    out = []
    for pid in PROBLEMS:
        for kind in ("weak", "good"):
            out.append(
                (pid, f"```systemverilog\n{(STIMULUS / pid / f'{kind}.sv').read_text()}```", _expected(pid, kind))
            )
        out.append((pid, NO_CODE, FAILURE))
    return out


PROMPT = "Write a testbench.\n"


@pytest.fixture(scope="module")
def service(shared_cache_dir, tmp_path_factory):
    with embedded_service(shared_cache_dir, tmp_path_factory.mktemp("results")) as url:
        with RewardClient(url) as client:
            client.load_problems_jsonl(CID012)
        yield url


# The trainer packages (torch, transformers: the `trl` extra; verl: `trainers`; OpenRLHF's wheel in
# $REWARD_SERVICE_TRAINER_PACKAGES) are imported by the fixtures and tests that use them, so the
# module collects without them and those tests are skipped (scripts/install.sh --test installs them).
@pytest.fixture(scope="module")
def verl():
    """The verl package, or the test is skipped."""
    return pytest.importorskip("verl")


@pytest.fixture(scope="module")
def single_turn_executor():
    """OpenRLHF's SingleTurnAgentExecutor class, or the test is skipped."""
    return pytest.importorskip("openrlhf.utils.agent").SingleTurnAgentExecutor


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE tokenizer trained on the samples (no hub download)."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [PROMPT] + [s[1] for s in _samples()],
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=["<|pad|>", "<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")


# -- verl ---------------------------------------------------------------------------------------
def data_proto(tokenizer):
    """A verl rollout batch as the trainer hands it to the reward code: left-padded prompts,
    right-padded responses, attention mask over both, and the dataset's non-tensor fields."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from verl import DataProto

    prompt = tokenizer(PROMPT)["input_ids"]
    responses = [tokenizer(text)["input_ids"] + [tokenizer.eos_token_id] for _, text, _ in _samples()]
    width = max(map(len, responses))
    pad = tokenizer.pad_token_id
    resp = torch.tensor([r + [pad] * (width - len(r)) for r in responses])
    mask = torch.tensor([[1] * len(prompt) + [1] * len(r) + [0] * (width - len(r)) for r in responses])
    n = len(_samples())
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt] * n),
            "responses": resp,
            "attention_mask": mask,
            "input_ids": torch.cat([torch.tensor([prompt] * n), resp], dim=1),
        },
        non_tensors={
            "data_source": np.array(["cvdp_cid012"] * n, dtype=object),
            "reward_model": np.array(
                [{"ground_truth": pid, "style": "rule"} for pid, _, _ in _samples()], dtype=object
            ),
            "extra_info": np.array([{"index": i // 3} for i in range(n)], dtype=object),
        },
    )


def verl_config(url: str, name: str, tokenizer_dir: str | None = None):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": tokenizer_dir, "tokenizer_path": tokenizer_dir}},
            "reward": {
                "custom_reward_function": {
                    "path": verl_adapter.__file__,
                    "name": name,
                    "reward_kwargs": {"service_url": url},
                },
                "reward_manager": {"source": "register", "name": "naive"},
                "reward_model": {"enable": False},
                "sandbox_fusion": None,
            },
        }
    )


def last_token_rewards(reward_tensor, data) -> list[float]:
    prompt_len = data.batch["prompts"].shape[-1]
    lengths = data.batch["attention_mask"][:, prompt_len:].sum(-1)
    for i, length in enumerate(lengths.tolist()):  # everything but the last response token is 0
        row = reward_tensor[i].clone()
        row[length - 1] = 0
        assert not row.any()
    return [reward_tensor[i, length - 1].item() for i, length in enumerate(lengths.tolist())]


@pytest.mark.slow
def test_verl_reward_loop_worker(verl, tokenizer, service, tmp_path):
    """verl 0.9's default path: RewardLoopWorker (a Ray actor in a run; here the class itself) loads
    the custom reward function from the adapter file and scores each sample with the naive manager."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    tokenizer.save_pretrained(tmp_path / "tok")
    data = data_proto(tokenizer)
    for name in ("compute_score_async", "compute_score"):
        worker = RewardLoopWorker(verl_config(service, name, str(tmp_path / "tok")))
        out = worker.loop.run_until_complete(worker.compute_score_batch(data))
        assert [o["reward_score"] for o in out] == pytest.approx([e for _, _, e in _samples()], abs=1e-6), name


@pytest.mark.slow
def test_verl_legacy_reward_managers(verl, tokenizer, service):
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

    data = data_proto(tokenizer)
    expected = [e for _, _, e in _samples()]
    naive = NaiveRewardManager(tokenizer, 0, compute_score=get_custom_reward_fn(verl_config(service, "compute_score")))
    assert last_token_rewards(naive(data), data) == pytest.approx(expected, abs=1e-6)
    batch = BatchRewardManager(
        tokenizer, 0, compute_score=get_custom_reward_fn(verl_config(service, "compute_score_batch"))
    )
    got = batch(deepcopy(data), return_dict=True)
    assert last_token_rewards(got["reward_tensor"], data) == pytest.approx(expected, abs=1e-6)


# -- OpenRLHF -----------------------------------------------------------------------------------
class OneAnswerEngine:
    """Stands in for vLLM (GPU only): answers each prompt with the next prepared token ids."""

    def __init__(self, token_ids: list[list[int]]):
        self.token_ids = list(token_ids)

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        ids = self.token_ids.pop(0)
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=None, finish_reason="stop", logprobs=None)])


def run_openrlhf(executor, tokenizer) -> list[dict]:
    engine = OneAnswerEngine([tokenizer(text, add_special_tokens=False)["input_ids"] for _, text, _ in _samples()])
    params = SimpleNamespace(max_tokens=None, logprobs=None)

    async def rollout():
        return [await executor.execute(PROMPT, pid, params, 4096, tokenizer, engine) for pid, _, _ in _samples()]

    return asyncio.run(rollout())


@pytest.mark.slow
def test_openrlhf_remote_reward_url(single_turn_executor, tokenizer, service):
    """OpenRLHF's single-turn executor: decodes prompt + response, POSTs it to --reward.remote_url."""
    out = run_openrlhf(single_turn_executor(f"{service}/v1/openrlhf/reward"), tokenizer)
    assert [o["reward"] for o in out] == [pytest.approx([e], abs=1e-6) for _, _, e in _samples()]
    assert [o["scores"] for o in out] == [pytest.approx([max(0.0, e - 1.0)], abs=1e-6) for _, _, e in _samples()]
    assert all(set(o["extra_logs"]) == {"coverage", "passed", "no_coverage"} for o in out)
    # many queries, two servers: OpenRLHF shards one batch between the URLs
    both = single_turn_executor([f"{service}/v1/openrlhf/reward"] * 2)
    parts = asyncio.run(
        both._fetch_rewards_via_http(
            [PROMPT + t for _, t, _ in _samples()], [PROMPT] * len(_samples()), [pid for pid, _, _ in _samples()]
        )
    )
    assert [r for p in parts for r in p["rewards"]] == pytest.approx([e for _, _, e in _samples()], abs=1e-6)


@pytest.mark.slow
def test_openrlhf_python_file_reward(single_turn_executor, tokenizer, service, monkeypatch):
    """--reward.remote_url path/to/reward_service/adapters/openrlhf.py: OpenRLHF loads reward_func from the file."""
    monkeypatch.setenv("REWARD_SERVICE_URL", service)
    executor = single_turn_executor(openrlhf_adapter.__file__)
    out = run_openrlhf(executor, tokenizer)
    assert [float(o["reward"][0]) for o in out] == pytest.approx([e for _, _, e in _samples()], abs=1e-6)


def test_openrlhf_swallows_a_failed_reward(single_turn_executor, tokenizer):
    """OpenRLHF 0.11.2 logs a reward request that failed after its 5 tries and leaves the reward None
    (docs/trainers.md): not 0, and its experience maker then stops on the missing reward."""
    down = f"http://127.0.0.1:{free_port()}/v1/openrlhf/reward"
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    engine = OneAnswerEngine([tokenizer(NO_CODE)["input_ids"]])
    out = asyncio.run(single_turn_executor(down).execute(PROMPT, PROBLEMS[0], params, 4096, tokenizer, engine))
    assert out["reward"] is None and out["scores"] is None


# -- slime --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not _has_slime(), reason="slime is not on PyPI: set REWARD_SERVICE_SLIME_SRC to a slime checkout")
def test_slime_rm_hub(service):
    """slime's own reward entry points: `async_rm` per sample and `batched_async_rm` per group,
    each loading our function from --custom-rm-path, on slime's Sample. Skipped without a slime
    checkout (PyPI's `slime` is an unrelated package)."""
    from slime.rollout import rm_hub
    from slime.utils.types import Sample

    samples = [
        Sample(prompt=PROMPT, response=text, label=pid, index=i, group_index=i // 3)
        for i, (pid, text, _) in enumerate(_samples())
    ]
    expected = [e for _, _, e in _samples()]
    args = SimpleNamespace(
        custom_rm_path="reward_service.adapters.slime.reward_func", rm_type=None, reward_service_url=service
    )

    async def per_sample():
        return await asyncio.gather(*[rm_hub.async_rm(args, s) for s in samples])

    assert asyncio.run(per_sample()) == pytest.approx(expected, abs=1e-6)
    grouped = SimpleNamespace(**{**vars(args), "custom_rm_path": "reward_service.adapters.slime.batched_reward_func"})

    async def per_group():
        return await asyncio.gather(*[rm_hub.batched_async_rm(grouped, samples[i : i + 3]) for i in range(0, 6, 3)])

    assert [r for group in asyncio.run(per_group()) for r in group] == pytest.approx(expected, abs=1e-6)
