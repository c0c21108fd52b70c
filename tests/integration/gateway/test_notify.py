"""The approvals webhook (gateway/notify.py) against a real loopback HTTP receiver."""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.webhook_receiver import SECRET, Receiver
from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.core.approvals import ApprovalRequest, new_request
from zerto_rewind.errors import ConfigError
from zerto_rewind.gateway.approvals import Notifier
from zerto_rewind.gateway.notify import make_webhook_notifier, verify_signature
from zerto_rewind.sim.certs import write_certs

pytestmark = pytest.mark.anyio

SECRET_ENV = "ZR_TEST_WEBHOOK_SECRET"
LINK = "https://approvals.example.test/requests/{}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


def settings(url: str | None, *, timeout_s: float = 2.0, **more: Any) -> ApprovalsSettings:
    values: dict[str, Any] = {
        "notify_url": url,
        "notify_secret_source": ("env", SECRET_ENV),
        "notify_timeout_s": timeout_s,
    }
    values.update(more)
    return ApprovalsSettings(**values)


def notifier_for(url: str, *, timeout_s: float = 2.0) -> Notifier:
    notifier = make_webhook_notifier(settings(url, timeout_s=timeout_s), LINK.format)
    assert notifier is not None
    return notifier


def a_request(**changes: Any) -> ApprovalRequest:
    request = new_request(
        tool="power_off_vm",
        tool_input={"vm": "web-01", "admin_password": "s3cr3t-value", "force": True},
        vms=["web-01"],
        row="vm_unknown",
        why="web-01 is not protected by any VPG",
        principal="token:agent-a",
        host="gw-1",
        now=1_700_000_000.0,  # 2023-11-14T22:13:20Z: expires 22:23 UTC
    )
    for key, value in changes.items():
        setattr(request, key, value)
    return request


# --------------------------------------------------------------------------- delivery


async def test_a_requested_event_arrives_signed_with_link_and_text(receiver: Receiver) -> None:
    request = a_request()
    await notifier_for(receiver.url)("requested", request)

    (post,) = receiver.posts
    headers, body = post["headers"], post["body"]
    assert post["path"] == "/hook?token=query-secret"
    assert headers["Content-Type"] == "application/json"
    timestamp = headers["X-Zerto-Rewind-Timestamp"]
    assert abs(int(timestamp) - time.time()) < 60
    signature = headers["X-Zerto-Rewind-Signature"]
    assert signature.startswith("sha256=")
    assert len(signature) == len("sha256=") + 64
    assert verify_signature(SECRET, timestamp, body, signature)

    sent = json.loads(body)
    url = LINK.format(request.id)
    assert sent["event"] == "requested"
    assert sent["url"] == url
    assert sent["request"] == {
        "id": request.id,
        "tool": "power_off_vm",
        "vms": ["web-01"],
        "row": "vm_unknown",
        "principal": "token:agent-a",
        "host": "gw-1",
        "created": "2023-11-14T22:13:20.000Z",
        "expires": "2023-11-14T22:23:20.000Z",
        "why": "web-01 is not protected by any VPG",
        "state": "pending",
        "decided_by": None,
        "decided_at": None,
        "caller_waits_until": None,
        "digest": request.args_digest[:12],
        "arguments": sent["request"]["arguments"],  # below
        "if_approved": "Runs once, with no rewind point (no Zerto checkpoint in front of it), "
        "on VM(s) web-01.",
    }
    assert sent["text"] == (
        "zerto-rewind: approval needed for power_off_vm on web-01 (VM unknown to Zerto), "
        "requested by token:agent-a; the caller does not wait (a retry after approval runs); "
        f"open until 22:23 UTC: {url}"
    )


async def test_the_body_shows_every_argument_and_masks_secrets(receiver: Receiver) -> None:
    """Every argument as the approver sees it; a secret-looking value only by length and digest."""
    for event in ("requested", "approved", "denied", "expired"):
        await notifier_for(receiver.url)(event, a_request())
    assert len(receiver.posts) == 4
    for post in receiver.posts:
        raw = post["body"].decode()
        assert "s3cr3t-value" not in raw
        shown = {a["path"]: a for a in json.loads(raw)["request"]["arguments"]}
        assert shown["vm"]["value"] == '"web-01"'
        assert shown["force"]["value"] == "true"
        assert shown["admin_password"]["secret"] is True
        assert shown["admin_password"]["value"].startswith("<secret: 12 characters, sha256 ")


