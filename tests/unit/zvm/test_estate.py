"""The estate's pure rules: merging what several ZVMs list, and which ZVM takes a tag."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from zerto_rewind.errors import (
    ApiError,
    AuthError,
    NotFound,
    ZvmConnectionError,
    ZvmTimeout,
    ZvmTlsError,
)
from zerto_rewind.zvm.estate import Estate, EstateVpg, SiteAnswer, is_dark, merge_vpgs, tag_site
from zerto_rewind.zvm.models import VmRef

HQ_ID, DR_ID, AWS_ID = "site-hq", "site-dr", "site-aws"
VPG = "8b5e1c2a-0000-4000-8000-00000000000a"


def row(vpg: str = VPG, vm: str = "web-01", protected: str | None = HQ_ID, **kw: Any) -> VmRef:
    return VmRef(kw.get("vm_id", f"{protected}.vm-11"), vm, vpg, kw.get("name", "web-vpg"),
                 None, protected)  # fmt: skip


def test_a_vpg_two_zvms_list_is_one_vpg_protected_at_the_matching_site() -> None:
    """hq lists it protected, dr lists it recovering: one VPG, hq its protected site."""
    answers = {
        "dr": SiteAnswer(DR_ID, (row(vpg=VPG.upper()),)),
        "hq": SiteAnswer(HQ_ID, (row(),)),
    }
    merged = merge_vpgs(answers, ["hq", "dr"])
    assert list(merged) == [VPG]
    (vpg,) = merged.values()
    assert (vpg.listed_by, vpg.protected_site, vpg.protected_site_id) == (["hq", "dr"], "hq", HQ_ID)


def test_one_to_many_keeps_every_vpg() -> None:
    """One VM in VPGs to two sites: both VPGs, each with its own protected site."""
    other = "8b5e1c2a-0000-4000-8000-00000000000b"
    answers = {
        "hq": SiteAnswer(HQ_ID, (row(), row(vpg=other, name="web-to-aws"))),
        "aws": SiteAnswer(AWS_ID, (row(vpg=other, name="web-to-aws"),)),
    }
    merged = merge_vpgs(answers, ["hq", "dr", "aws"])
    assert sorted(merged) == sorted([VPG, other])
    assert merged[other].listed_by == ["hq", "aws"]
    assert merged[other].protected_site == "hq"


def test_the_protected_sites_row_gives_the_vm_identity() -> None:
    """If two ZVMs give one VM two identifiers, the protected site's is the VM's."""
    answers = {
        "dr": SiteAnswer(DR_ID, (row(vm_id="dr-view.vm-99"),)),
        "hq": SiteAnswer(HQ_ID, (row(vm_id="hq-view.vm-11"),)),
    }
    (vpg,) = merge_vpgs(answers, ["dr", "hq"]).values()
    assert vpg.rows["web-01"].vm_id == "hq-view.vm-11"


def test_a_vpg_protected_from_a_site_outside_the_estate_has_no_protected_site() -> None:
    (vpg,) = merge_vpgs({"hq": SiteAnswer(HQ_ID, (row(protected=AWS_ID),))}, ["hq"]).values()
    assert (vpg.protected_site, vpg.protected_site_id) == (None, AWS_ID)


def merged(listed: list[str], protected: str | None, protected_id: str | None = HQ_ID) -> EstateVpg:
    (vpg,) = merge_vpgs({s: SiteAnswer(None, (row(),)) for s in listed}, listed).values()
    vpg.protected_site, vpg.protected_site_id = protected, protected_id
    return vpg


SITES = ["hq", "dr"]


def test_the_tag_goes_to_the_protected_site() -> None:
    assert (
        tag_site(merged(["hq", "dr"], "hq"), sites=SITES, failed=[], tag_via="protected").site
        == "hq"
    )
    assert tag_site(merged(["dr", "hq"], "hq"), sites=SITES, failed=[], tag_via="any").site == "hq"


def test_protected_site_dark_denies_unless_tag_via_any() -> None:
    """hq (protected) did not answer: no tag with tag_via protected, naming hq."""
    vpg = merged(["dr"], "hq")
    found = tag_site(vpg, sites=SITES, failed=["hq"], tag_via="protected")
    assert (found.site, found.dark) == (None, ("hq",))
    assert "protected from site hq" in found.problem
    assert "did not answer" in found.problem
    assert tag_site(vpg, sites=SITES, failed=["hq"], tag_via="any").site == "dr"


def test_protected_site_unknown_and_a_site_dark_names_the_dark_site() -> None:
    """hq's identity is not known (it never answered): the dark site is named."""
    found = tag_site(merged(["dr"], None), sites=SITES, failed=["hq"], tag_via="protected")
    assert (found.site, found.dark) == (None, ("hq",))


