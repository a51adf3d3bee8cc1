"""Service settings (pydantic-settings), read once through :func:`get_settings`.

Environment variables use the ``REWARD_SERVICE_`` prefix, e.g. ``REWARD_SERVICE_CACHE_DIR``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reward-service"


class Settings(BaseSettings):
    """Where caches live, which sandbox runs simulations, and how the HTTP service behaves."""

    model_config = SettingsConfigDict(env_prefix="REWARD_SERVICE_")

    cache_dir: Path = Field(default_factory=_default_cache_dir, description="ccache, built cocotb models, results")
    work_root: Path | None = Field(None, description="parent of per-sample work dirs (default: system temp)")
    sandbox: Literal["bwrap", "docker"] = Field(
        "bwrap",
        description="sandbox backend: bwrap (bubblewrap on this machine) or docker (a container "
        "of sim_image per step, through the Docker socket; docs/sandbox.md)",
    )
    step_root: Literal["auto", "minimal", "system"] = Field(
        "auto",
        description="bwrap sandbox: what an Icarus step sees of the system: 'minimal' a private "
        "copy of its programs and their libraries (13 MB, made once per process), 'system' the "
        "whole read-only /usr, 'auto' the copy where /usr is on FUSE (a fuse-overlayfs container)",
    )
    sim_image: str = Field(
        "reward-service-sim:latest", description="docker sandbox: the simulation image (scripts/build_images.sh)"
    )
    docker_volume_prefix: str = Field(
        "reward-service",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$",
        description="docker sandbox: name prefix of its containers and volumes (ccache: <prefix>-ccache)",
    )
    docker_cpus: float = Field(1.0, gt=0, description="docker sandbox: CPUs of one sim container")
    result_cache: bool = Field(True, description="reuse results of identical requests")
    build_jobs: int = Field(2, ge=1, description="parallel C++ compile jobs of one Verilator build")
    fastcov_shadow_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of fast-path samples also scored on Verilator and diffed "
        "point by point (shadow check, docs/fastcov.md)",
    )
    cvdp_engine: Literal["verilator", "fast", "auto"] | None = Field(
        "auto",
        description="engine of the CVDP problems loaded from JSONL (auto: the fast path for designs "
        "whose self-check agrees with Verilator; unset or verilator: Verilator)",
    )
    fastcov_self_check: bool = Field(
        True,
        description="engine=auto: a design uses the fast path only after a self-check against "
        "Verilator agreed (one Verilator build per design, cached)",
    )

    # -- service (reward_service.api) -----------------------------------------------------------
    broker_url: str | None = Field(
        None, description="Celery broker (redis://...); unset = embedded mode (in-process pool, no Redis)"
    )
    redis_url: str | None = Field(
        None, description="Redis for the problem and batch stores (default: broker_url when it is redis://)"
    )
    redis_prefix: str = Field("reward-service:", description="key prefix in Redis (problems, batches, jobs)")
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="accepted bearer API keys, comma-separated; empty = no authentication"
    )
    score_workers: int | None = Field(
        None, ge=1, description="embedded mode: parallel simulations (default: one per core)"
    )
    max_queue: int = Field(
        8192,
        ge=1,
        description="embedded mode: pending jobs before 429 (at least max_batch, so that a "
        "batch the API accepts fits; a larger batch is refused with 413)",
    )
    default_wait_s: float = Field(60.0, ge=0, le=600, description="POST /v1/score wait when none is given")
    max_wait_s: float = Field(600.0, ge=0, le=3600, description="largest accepted `wait`")
    max_body_mb: float = Field(8.0, gt=0, description="largest request body (413 beyond)")
    max_bulk_body_mb: float = Field(
        64.0, gt=0, description="largest body of POST /v1/batches and /v1/problems:load (413 beyond)"
    )
    max_files: int = Field(64, ge=1, description="design + stimulus files of one request (422 beyond)")
    warm_on_register: bool = Field(
        True,
        description="registering a Verilator problem queues a build of its DUT model (cocotb "
        "stimulus then only runs); SV testbench builds cannot be prebuilt, ccache serves them",
    )
    max_file_kb: int = Field(1024, ge=1, description="largest file (or completion text) of a request (422 beyond)")
    max_batch: int = Field(4096, ge=1, description="requests of one batch (422 beyond)")
    batch_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="how long the Redis batch store keeps a batch")
    episode_ttl_s: int = Field(
        24 * 3600, ge=60, description="how long an episode is kept after its last step (docs/episodes.md)"
    )
    max_waiting: int = Field(1024, ge=1, description="requests waiting for results at once (threads)")

    # -- workers (workers/, reward_service.dispatch.celery; docs/workers.md) ---------------------
    result_backend: str | None = Field(None, description="Celery result backend (redis://...; default: broker_url)")
    worker_concurrency: int | None = Field(
        None,
        ge=1,
        description="processes of one `python -m workers` (default: the cores it may use; "
        "with several worker containers on one host: cores / containers)",
    )
    task_soft_time_limit_s: float | None = Field(
        None,
        gt=0,
        description="Celery soft time limit of a score task (default: the largest "
        "Limits.compile_s + Limits.run_s + 60 s)",
    )
    task_time_limit_s: float | None = Field(
        None, gt=0, description="Celery hard time limit (default: soft limit + 30 s)"
    )
    visibility_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Redis visibility timeout: an unacknowledged job is redelivered after it "
        "(default: hard limit + 300 s; must exceed the hard limit)",
    )
    worker_heartbeat_file: str | None = Field(
        None,
        description="a file the worker touches every 5 s while it takes jobs and removes when it "
        "stops: the container's health check reads its age (workers/liveness.py; none by default)",
    )
    result_expires_s: int = Field(24 * 3600, ge=60, description="how long Redis keeps a job's result")
    task_max_retries: int = Field(2, ge=0, description="retries of a job that ended in sandbox_error")
    task_retry_backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles per retry")
    lease_s: float = Field(
        6.0,
        gt=0,
        le=300,
        description="lease of a running job, renewed by its worker every lease_s/4: a job "
        "whose lease lapses (its worker died) is requeued within about lease_s + 1 s",
    )
    lease_max_requeues: int = Field(
        3,
        ge=0,
        description="requeues of a job whose worker died while running it before the job ends "
        "as sandbox_error (a sample that kills its worker each time)",
    )
    celery_max_queue: int = Field(10_000, ge=1, description="service mode: queued + running jobs before 429")

    @field_validator("worker_concurrency", "worker_heartbeat_file", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value  # compose passes unset variables as ""

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value

    @property
    def store_url(self) -> str | None:
        """Redis URL of the problem and batch stores, or None (in-memory)."""
        if self.redis_url:
            return self.redis_url
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://", "unix://")):
            return self.broker_url
        return None

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.default_wait_s > self.max_wait_s:
            raise ValueError(f"default_wait_s ({self.default_wait_s:g}) exceeds max_wait_s ({self.max_wait_s:g})")
        return self


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (environment read on first call, not at import)."""
    return Settings()