async def test_decisions_and_expiries_have_their_own_lines(receiver: Receiver) -> None:
    notify = notifier_for(receiver.url)

    def without_link(request_id: str) -> str | None:
        return None

    approved = a_request(state="approved", decided_by="unix:alice")
    denied = a_request(state="denied", decided_by="web:carol")
    await notify("approved", approved)
    await notify("denied", denied)
    await notify("expired", a_request(state="expired"))
    await notify("expired", a_request(state="expired", decided_by="unix:alice"))
    unlinked = make_webhook_notifier(settings(receiver.url), without_link)
    assert unlinked is not None
    await unlinked("requested", a_request(row="no_vm", vms=[]))

    texts = [json.loads(p["body"])["text"] for p in receiver.posts]
    bodies = [json.loads(p["body"]) for p in receiver.posts]
    assert texts[0] == (
        f"zerto-rewind: power_off_vm on web-01 approved by unix:alice for token:agent-a "
        f"(request {approved.id}): {LINK.format(approved.id)}"
    )
    assert texts[1].startswith("zerto-rewind: power_off_vm on web-01 denied by web:carol")
    assert " expired unanswered: " in texts[2]
    assert " expired unused: " in texts[3]
    assert texts[4] == (
        "zerto-rewind: approval needed for power_off_vm (no VM in the arguments), "
        "requested by token:agent-a; the caller does not wait (a retry after approval runs); "
        "open until 22:23 UTC"
    )
    assert bodies[4]["url"] is None
    assert [b["event"] for b in bodies] == ["approved", "denied", "expired", "expired", "requested"]
    assert bodies[0]["request"]["decided_by"] == "unix:alice"


async def test_a_vm_name_cannot_become_a_link_or_a_mention_in_the_text(receiver: Receiver) -> None:
    """VM names are the agent's to choose: chat markup in them is neutralised in ``text``."""
    evil = "<https://evil.example|click to approve> <!channel> [x](https://evil.example)\n"
    await notifier_for(receiver.url)("requested", a_request(vms=[evil]))
    sent = json.loads(receiver.posts[0]["body"])
    for markup in "<>[]|\n":
        assert markup not in sent["text"].removesuffix(LINK.format(sent["request"]["id"]))
    assert sent["request"]["vms"] == [evil], "the structured field keeps the name as it is"


# --------------------------------------------------------------------------- signatures


async def test_verify_signature_refuses_a_wrong_secret_or_a_changed_body(
    receiver: Receiver,
) -> None:
    await notifier_for(receiver.url)("requested", a_request())
    (post,) = receiver.posts
    timestamp = post["headers"]["X-Zerto-Rewind-Timestamp"]
    signature = post["headers"]["X-Zerto-Rewind-Signature"]
    body: bytes = post["body"]
    assert verify_signature(SECRET, timestamp, body, signature)
    assert verify_signature(SECRET.encode(), int(timestamp), body.decode(), signature)
    assert not verify_signature("another-secret", timestamp, body, signature)
    assert not verify_signature(SECRET, timestamp, body.replace(b"agent-a", b"agent-b"), signature)
    assert not verify_signature(SECRET, str(int(timestamp) + 1), body, signature)
    assert not verify_signature(SECRET, timestamp, body, signature.removeprefix("sha256="))
    assert not verify_signature(SECRET, timestamp, body, "")
    assert not verify_signature(SECRET, timestamp, body, None)
    assert not verify_signature(SECRET, "yesterday", body, signature)
    assert not verify_signature("", timestamp, body, signature)


async def test_verify_signature_refuses_an_old_delivery(receiver: Receiver) -> None:
    """A replayed delivery: past max_age_s (default 300 s) it no longer verifies."""
    await notifier_for(receiver.url)("requested", a_request())
    (post,) = receiver.posts
    timestamp = post["headers"]["X-Zerto-Rewind-Timestamp"]
    signature = post["headers"]["X-Zerto-Rewind-Signature"]
    later = int(timestamp) + 301
    assert not verify_signature(SECRET, timestamp, post["body"], signature, now=later)
    assert verify_signature(SECRET, timestamp, post["body"], signature, now=later, max_age_s=None)
    assert verify_signature(SECRET, timestamp, post["body"], signature, now=later, max_age_s=600)


