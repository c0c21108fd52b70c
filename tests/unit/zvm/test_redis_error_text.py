"""What a Redis failure says (zvm/redis_conn.py): the URL's password hidden, paths whole."""

from __future__ import annotations

import pytest
from redis import exceptions

from zerto_rewind.errors import StateError
from zerto_rewind.zvm.redis_conn import redis_errors_as_state_errors


def said(url: str, error: Exception) -> str:
    with pytest.raises(StateError) as info, redis_errors_as_state_errors(url):
        raise error
    return str(info.value)


def test_a_password_inside_a_longer_name_leaves_the_path_whole() -> None:
    """Password ``user``: the socket path under /home/newuser is not /home/new***."""
    url = "unix:///home/newuser/redis.sock?password=user"
    error = exceptions.ConnectionError(
        "Error 2 connecting to unix socket: /home/newuser/redis.sock. No such file or directory."
    )
    text = said(url, error)
    assert "connecting to unix socket: /home/newuser/redis.sock" in text
    assert "***" not in text


def test_the_password_as_a_token_is_hidden() -> None:
    url = "redis://zr:s3cret-pw@127.0.0.1:6379/0"
    text = said(url, exceptions.AuthenticationError("invalid password s3cret-pw for user zr"))
    assert "s3cret-pw" not in text
    assert "invalid password *** for user zr" in text
