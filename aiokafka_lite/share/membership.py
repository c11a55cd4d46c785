"""Share group membership: the ShareGroupHeartbeat loop (KIP-932).

The member makes its own id (a uuid, kept for the consumer's lifetime), joins with epoch 0 and
its subscription, then heartbeats every ``heartbeat_interval_ms`` the coordinator asks for. The
coordinator assigns partitions (by topic id; several members may share one partition); the
subscription is sent again only when it changed. UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the
member lost its place, drops its assignment and joins again with epoch 0. Leaving is a
heartbeat with epoch -1. A fatal error (authorization, a classic group of the same name) is
kept and raised by the consumer's next poll.

As Java's share consumer, a member heartbeats only while it is subscribed to something: the
loop starts with the first non-empty subscription (a heartbeat with no topics is refused with
INVALID_REQUEST) and an empty one (``unsubscribe()``) leaves the group; subscribing again
joins with epoch 0 (same member id).

States: ``unjoined`` (epoch 0, no assignment) -> ``stable`` (epoch > 0, heartbeating) ->
``unjoined`` (fenced) ... -> ``leaving`` -> ``left`` (-> ``unjoined`` on a new subscription);
``fatal`` from any of them; ``stable`` -> ``poll_timeout`` when the application did not poll
for ``max_poll_interval_ms`` (left the group, as Java's share consumer) -> ``unjoined`` at its
next poll.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops import share as share_ops
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.ops.membership import send_leave
from aiokafka_lite.structs import TopicPartition

__all__ = ["ShareMembership", "new_member_id"]

log = logging.getLogger(__name__)

_GROUP_KEY = 0  # FindCoordinator key type of a group
_REJOIN = (Errors.UnknownMemberIdError, Errors.FencedMemberEpochError)


def new_member_id() -> str:
    """A member id as the Java client makes them (a random uuid, url-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMembership:
    """Keeps this member in its share group and knows its current assignment."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        *,
        rack_id: str | None = None,
        on_assignment: Callable[[], None] = lambda: None,
        max_poll_interval_ms: int = 300000,
    ) -> None:
        self._client = client
        self.group_id = group_id
        self.member_id = new_member_id()
        self.epoch = 0
        self.state = "unjoined"
        self._rack = rack_id
        self._topics: frozenset[str] = frozenset()
        self._topics_sent: frozenset[str] | None = None
        self._interval_s = 5.0
        #: the assignment by topic id, as the coordinator last sent it
        self._assignment: dict[uuid.UUID, list[int]] = {}
        self._on_assignment = on_assignment
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: a leave (unsubscribe) still under way: a new join waits for it
        self._leaving: asyncio.Task[None] | None = None
        #: start() was called: a subscription change starts or stops the loop
        self._active = False
        #: a fatal error, raised by the consumer's next poll
        self.error: BaseException | None = None
        #: set once the first assignment (maybe empty) arrived
        self.joined = asyncio.Event()
        self._max_poll_s = max_poll_interval_ms / 1000
        self._last_poll = time.monotonic()
        #: the share consumer's unexpected background errors (_supervise): this loop's and
        #: the fetch rounds', raised once by the next poll
        self.supervisor = Supervisor("share consumer", client.retry_backoff_ms, log)
        self._guard = self.supervisor.guard("heartbeat")

    # -- subscription ---------------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._topics

    def subscribe(self, topics: frozenset[str]) -> None:
        """Change the subscription; the next heartbeat (sent now) carries it. Once started,
        the first topics start the heartbeats (joining) and no topics leave the group."""
        self._topics = topics
        if self._active:
            if topics:
                self._ensure_running()
            elif self._task is not None:
                self._drop_assignment()  # at once, as Java's unsubscribe()
                task, self._task = self._task, None
                self._leaving = asyncio.ensure_future(self._leave_after(task))
        self._wake.set()

    def assignment(self) -> set[TopicPartition]:
        """The assigned partitions whose topic ids the metadata already maps to names."""
        cluster = self._client.cluster
        names = {cluster.topic_id(t): t for t in cluster.topics(exclude_internal_topics=False)}
        out: set[TopicPartition] = set()
        missing = False
        for tid, parts in self._assignment.items():
            name = names.get(tid)
            if name is None:
                missing = True
                continue
            out.update(TopicPartition(name, p) for p in parts)
        if missing:
            self._client.request_update()
        return out

    def polled(self) -> None:
        """The application polled: the max poll interval starts again; a member that left
        for lack of polls joins again (epoch 0), as Java's."""
        self._last_poll = time.monotonic()
        if self.state == "poll_timeout":
            log.info("share group %s: polled again, joining", self.group_id)
            self.state = "unjoined"
            self.epoch = 0
            self._topics_sent = None
            self._wake.set()

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        """Start heartbeating (joining first) as soon as something is subscribed."""
        self._active = True
        if self._topics:
            self._ensure_running()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            leaving = self._leaving
            self._task = asyncio.ensure_future(self._guard.run(lambda: self._run(leaving)))

    async def _leave_after(self, task: asyncio.Task[None]) -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await self._send_leave(self._client.timeouts.request_ms / 1000)

    async def _run(self, leaving: asyncio.Task[None] | None = None) -> None:
        if leaving is not None:  # unsubscribed, then subscribed again: leave first
            await asyncio.gather(leaving, return_exceptions=True)
        if self.state == "left":
            self.epoch = 0
            self.state = "unjoined"
            self._topics_sent = None
        backoff = self._client.retry_backoff_ms / 1000
        while True:
            pause = self._interval_s
            if self.state == "poll_timeout":  # out of the group until the next poll
                self._wake.clear()
                await self._wake.wait()
                continue
            if time.monotonic() - self._last_poll > self._max_poll_s and self.epoch > 0:
                await self._leave_for_poll_timeout()
                continue
            try:
                await self._heartbeat()
                self._guard.ok()
            except _REJOIN as exc:
                log.info("share group %s: %r, joining again", self.group_id, exc)
                self._reset()
                pause = 0
            except Errors.KafkaError as exc:
                if Errors.retry_action(exc, coordinator=True).retriable:
                    log.debug("share group %s heartbeat: %r", self.group_id, exc)
                    pause = backoff
                else:
                    log.error("share group %s: %r", self.group_id, exc)
                    self.error = exc
                    self.state = "fatal"
                    self.joined.set()
                    return
            self._wake.clear()
            if self._topics != self._topics_sent and self._topics_sent is not None:
                continue  # the subscription changed while the heartbeat was out
            until_poll_timeout = self._last_poll + self._max_poll_s - time.monotonic()
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, min(pause, until_poll_timeout)))
            except asyncio.TimeoutError:
                pass

    async def _leave_for_poll_timeout(self) -> None:
        """No poll for ``max_poll_interval_ms``: leave the group (epoch -1), as Java's share
        consumer does; the next poll joins again (:meth:`polled`)."""
        log.warning(
            "share group %s: no poll for max_poll_interval_ms (%.0f s): leaving the group "
            "until the next poll (poll more often, or raise max_poll_interval_ms)",
            self.group_id,
            self._max_poll_s,
        )
        request = share_ops.share_heartbeat_request(self.group_id, self.member_id, -1, None)
        await send_leave(
            self._client,
            self.group_id,
            request,
            self._client.timeouts.request_ms / 1000,
            "ShareGroupHeartbeat (leave: max poll interval)",
        )
        self._reset()
        self.state = "poll_timeout"

    def _reset(self) -> None:
        self.epoch = 0
        self.state = "unjoined"
        self._topics_sent = None
        if self._assignment:
            self._assignment = {}
            self._on_assignment()

    async def _heartbeat(self) -> None:
        topics = self._topics
        send_topics = topics if (self.epoch == 0 or topics != self._topics_sent) else None
        request = share_ops.share_heartbeat_request(
            self.group_id,
            self.member_id,
            self.epoch,
            send_topics,
            self._rack if self.epoch == 0 else None,
        )
        resp = await coordinator_call(
            self._client,
            self.group_id,
            _GROUP_KEY,
            request,
            lambda r: int(r.error_code),
            timeout_ms=max(self._interval_s * 1000, self._client.timeouts.request_ms),
            what="ShareGroupHeartbeat",
        )
        result = share_ops.parse_share_heartbeat(resp)
        if send_topics is not None:
            self._topics_sent = send_topics
        self.epoch = result.member_epoch
        self.state = "stable"
        if result.heartbeat_interval_ms > 0:
            self._interval_s = result.heartbeat_interval_ms / 1000
        if result.assignment is not None and result.assignment != self._assignment:
            self._assignment = result.assignment
            self._client.request_update()  # new topic ids may need names
            self._on_assignment()
        self.joined.set()

    async def leave(self, timeout_s: float) -> None:
        """Stop heartbeating and leave the group (epoch -1), waiting at most ``timeout_s``: an
        unknown, dead or moving coordinator is looked up again (FindCoordinator, every
        ``retry_backoff_ms``) and the leave sent to the new one within that time."""
        self._active = False
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        leaving, self._leaving = self._leaving, None
        if leaving is not None:
            await asyncio.gather(leaving, return_exceptions=True)
        await self._send_leave(timeout_s)

    async def _send_leave(self, timeout_s: float) -> None:
        if self.epoch <= 0 or self.state == "fatal":
            if self.state != "fatal":
                self.state = "left"
            self._drop_assignment()
            return
        self.state = "leaving"
        request = share_ops.share_heartbeat_request(self.group_id, self.member_id, -1, None)
        await send_leave(
            self._client, self.group_id, request, timeout_s, "ShareGroupHeartbeat (leave)"
        )
        self.epoch = -1
        self.state = "left"
        self._drop_assignment()

    def _drop_assignment(self) -> None:
        if self._assignment:
            self._assignment = {}
            self._on_assignment()

    def cancel(self) -> Any:
        """Cancel the loop without leaving (the consumer's task is being torn down)."""
        if self._leaving is not None:
            self._leaving.cancel()
        if self._task is not None:
            self._task.cancel()
        return self._task