# --------------------------------------------------------------------------- failures


async def test_a_receiver_that_is_down_does_not_raise(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    url = receiver.url
    receiver.__exit__()  # nothing listens on its port any more
    caplog.set_level(logging.WARNING, logger="zerto_rewind.gateway")
    notify = notifier_for(url, timeout_s=1.0)
    started = time.monotonic()
    await notify("requested", a_request())
    assert time.monotonic() - started <= 1.0
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("approval notification requested for request ")
    assert record.getMessage().endswith("failed: ConnectError")
    assert "query-secret" not in caplog.text
    assert "127.0.0.1" not in caplog.text
    assert SECRET not in caplog.text


async def test_a_slow_receiver_takes_no_longer_than_the_timeout(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.delay_s = 5.0
    caplog.set_level(logging.WARNING, logger="zerto_rewind.gateway")
    notify = notifier_for(receiver.url, timeout_s=0.5)
    started = time.monotonic()
    await notify("approved", a_request(state="approved"))
    elapsed = time.monotonic() - started
    assert 0.4 <= elapsed <= 0.5 + 0.3, f"took {elapsed:.2f}s"
    assert len(receiver.posts) == 1, "it was sent; the answer did not come in time"
    assert "failed" in caplog.text
    assert "query-secret" not in caplog.text


async def test_an_error_answer_is_logged_not_raised(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="zerto_rewind.gateway")
    for status in (500, 302):
        receiver.status = status
        await notifier_for(receiver.url)("denied", a_request(state="denied"))
    assert len(receiver.posts) == 2, "a redirect is not followed"
    messages = [r.getMessage() for r in caplog.records]
    assert [m.rsplit(" ", 1)[-1] for m in messages] == ["500", "302"]
    assert all("the webhook answered" in m for m in messages)


async def test_tls_is_verified(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An https receiver whose certificate no default CA signed is not trusted."""
    certs = write_certs(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    caplog.set_level(logging.WARNING, logger="zerto_rewind.gateway")
    with Receiver(tls=context) as tls_receiver:
        await notifier_for(tls_receiver.url)("requested", a_request())
    assert tls_receiver.posts == []
    assert caplog.records[0].getMessage().endswith("failed: ConnectError")


# --------------------------------------------------------------------------- building


def test_no_url_no_notifier() -> None:
    assert make_webhook_notifier(ApprovalsSettings(), LINK.format) is None
    assert make_webhook_notifier(settings(None), LINK.format) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/zr",
        "http://10.0.0.5:8080/zr",
        "http://[2001:db8::1]/zr",
        "http://localhost.example.com/zr",
    ],
)
def test_plain_http_beyond_loopback_is_refused_at_build(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        make_webhook_notifier(settings(url), LINK.format)
    message = str(refused.value)
    assert "approvals.notify.url" in message
    assert "http:// is accepted only to a loopback address" in message
    assert "use https://" in message


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/zr?token=x",
        "http://127.0.0.1:9000/zr",
        "http://127.10.0.1/zr",
        "http://localhost:9000/zr",
        "http://[::1]:9000/zr",
    ],
)
def test_https_and_loopback_http_are_accepted(url: str) -> None:
    assert make_webhook_notifier(settings(url), LINK.format) is not None


@pytest.mark.parametrize(
    "url", ["ftp://hooks.example.com/zr", "https:///no-host", "hooks.example.com", "https://h:x/"]
)
def test_what_is_not_an_https_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match=r"approvals\.notify\.url"):
        make_webhook_notifier(settings(url), LINK.format)


def test_a_missing_secret_is_refused_at_build(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="notifications are HMAC-signed"):
        make_webhook_notifier(
            settings("https://hooks.example.com/zr", notify_secret_source=None), LINK.format
        )
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(ConfigError, match=f"names {SECRET_ENV}, which is empty or unset"):
        make_webhook_notifier(settings("https://hooks.example.com/zr"), LINK.format)


def test_a_waiting_callers_deadline_is_in_the_text_not_an_expiry_alone() -> None:
    from zerto_rewind.gateway.notify import webhook_text

    request = a_request(wait_until=1_700_000_000.0 + 120)  # 22:15 UTC
    text = webhook_text("requested", request, None)
    assert "the caller waits until 22:15 UTC; open until 22:23 UTC" in text
    assert "expires" not in text
