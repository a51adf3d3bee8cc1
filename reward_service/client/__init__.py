"""Python client of the reward service (httpx): sync and async, pooled connections, retries
with backoff on connection errors/429/502/503/504 (tenacity), 202 + job polling, batches in
request order. See docs/client.md.

```python
from reward_service.client import RewardClient

with RewardClient("http://127.0.0.1:8000") as client:
    client.load_problems_jsonl("cid012.jsonl")
    results = client.score_batch(
        [{"problem_id": pid, "stimulus": {"kind": "completion", "text": text}} for pid, text in samples],
        groups=[prompt_id for prompt_id, _ in samples])
```

An infrastructure failure is never a reward of 0: a result with status ``sandbox_error`` has
``reward=None`` (or raises :class:`InfrastructureFailure` with ``raise_on_infra=True``), and an
unreachable service raises :class:`ServiceUnavailable`.
"""

from reward_service.client._flows import chunks
from reward_service.client.aio import AsyncRewardClient
from reward_service.client.errors import (
    InfrastructureFailure,
    InvalidRequest,
    RequestFailed,
    RewardServiceError,
    ScoreTimeout,
    ServiceUnavailable,
)
from reward_service.client.sync import RewardClient
from reward_service.models import ScoreRequest, ScoreResult, Status

__all__ = [
    "RewardClient",
    "AsyncRewardClient",
    "RewardServiceError",
    "ServiceUnavailable",
    "RequestFailed",
    "InvalidRequest",
    "ScoreTimeout",
    "InfrastructureFailure",
    "ScoreRequest",
    "ScoreResult",
    "Status",
    "chunks",
]
