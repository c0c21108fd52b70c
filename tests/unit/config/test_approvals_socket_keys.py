"""approvals.socket_max_ops and approvals.socket_max_age_s: defaults, values, refusals by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
ENV = {"HOME": "/home/op", "ZS": "from-env"}


def load(directory: Path, **approvals: Any) -> Settings:
    raw = {"zvm": ZVM, "approvals": approvals}
    return load_settings(ENV, path=str(write_config(directory, raw)))


def test_the_connection_lifetime_defaults_and_loads(tmp_path: Path) -> None:
    default = load(tmp_path).approvals
    assert (default.socket_max_ops, default.socket_max_age_s) == (100, 60.0)
    given = load(tmp_path, socket_max_ops=1, socket_max_age_s=2.5).approvals
    assert (given.socket_max_ops, given.socket_max_age_s) == (1, 2.5)


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        ({"socket_max_ops": 0}, "approvals.socket_max_ops", "whole number from 1 to 10000"),
        ({"socket_max_ops": 2.5}, "approvals.socket_max_ops", "whole number"),
        ({"socket_max_ops": True}, "approvals.socket_max_ops", "whole number"),
        ({"socket_max_age_s": 0}, "approvals.socket_max_age_s", "greater than 0"),
        ({"socket_max_age_s": "60"}, "approvals.socket_max_age_s", "finite number"),
    ],
)
def test_a_bad_lifetime_is_refused_by_name(
    tmp_path: Path, raw: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, **raw)
    assert raised.value.key == key
    assert words in str(raised.value)
