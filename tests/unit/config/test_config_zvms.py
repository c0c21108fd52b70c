"""The ``zvms`` key: one ZVM per site, and today's ``zvm`` as a one-site estate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError

HQ = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS_HQ"}
DR = {"url": "https://127.0.0.2:9", "username": "admin", "password_file": "dr.secret"}
ENV = {"HOME": "/home/op", "ZS_HQ": "hq-secret", "ZS": "one"}


def load(directory: Path, raw: Any, **kw: Any) -> Settings:
    return load_settings(ENV, path=str(write_config(directory, raw, **kw)))


def error(directory: Path, raw: Any, **kw: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(directory, raw, **kw)
    return info.value


def test_zvms_maps_each_site_to_its_own_zvm_in_config_order(tmp_path: Path) -> None:
    """Sites keep their order (the first is what one-ZVM callers get) and their own settings."""
    s = load(tmp_path, {"zvms": {"hq": HQ, "dr": {**DR, "read_timeout_s": 4}}})
    assert list(s.zvms) == ["hq", "dr"]
    assert s.zvm is s.zvms["hq"]
    assert (s.zvms["hq"].site, s.zvms["dr"].site) == ("hq", "dr")
    assert s.zvms["hq"].grant == "client_credentials"
    assert s.zvms["dr"].grant == "password"
    assert s.zvms["dr"].read_timeout_s == 4.0
    assert s.zvms["dr"].secret_hint == str(tmp_path / "dr.secret")
    assert s.zvms["hq"].secret(ENV) == "hq-secret"


def test_single_zvm_is_a_one_site_estate_named_default(tmp_path: Path) -> None:
    s = load(
        tmp_path, {"zvm": {"url": "https://z.example", "client_id": "c", "client_secret_env": "ZS"}}
    )
    assert list(s.zvms) == ["default"]
    assert s.zvms["default"] is s.zvm
    assert s.zvm.site == "default"


def test_both_zvm_and_zvms_is_a_config_error(tmp_path: Path) -> None:
    exc = error(tmp_path, {"zvm": HQ, "zvms": {"hq": HQ}})
    assert exc.key == "zvms"
    assert "both zvm and zvms" in str(exc)


def test_neither_zvm_nor_zvms_is_a_config_error(tmp_path: Path) -> None:
    exc = error(tmp_path, {"tools": {}})
    assert exc.key == "zvm"
    assert "zvms" in str(exc)


@pytest.mark.parametrize("raw", [{}, [], "hq"])
def test_zvms_must_be_a_non_empty_object(tmp_path: Path, raw: Any) -> None:
    assert error(tmp_path, {"zvms": raw}).key == "zvms"


@pytest.mark.parametrize(
    ("spec", "key", "words"),
    [
        ({**HQ, "url": "ftp://x"}, "zvms.dr.url", "https://"),
        ({"url": "https://z.dr", "client_id": "c"}, "zvms.dr.client_secret", "missing"),
        ({**HQ, "nope": 1}, "zvms.dr.nope", "unknown key"),
        ({**HQ, "read_timeout_s": 0}, "zvms.dr.read_timeout_s", "greater than 0"),
        ({**HQ, "verify_tls": False, "ca_bundle": "ca.pem"}, "zvms.dr.verify_tls", "zvms.dr"),
        ({**HQ, "username": "u"}, "zvms.dr", "not both"),
    ],
)
def test_validation_errors_name_the_site(
    tmp_path: Path, spec: dict[str, Any], key: str, words: str
) -> None:
    exc = error(tmp_path, {"zvms": {"hq": HQ, "dr": spec}})
    assert exc.key == key
    assert words in str(exc)


def test_a_site_name_is_letters_digits_dash_underscore(tmp_path: Path) -> None:
    assert error(tmp_path, {"zvms": {"dr site": HQ}}).key == "zvms.dr site"


def test_two_sites_with_one_url_is_a_config_error(tmp_path: Path) -> None:
    exc = error(tmp_path, {"zvms": {"hq": HQ, "dr": {**HQ, "url": HQ["url"] + "/"}}})
    assert exc.key == "zvms.dr.url"
    assert "site hq" in str(exc)


def test_inline_secret_of_any_site_refused_in_a_readable_config(tmp_path: Path) -> None:
    dr = {"url": "https://z.dr", "client_id": "c", "client_secret": "s3cr3t"}
    exc = error(tmp_path, {"zvms": {"hq": HQ, "dr": dr}}, mode=0o644)
    assert exc.key == "zvms.dr.client_secret"
    assert "zvms.dr.client_secret_env" in str(exc)
    assert "s3cr3t" not in str(exc)


def test_a_sites_missing_env_secret_names_the_sites_key(tmp_path: Path) -> None:
    dr = {"url": "https://z.dr", "client_id": "c", "client_secret_env": "ZS_DR"}
    s = load(tmp_path, {"zvms": {"hq": HQ, "dr": dr}})
    with pytest.raises(ConfigError) as info:
        s.zvms["dr"].secret()
    assert info.value.key == "zvms.dr.client_secret_env"
    assert "ZS_DR" in str(info.value)


def test_repr_names_the_site_never_the_secret(tmp_path: Path) -> None:
    dr = {"url": "https://z.dr", "client_id": "c", "client_secret": "s3cr3t"}
    s = load(tmp_path, {"zvms": {"dr": dr}})
    assert "site='dr'" in repr(s.zvm)
    assert "s3cr3t" not in repr(s.zvm)


def test_guard_tag_via_and_site_down_s(tmp_path: Path) -> None:
    s = load(tmp_path, {"zvms": {"hq": HQ}})
    assert (s.guard.tag_via, s.guard.site_down_s) == ("protected", 10.0)
    s = load(tmp_path, {"zvms": {"hq": HQ}, "guard": {"tag_via": "any", "site_down_s": 0}})
    assert (s.guard.tag_via, s.guard.site_down_s) == ("any", 0.0)
    exc = error(tmp_path, {"zvms": {"hq": HQ}, "guard": {"tag_via": "recovery"}})
    assert exc.key == "guard.tag_via"


def test_a_plain_http_zvm_is_refused_naming_its_key(tmp_path: Path) -> None:
    """The ZVM is the trust root for "did the tag land": http:// is a config error that
    names the site's key and the flag, for one ZVM and for a site of several."""
    plain = {**HQ, "url": "http://127.0.0.1:9"}
    one = error(tmp_path, {"zvm": plain})
    assert "zvm.url" in str(one)
    assert "zvm.allow_insecure_http" in str(one)
    several = error(tmp_path, {"zvms": {"hq": HQ, "dr": {**DR, "url": "http://127.0.0.2:9"}}})
    assert "zvms.dr.url" in str(several)
    assert "zvms.dr.allow_insecure_http" in str(several)


def test_allow_insecure_http_admits_plain_http_per_site(tmp_path: Path) -> None:
    plain = {**DR, "url": "http://127.0.0.2:9", "allow_insecure_http": True}
    s = load(tmp_path, {"zvms": {"hq": HQ, "dr": plain}})
    assert s.zvms["dr"].url == "http://127.0.0.2:9"
    assert "zvms.hq.allow_insecure_http" in str(
        error(tmp_path, {"zvms": {"hq": {**HQ, "url": "http://127.0.0.1:9"}, "dr": plain}})
    )
    bad = error(tmp_path, {"zvm": {**HQ, "allow_insecure_http": "yes"}})
    assert "zvm.allow_insecure_http" in str(bad)
