"""Share group membership: the ShareGroupHeartbeat loop (KIP-932).

The member makes its own id (a uuid, kept for the consumer's lifetime), joins with epoch 0 and
its subscription, then heartbeats every ``heartbeat_interval_ms`` the coordinator asks for. The
coordinator assigns partitions (by topic id; several members may share one partition); the
subscription is sent again only when it changed. UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the
member lost its place, drops its assignment and joins again with epoch 0. Leaving is a
heartbeat with epoch -1. A fatal error (authorization, a classic group of the same name) is
kept and raised by the consumer's next poll.

States: ``unjoined`` (epoch 0, no assignment) -> ``stable`` (epoch > 0, heartbeating) ->
``unjoined`` (fenced) ... -> ``leaving`` -> ``left``; ``fatal`` from any of them.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops import share as share_ops
from aiokafka_lite.ops._exec import coordinator_call
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
        #: a fatal error, raised by the consumer's next poll
        self.error: BaseException | None = None
        #: set once the first assignment (maybe empty) arrived
        self.joined = asyncio.Event()

    # -- subscription ---------------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._topics

    def subscribe(self, topics: frozenset[str]) -> None:
        """Change the subscription; the next heartbeat (sent now) carries it."""
        self._topics = topics
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

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        """Start heartbeating (joining first)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        backoff = self._client.retry_backoff_ms / 1000
        while True:
            pause = self._interval_s
            try:
                await self._heartbeat()
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
            try:
                await asyncio.wait_for(self._wake.wait(), pause)
            except asyncio.TimeoutError:
                pass

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
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.epoch <= 0 or self.state == "fatal":
            self.state = "left"
            return
        self.state = "leaving"
        request = share_ops.share_heartbeat_request(self.group_id, self.member_id, -1, None)
        try:
            if timeout_s <= 0:
                raise Errors.KafkaTimeoutError("no time left to leave")
            await asyncio.wait_for(
                coordinator_call(
                    self._client,
                    self.group_id,
                    _GROUP_KEY,
                    request,
                    lambda r: int(r.error_code),
                    timeout_ms=timeout_s * 1000,
                    what="ShareGroupHeartbeat (leave)",
                ),
                timeout_s,
            )
        except (Errors.KafkaError, asyncio.TimeoutError) as exc:
            # the coordinator drops the member after its session timeout
            log.info("share group %s: leaving failed: %r", self.group_id, exc)
        self.epoch = -1
        self.state = "left"
        self._assignment = {}

    def cancel(self) -> Any:
        """Cancel the loop without leaving (the consumer's task is being torn down)."""
        if self._task is not None:
            self._task.cancel()
        return self._task
