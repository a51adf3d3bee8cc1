"""Shared plumbing of the Redis-backed stores (problems, batches): one client per store,
Redis errors translated into the store's own exception at the boundary, ping and close."""

from __future__ import annotations

from typing import Any


class RedisBacked:
    """Mixin for a store kept in Redis under ``prefix``. Subclasses set ``error`` (the exception
    raised when Redis cannot answer) and ``what`` (named in its message)."""

    error: type[Exception] = RuntimeError
    what: str = "store"

    def __init__(self, url: str | None = None, prefix: str = "reward-service:", client: Any = None) -> None:
        if client is None:
            import redis  # lazy: embedded mode does not need it

            if not url:
                raise ValueError(f"{type(self).__name__} needs a redis:// URL or a client")
            client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        self.client = client
        self.prefix = prefix

    def _call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with ``redis.RedisError`` raised as ``self.error``."""
        import redis

        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise self.error(f"{self.what} (Redis) unavailable: {exc}") from exc

    def ping(self) -> str:
        """ "ok", or why Redis does not answer."""
        try:
            self._call(self.client.ping)
        except self.error as exc:
            return str(exc)
        return "ok"

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass
