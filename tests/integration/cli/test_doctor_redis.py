"""``doctor`` on the Redis of ``state.url``: real redis-servers, with and without a password."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from support.redis_server import RedisServer
from zerto_rewind.cli.doctor import Check
from zerto_rewind.cli.doctor.redis_state import redis_checks
from zerto_rewind.config import Settings, load_settings

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
PASSWORD = "doctor-redis-pw"


@pytest.fixture(scope="module")
def open_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """No password, and a socket in a directory every user may search (as /run/redis often is)."""
    sockets = Path(tempfile.mkdtemp(prefix="zr-doctor-redis-", dir="/tmp"))
    sockets.chmod(0o755)
    try:
        directory = tmp_path_factory.mktemp("open")
        with RedisServer(directory, socket_perm=0o777, socket_dir=sockets) as server:
            yield server
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


@pytest.fixture(scope="module")
def closed_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    directory = tmp_path_factory.mktemp("closed")
    with RedisServer(directory, password=PASSWORD, socket_perm=0o700) as server:
        yield server


def settings(tmp_path: Path, state: dict[str, Any]) -> Settings:
    path = write_config(tmp_path, {"zvm": ZVM, "state": state})
    return load_settings({"HOME": str(tmp_path), "ZS": "x"}, path=str(path))


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def password_file(tmp_path: Path, text: str = PASSWORD) -> str:
    path = tmp_path / "redis-password"
    path.write_text(text)
    os.chmod(path, 0o600)
    return str(path)


def test_a_redis_that_answers_without_a_password_fails(
    tmp_path: Path, open_redis: RedisServer
) -> None:
    state = {"url": open_redis.url, "allow_unauthenticated_redis": True}
    checks = by_name(redis_checks(settings(tmp_path, state)))
    auth = checks["redis authentication"]
    assert auth.status == "fail"
    assert "answers a connection without a password" in auth.detail
    assert "state.password_file" in auth.fix
    transport = checks["redis transport"]
    assert transport.status == "warn"
    assert "any local user" in transport.detail


def test_a_redis_with_a_password_passes_without_showing_it(
    tmp_path: Path, closed_redis: RedisServer
) -> None:
    url = f"redis://127.0.0.1:{closed_redis.port}/0"
    checks = redis_checks(
        settings(tmp_path, {"url": url, "password_file": password_file(tmp_path)})
    )
    auth = by_name(checks)["redis authentication"]
    assert auth.status == "pass", auth
    assert all(PASSWORD not in f"{c.detail} {c.fix}" for c in checks)


def test_a_wrong_password_fails(tmp_path: Path, closed_redis: RedisServer) -> None:
    url = f"redis://127.0.0.1:{closed_redis.port}/0"
    state = {"url": url, "password_file": password_file(tmp_path, "not-it")}
    auth = by_name(redis_checks(settings(tmp_path, state)))["redis authentication"]
    assert auth.status == "fail"
    assert "not-it" not in auth.detail


def test_a_socket_any_user_may_open_warns_a_closed_one_passes(
    tmp_path: Path, open_redis: RedisServer, closed_redis: RedisServer
) -> None:
    wide = {"url": f"unix://{open_redis.socket_path}", "allow_unauthenticated_redis": True}
    checks = by_name(redis_checks(settings(tmp_path, wide)))
    assert checks["redis transport"].status == "warn"
    assert checks["redis authentication"].status == "fail"
    narrow = {"url": f"unix://{closed_redis.socket_path}", "password_env": "ZR_PW"}
    os.environ["ZR_PW"] = PASSWORD
    try:
        checks = by_name(redis_checks(settings(tmp_path, narrow)))
    finally:
        del os.environ["ZR_PW"]
    assert checks["redis transport"].status == "pass", checks["redis transport"]
    assert checks["redis authentication"].status == "pass", checks["redis authentication"]


def test_no_state_url_no_redis_check(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"zvm": ZVM})
    assert redis_checks(load_settings({"HOME": str(tmp_path), "ZS": "x"}, path=str(path))) == []