def test_protected_site_outside_the_estate_is_refused_with_tag_via_protected() -> None:
    vpg = merged(["hq"], None, AWS_ID)
    found = tag_site(vpg, sites=SITES, failed=[], tag_via="protected")
    assert found.site is None
    assert found.dark == ()
    assert AWS_ID in found.problem
    assert "zvms" in found.problem
    assert tag_site(vpg, sites=SITES, failed=[], tag_via="any").site == "hq"


def test_one_site_tags_there_whatever_the_protected_site() -> None:
    """One ZVM: no choice to make, as before the estate."""
    vpg = merged(["default"], None, AWS_ID)
    assert tag_site(vpg, sites=["default"], failed=[], tag_via="protected").site == "default"
    dark = merged(["default"], None)
    dark.listed_by = []  # the one ZVM is dark: its cached rows are all there is
    assert tag_site(dark, sites=["default"], failed=["default"], tag_via="any").dark == ("default",)


@pytest.mark.parametrize(
    ("exc", "dark"),
    [
        (ZvmConnectionError("refused"), True),
        (ZvmTlsError("bad certificate"), True),
        (ZvmTimeout("timed out"), True),
        (AuthError("401"), True),
        (ApiError("503", method="GET", url="u", status=503), True),
        (ApiError("400", method="GET", url="u", status=400), False),
        (NotFound("404", method="GET", url="u", status=404), False),
    ],
)
def test_what_counts_as_a_dark_site(exc: Exception, dark: bool) -> None:
    assert is_dark(exc) is dark


def fake(url: str, read_timeout_s: float = 30.0) -> Any:
    return SimpleNamespace(
        settings=SimpleNamespace(url=url, connect_timeout_s=0.0, read_timeout_s=read_timeout_s),
        close=lambda: None,
    )


def test_ask_runs_the_sites_at_once_and_a_hanging_site_costs_its_own_timeout() -> None:
    """hq answers at once; dr hangs: dr fails after its own 0.3 s, hq's answer is kept."""
    release = threading.Event()
    estate = Estate({}, clients={"hq": fake("https://hq"), "dr": fake("https://dr", 0.3)})

    def work(site: str, _client: Any, _deadline: float) -> str:
        if site == "dr":
            release.wait(10)
        return f"{site} answered"

    started = time.monotonic()
    answers = estate.ask(work, ["hq", "dr"], time.monotonic() + 30)
    took = time.monotonic() - started
    release.set()
    assert answers.ok == {"hq": "hq answered"}
    assert isinstance(answers.failed["dr"], ZvmTimeout)
    assert "https://dr" in str(answers.failed["dr"])
    assert 0.3 <= took < 2.0


def test_ask_counts_any_error_as_that_sites_failure() -> None:
    estate = Estate({}, clients={"hq": fake("https://hq"), "dr": fake("https://dr")})

    def work(site: str, _client: Any, _deadline: float) -> str:
        if site == "dr":
            raise AuthError("token refused")
        if site == "hq":
            raise KeyError("surprise")
        return "never"

    answers = estate.ask(work, ["hq", "dr"], time.monotonic() + 5)
    assert answers.ok == {}
    assert isinstance(answers.failed["dr"], AuthError)
    assert "KeyError" in str(answers.failed["hq"])


def test_each_site_has_its_own_client_and_the_first_is_the_first_configured() -> None:
    settings = {
        name: SimpleNamespace(url=f"https://{name}", grant="password", client_id="c",
                              username="u", verify_tls=True, ca_bundle=None,
                              connect_timeout_s=1.0, read_timeout_s=1.0, scope=None)
        for name in ("hq", "dr")
    }  # fmt: skip
    estate = Estate(settings)  # type: ignore[arg-type]
    assert estate.first == "hq"
    assert estate.client("hq") is estate.client("hq")
    assert estate.client("hq") is not estate.client("dr")
    assert estate.client("dr").settings.url == "https://dr"
    estate.close()
