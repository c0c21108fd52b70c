"""Opens the ZVM token cache: files in the state directory, or Redis for gateway replicas.

Its own module because the Redis cache imports ``auth`` (the token type), and
``auth`` must not import it back.
"""

from __future__ import annotations

from .auth import TokenCache, TokenCacheLike

__all__ = ["open_token_cache"]


def open_token_cache(
    state_url: str | None, state_dir: str, *, prefix: str | None = None
) -> TokenCacheLike:
    """The Redis token cache when ``state_url`` is set, else the files under ``state_dir``.

    ``prefix`` namespaces the Redis keys (default ``zerto-rewind:``). Nothing
    connects until first use.
    """
    if not state_url:
        return TokenCache(state_dir)
    from .token_redis import RedisTokenCache

    return RedisTokenCache(state_url, prefix=prefix)
