"""The Keycloak token provider and the cross-process token cache."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from unit.zvm.zvm_fakes import SECRET, FakeClock, FakeZvm, make_settings
from zerto_rewind.zvm import TokenCache, ZvmClient
from zerto_rewind.zvm.auth import CachedToken, identity_key


def _client(zvm: FakeZvm, cache: TokenCache, **settings: object) -> ZvmClient:
    zvm.route("GET", "/v1/localsite", {})
    return ZvmClient(
        make_settings(**settings), token_cache=cache, transport=httpx.MockTransport(zvm)
    )


def test_token_file_reused_by_a_new_client(zvm: FakeZvm, tmp_path: Path) -> None:
    """A second client (as in a second process) reuses the cached token."""
    cache = TokenCache(str(tmp_path))
    with _client(zvm, cache) as first:
        first.local_site()
    with _client(zvm, cache) as second:
        second.local_site()
    assert zvm.tokens_issued == 1


@pytest.mark.parametrize(("lifetime", "reused_until"), [(300, 270), (60, 54), (3600, 3570)])
def test_token_refreshed_near_expiry(
    zvm: FakeZvm, tmp_path: Path, lifetime: int, reused_until: int
) -> None:
    """A token is reused until expires_in minus min(30 s, 10 %), then refetched."""
    wall = FakeClock(1_700_000_000.0)
    cache = TokenCache(str(tmp_path), wall_clock=wall)
    zvm.expires_in = lifetime
    start = wall.now
    with _client(zvm, cache) as c:
        c.local_site()
        wall.now = start + reused_until - 0.5
        c.local_site()
        assert zvm.tokens_issued == 1
        wall.now = start + reused_until
        c.local_site()
        assert zvm.tokens_issued == 2


def test_cache_file_private_and_without_secrets(zvm: FakeZvm, tmp_path: Path) -> None:
    """The cache file is 0600 in a 0700 dir, hash-named, without secret or refresh token."""
    cache = TokenCache(str(tmp_path / "state"))
    with _client(zvm, cache) as c:
        c.local_site()
    files = list((tmp_path / "state" / "tokens").glob("*.json"))
    assert len(files) == 1
    path = files[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert SECRET not in text
    assert SECRET not in path.name
    assert "refresh-secret" not in text
    assert set(json.loads(text)) == {"access_token", "token_type", "expires_at", "refresh_at"}


def test_identities_get_separate_files() -> None:
    """URL, grant, client id and username each select a different cache file."""
    base = make_settings()
    variants = [
        base,
        make_settings(url="https://other:443"),
        make_settings(client_id="other"),
        make_settings(grant="password", client_id="zerto-client", username="a"),
        make_settings(grant="password", client_id="zerto-client", username="b"),
    ]
    keys = {identity_key(s) for s in variants}
    assert len(keys) == len(variants)
    assert identity_key(make_settings(secret_source=("inline", "changed"))) == identity_key(base)
    assert all(len(k) == 64 and SECRET not in k for k in keys)


def test_store_replaces_file_atomically(tmp_path: Path) -> None:
    """Storing a token replaces the file (new inode), leaving no temp files."""
    cache = TokenCache(str(tmp_path))
    cache.store("k", CachedToken.issued("a", "Bearer", 300, time.time()))
    before = os.stat(cache.path("k")).st_ino
    cache.store("k", CachedToken.issued("b", "Bearer", 300, time.time()))
    assert os.stat(cache.path("k")).st_ino != before
    assert sorted(p.name for p in (tmp_path / "tokens").iterdir()) == ["k.json"]
    loaded = cache.load("k")
    assert loaded is not None
    assert loaded.access_token == "b"


@pytest.mark.parametrize("content", [b"{not json", b"", b'{"access_token": 5}', b"[]"])
def test_corrupted_cache_is_rebuilt(zvm: FakeZvm, tmp_path: Path, content: bytes) -> None:
    """A corrupted or wrong-shaped cache file is replaced by a freshly fetched token."""
    cache = TokenCache(str(tmp_path))
    key = identity_key(make_settings())
    Path(cache.path(key)).write_bytes(content)
    with _client(zvm, cache) as c:
        c.local_site()
    assert zvm.tokens_issued == 1
    assert json.loads(Path(cache.path(key)).read_text())["access_token"] == "tok-1"


def test_invalidate_drops_only_the_rejected_token(tmp_path: Path, zvm: FakeZvm) -> None:
    """Invalidation deletes the cache file only if it still holds the rejected token."""
    cache = TokenCache(str(tmp_path))
    with _client(zvm, cache) as c:
        c.local_site()
        provider = c._tokens
        key = provider.key
        cache.store(key, CachedToken.issued("newer", "Bearer", 300, time.time()))
        provider.invalidate("tok-1")
        loaded = cache.load(key)
        assert loaded is not None
        assert loaded.access_token == "newer"
        provider.invalidate("newer")
        assert cache.load(key) is None


def test_401_clears_shared_cache(zvm: FakeZvm, tmp_path: Path) -> None:
    """After a 401 the new token replaces the rejected one in the shared cache."""
    cache = TokenCache(str(tmp_path))
    with _client(zvm, cache) as c:
        c.local_site()
        zvm.valid_tokens.clear()
        c.local_site()
    loaded = cache.load(identity_key(make_settings()))
    assert loaded is not None
    assert loaded.access_token == "tok-2"


# ------------------------------------------------------------------ many processes


class _TokenServer(BaseHTTPRequestHandler):
    count = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with _TokenServer.lock:
            _TokenServer.count += 1
            n = _TokenServer.count
        time.sleep(0.3)  # widen the window in which racing processes would all fetch
        body = json.dumps(
            {"access_token": f"tok-{n}", "expires_in": 300, "token_type": "Bearer"}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def token_server() -> Iterator[str]:
    """A plain-HTTP token endpoint in a thread that counts requests."""
    _TokenServer.count = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


CHILD = """
import sys, time
from zerto_rewind.config import ZvmSettings
from zerto_rewind.zvm import TokenCache, ZvmClient
url, state, go = sys.argv[1:4]
while time.time() < float(go):
    time.sleep(0.001)
settings = ZvmSettings(url=url, grant="client_credentials", client_id="rewind", username=None,
                       secret_source=("inline", "s3cret-value"))
client = ZvmClient(settings, token_cache=TokenCache(state))
print(client._tokens.token(time.monotonic() + 30))
"""


@pytest.mark.slow
def test_many_processes_fetch_one_token(token_server: str, tmp_path: Path) -> None:
    """Twenty processes starting at the same moment make one token request and share it."""
    go = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, token_server, str(tmp_path), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(20)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    assert {out.strip() for out, _ in outputs} == {"tok-1"}
    assert _TokenServer.count == 1
