"""The gateway's anchoring of the decision log, and the copies only it makes.

Every process that logs anchors to the anchor file under the state directory
(core.log_anchor). The gateway also copies each anchor to Redis (``state.url``)
and to the approvals webhook (a ``log.anchor`` event), anchors the log's head every
``log_anchor.every_s`` seconds while it runs (a line is otherwise anchored only when
a later one is written, so the tail of an idle gateway's log could be cut unseen),
and once more when it stops cleanly. A copy that fails is a warning: the decision
stands, and ``log --verify`` still has the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..core.decisions_log import anchor_now, register_anchor
from ..core.log_anchor import policy_for, redis_key
from ..errors import StateError

if TYPE_CHECKING:
    import anyio.abc
    import redis

    from ..config.settings import Settings

__all__ = ["LogWitness"]

log = logging.getLogger("zerto_rewind.gateway")


class LogWitness:
    """Registers the log's anchoring for this process and copies each anchor out."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = policy_for(settings, publish=self.publish)
        register_anchor(self.policy)
        self._redis: redis.Redis | None = None
        # One worker, so copies reach Redis in the log's order; never on the event
        # loop, which a slow Redis would otherwise stall for its timeout.
        self._copier = ThreadPoolExecutor(1, thread_name_prefix="log-anchor")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._notify: Callable[[dict[str, Any]], Coroutine[Any, Any, None]] | None = None

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        """In the event loop: webhook deliveries run as tasks of ``tg``."""
        from .notify import make_anchor_notifier

        self._loop, self._tg = asyncio.get_running_loop(), tg
        self._notify = make_anchor_notifier(self.settings.approvals)
        tg.start_soon(self._keep_anchored)

    async def _keep_anchored(self) -> None:
        """Anchor the head every ``every_s`` seconds if it moved (anchor_now checks),
        in a worker thread: it locks and reads the log file."""
        import anyio

        while True:
            await anyio.sleep(self.policy.every_s)
            await anyio.to_thread.run_sync(anchor_now, self.policy)

    def publish(self, anchor: dict[str, Any]) -> None:
        """Copy one anchor out; any thread (the log is written from workers too)."""
        if self.settings.state_url:
            with contextlib.suppress(RuntimeError):  # closed: the stop's own copy is made
                self._copier.submit(self._to_redis, anchor)
        if self._notify is not None and self._loop is not None:
            # RuntimeError: the loop has closed (shutting down); the file holds the anchor
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._post, anchor)

    def _to_redis(self, anchor: dict[str, Any]) -> None:
        from ..zvm.redis_conn import connect, redis_errors_as_state_errors

        url = str(self.settings.state_connection_url())  # with state.password_*
        try:
            with redis_errors_as_state_errors(url):
                if self._redis is None:
                    self._redis = connect(url)
                self._redis.set(redis_key(self.policy.log_path), json.dumps(anchor))
        except StateError as exc:
            log.warning("decision log anchor not copied to Redis: %s", exc)

    def _post(self, anchor: dict[str, Any]) -> None:
        if self._tg is None or self._notify is None:
            return
        try:
            self._tg.start_soon(self._notify, anchor)
        except RuntimeError:  # the task group is closing: the file holds the anchor
            log.warning("decision log anchor of seq %s not sent to the webhook", anchor["seq"])

    def close(self) -> None:
        """A clean stop: anchor the head the last anchor did not cover, then let go."""
        self._notify = None  # no task group is left to deliver it in
        anchor_now(self.policy)
        self._copier.shutdown(wait=True)  # the last copies, the stop's included
        if self._redis is not None:
            self._redis.close()
            self._redis = None
