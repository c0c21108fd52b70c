"""No httpx, ssl or json exception escapes the ZVM client: each maps into the error tree."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import httpx
import pytest

from unit.zvm.zvm_fakes import SECRET, URL, FakeClock, make_settings
from zerto_rewind.errors import (
    ApiError,
    ConfigError,
    ZertoRewindError,
    ZvmConnectionError,
    ZvmTimeout,
    ZvmTlsError,
)
from zerto_rewind.zvm import ZvmClient


def _cert_error(request: httpx.Request) -> Exception:
    cause = ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed certificate"
    )
    exc = httpx.ConnectError("certificate verify failed", request=request)
    exc.__cause__ = cause
    return exc


def _simple(cls: type[Exception]) -> Callable[[httpx.Request], Exception]:
    def make(request: httpx.Request) -> Exception:
        if issubclass(cls, httpx.RequestError):
            return cls("boom", request=request)
        return cls("boom")

    return make


CASES: list[tuple[str, Callable[[httpx.Request], Exception], type[ZertoRewindError]]] = [
    ("ConnectError", _simple(httpx.ConnectError), ZvmConnectionError),
    ("ConnectTimeout", _simple(httpx.ConnectTimeout), ZvmTimeout),
    ("ReadTimeout", _simple(httpx.ReadTimeout), ZvmTimeout),
    ("WriteTimeout", _simple(httpx.WriteTimeout), ZvmTimeout),
    ("PoolTimeout", _simple(httpx.PoolTimeout), ZvmTimeout),
    ("ReadError", _simple(httpx.ReadError), ZvmConnectionError),
    ("WriteError", _simple(httpx.WriteError), ZvmConnectionError),
    ("CloseError", _simple(httpx.CloseError), ZvmConnectionError),
    ("RemoteProtocolError", _simple(httpx.RemoteProtocolError), ZvmConnectionError),
    ("LocalProtocolError", _simple(httpx.LocalProtocolError), ZvmConnectionError),
    ("ProxyError", _simple(httpx.ProxyError), ZvmConnectionError),
    ("UnsupportedProtocol", _simple(httpx.UnsupportedProtocol), ConfigError),
    ("DecodingError", _simple(httpx.DecodingError), ApiError),
    ("TooManyRedirects", _simple(httpx.TooManyRedirects), ApiError),
    ("InvalidURL", _simple(httpx.InvalidURL), ZvmConnectionError),
    ("OSError", _simple(OSError), ZvmConnectionError),
    ("ssl.SSLError", _simple(ssl.SSLError), ZvmTlsError),
    ("SSLCertVerificationError in ConnectError", _cert_error, ZvmTlsError),
]


@pytest.mark.parametrize(("name", "make", "expected"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("at", ["token", "api"])
def test_exception_is_mapped(
    name: str, make: Callable[[httpx.Request], Exception], expected: type[ZertoRewindError], at: str
) -> None:
    """Each transport exception, at the token endpoint or an API call, becomes the mapped error."""
    clock = FakeClock()

    def handler(request: httpx.Request) -> httpx.Response:
        if at == "api" and "/auth/" in request.url.path:
            return httpx.Response(200, json={"access_token": "t", "expires_in": 300})
        raise make(request)

    client = ZvmClient(
        make_settings(), transport=httpx.MockTransport(handler), clock=clock, sleep=clock.sleep
    )
    with client, pytest.raises(ZertoRewindError) as info:
        client.local_site()
    assert type(info.value) is expected, f"{name} → {type(info.value).__name__}"
    assert not isinstance(info.value, httpx.HTTPError)
    assert info.value.__cause__ is not None


def test_tls_message_says_what_to_do() -> None:
    """A certificate failure says to set zvm.ca_bundle and is not retried."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise _cert_error(request)

    clock = FakeClock()
    client = ZvmClient(
        make_settings(), transport=httpx.MockTransport(handler), clock=clock, sleep=clock.sleep
    )
    with client, pytest.raises(ZvmTlsError, match=r"zvm\.ca_bundle") as info:
        client.local_site()
    assert "self-signed" in str(info.value)
    assert len(calls) == 1


def test_every_httpx_exception_class_is_covered() -> None:
    """The mapping test covers every concrete httpx request/transport exception."""
    covered = {name for name, _, _ in CASES}
    concrete = {
        name
        for name in dir(httpx)
        if isinstance(getattr(httpx, name), type)
        and issubclass(getattr(httpx, name), httpx.RequestError)
        and not getattr(httpx, name).__subclasses__()
    }
    assert concrete <= covered, concrete - covered


def test_bad_ca_bundle_is_config_error(tmp_path: object) -> None:
    """An unreadable CA bundle is a ConfigError naming zvm.ca_bundle."""
    with pytest.raises(ConfigError, match=r"zvm\.ca_bundle"):
        ZvmClient(make_settings(ca_bundle="/nonexistent/ca.pem"))


def test_a_site_s_hints_name_the_key_its_config_has() -> None:
    """A site of an estate is set under zvms.SITE: its hints say zvms.dr.url, not zvm.url."""
    clock = FakeClock()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    settings = make_settings(site="dr", config_key="zvms.dr")
    client = ZvmClient(
        settings, transport=httpx.MockTransport(refuse), clock=clock, sleep=clock.sleep
    )
    with client, pytest.raises(ZvmConnectionError) as info:
        client.local_site()
    assert "check zvms.dr.url and the network" in str(info.value)
    assert "zvm.url" not in str(info.value)
    with pytest.raises(ConfigError) as bad_ca:
        ZvmClient(make_settings(ca_bundle="/nonexistent/ca.pem", config_key="zvms.dr"))
    assert bad_ca.value.key == "zvms.dr.ca_bundle"


def test_the_parser_records_each_site_s_config_key(tmp_path: object) -> None:
    """zvm → zvm; zvms.dr → zvms.dr: what the hints above read."""
    from zerto_rewind.config.parser import Parser

    parser = Parser("/etc/zerto-rewind/config.json", "/etc/zerto-rewind")
    spec = {"url": URL, "client_id": "rewind", "client_secret": SECRET}
    one = parser.zvms({"zvm": spec}, {}, loose_permissions=False)
    two = parser.zvms(
        {"zvms": {"hq": spec, "dr": {**spec, "url": URL + "9"}}}, {}, loose_permissions=False
    )
    assert [z.config_key for z in one.values()] == ["zvm"]
    assert {s: z.config_key for s, z in two.items()} == {"hq": "zvms.hq", "dr": "zvms.dr"}
