"""The state protocol the guard and the tagger use, and the choice between its two backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zerto_rewind.core.state import GuardState, GuardStateLike
from zerto_rewind.core.state_redis import RedisGuardState
from zerto_rewind.core.state_store import open_state
from zerto_rewind.errors import ConfigError
from zerto_rewind.zvm.auth import TokenCache, TokenCacheLike
from zerto_rewind.zvm.redis_conn import connect, redacted_url
from zerto_rewind.zvm.token_redis import RedisTokenCache

# Nothing listens here; nothing below connects.
UNUSED_URL = "redis://:pw@127.0.0.1:9/0"


def test_the_file_state_satisfies_the_protocol(tmp_path: Path) -> None:
    """Without a URL the state is the directory, and it is a GuardStateLike with its token files."""
    state = open_state(None, str(tmp_path / "state"))
    assert isinstance(state, GuardState)
    assert isinstance(state, GuardStateLike)
    with state.vpg("vpg-1") as record:
        record.vpg_name = "One"
    assert state.peek_vpg("vpg-1").vpg_name == "One"
    state.store("vms", "k", [["a", "b"]])
    assert state.cached("vms", "k", 60) == [["a", "b"]]
    state.check()
    cache = state.token_cache()
    assert isinstance(cache, TokenCache)
    assert isinstance(cache, TokenCacheLike)
    assert cache.directory == str(tmp_path / "state" / "tokens")


def test_the_redis_state_satisfies_the_protocol_without_connecting() -> None:
    """A URL gives the Redis state; building it (and its token cache) opens no connection."""
    state = open_state(UNUSED_URL, "/nonexistent", prefix="p:")
    assert isinstance(state, RedisGuardState)
    assert isinstance(state, GuardStateLike)
    assert state.prefix == "p:"
    cache = state.token_cache()
    assert isinstance(cache, RedisTokenCache)
    assert isinstance(cache, TokenCacheLike)
    assert cache.prefix == "p:"


def test_the_hook_path_never_imports_redis() -> None:
    """Redis is imported when a Redis state is opened, not by importing the guard or the client."""
    code = (
        "import sys\n"
        "import zerto_rewind.core.guard, zerto_rewind.core.state_redis\n"
        "import zerto_rewind.core.state_store, zerto_rewind.zvm.client\n"
        "import zerto_rewind.zvm.token_redis, zerto_rewind.zvm.token_store\n"
        "print('redis' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@10.0.0.5:6379/2", "redis://10.0.0.5:6379/2"),
        ("rediss://guard:s3cret@redis.example:6380/0", "rediss://guard@redis.example:6380/0"),
        ("redis://10.0.0.5/0?password=s3cret", "redis://10.0.0.5/0"),
        ("redis://[::1]:6379", "redis://[::1]:6379"),
        ("unix:///run/redis/redis.sock?db=1&password=s3cret", "unix:///run/redis/redis.sock"),
    ],
)
def test_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    """What messages show of a Redis URL: scheme, user, host, port, path; never the password."""
    assert redacted_url(url) == shown


def test_a_url_that_is_not_redis_is_a_config_error() -> None:
    """A wrong scheme names state.url, and not the password."""
    with pytest.raises(ConfigError, match=r"state\.url") as caught:
        connect("http://:s3cret@127.0.0.1:6379/0")
    assert "s3cret" not in str(caught.value)
