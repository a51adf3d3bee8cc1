"""Service settings (pydantic-settings), read once through :func:`get_settings`.

Environment variables use the ``REWARD_SERVICE_`` prefix, e.g. ``REWARD_SERVICE_CACHE_DIR``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reward-service"


class Settings(BaseSettings):
    """Where caches live and which sandbox runs simulations."""

    model_config = SettingsConfigDict(env_prefix="REWARD_SERVICE_")

    cache_dir: Path = Field(default_factory=_default_cache_dir,
                            description="ccache, built cocotb models, results")
    work_root: Path | None = Field(None, description="parent of per-sample work dirs (default: system temp)")
    sandbox: str = Field("bwrap", description="sandbox backend: bwrap")
    result_cache: bool = Field(True, description="reuse results of identical requests")
    build_jobs: int = Field(2, ge=1, description="parallel C++ compile jobs of one Verilator build")


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (environment read on first call, not at import)."""
    return Settings()
