"""The member shell: the one place where group membership does I/O and keeps time.

It drives a sans-I/O machine (:mod:`.share` today; DESIGN.md, "The membership engine", says
which protocols are on it): it sends the machine's heartbeats to the group coordinator through
``ops._exec.coordinator_call`` (coordinator discovery: an unknown, dead or moving coordinator is
looked up again), classifies a failure with :func:`~aiokafka_lite.errors.retry_action` (as sent
to a coordinator) and hands it to the machine, carries out the actions it returns (assignment
changes, rejoin at once, a fatal error kept for the application, leaves within a budget through
``ops.membership.send_leave``), keeps the heartbeat interval, the retry back-off and the max poll
interval, and runs its loop under the component's :class:`~aiokafka_lite._supervise.Supervisor`.

The loop runs only while the machine has something subscribed (a share heartbeat without
topics is refused with INVALID_REQUEST): the first topics start it, an empty subscription stops
it and leaves; subscribing again joins with epoch 0 (a leave still under way finishes first).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.ops.membership import send_leave
from aiokafka_lite.structs import TopicPartition

from .machine import Action, Assign, Fatal, Leave, Rejoin, Send

__all__ = ["HeartbeatMachine", "MemberShell"]

log = logging.getLogger(__name__)

_GROUP_KEY = 0  # FindCoordinator key type of a group


class HeartbeatMachine(Protocol):
    """What the shell needs of a heartbeat protocol's machine (share; KIP-848 next)."""

    group_id: str
    member_id: str
    epoch: int
    interval_s: float
    topics: frozenset[str]
    assignment: dict[Any, frozenset[int]]

    @property
    def state(self) -> Any: ...
    @property
    def heartbeating(self) -> bool: ...
    @property
    def subscription_unsent(self) -> bool: ...
    def subscribe(self, topics: Iterable[str]) -> list[Action]: ...
    def join(self) -> None: ...
    def polled(self) -> bool: ...
    def heartbeat(self) -> Send: ...
    def answered(self, resp: Any) -> list[Action]: ...
    def failed(self, exc: Errors.KafkaError, action: RetryAction) -> list[Action]: ...
    def leave(self, *, poll_timeout: bool = False) -> list[Action]: ...
    def left(self) -> list[Action]: ...


class MemberShell:
    """Keeps one member in its group: the heartbeat loop, leaves and timing of a machine."""

    def __init__(
        self,
        client: KafkaClient,
        machine: HeartbeatMachine,
        supervisor: Supervisor,
        *,
        on_assignment: Callable[[], None] = lambda: None,
        max_poll_interval_ms: int = 300000,
        logger: logging.Logger = log,
    ) -> None:
        self._client = client
        self.machine = machine
        self._on_assignment = on_assignment
        self._log = logger
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: a leave (unsubscribe) still under way: a new join waits for it
        self._leaving: asyncio.Task[None] | None = None
        #: start() was called: a subscription change starts or stops the loop
        self._active = False
        #: a fatal error, raised by the application's next call
        self.error: BaseException | None = None
        #: set once the first answer (maybe with an empty assignment) or a fatal error came
        self.joined = asyncio.Event()
        self._max_poll_s = max_poll_interval_ms / 1000
        self._last_poll = time.monotonic()
        #: the component's unexpected background errors (one rule: ``_supervise``)
        self.supervisor = supervisor
        self._guard = supervisor.guard("heartbeat", logger)

    # -- what the application sees ---------------------------------------------------------

    @property
    def group_id(self) -> str:
        """The group."""
        return self.machine.group_id

    @property
    def member_id(self) -> str:
        """This member's id (made by the client, kept for its lifetime)."""
        return self.machine.member_id

    @property
    def topics(self) -> frozenset[str]:
        """The subscribed topics."""
        return self.machine.topics

    def subscribe(self, topics: Iterable[str]) -> None:
        """Change the subscription; the next heartbeat (sent now) carries it. Once started,
        the first topics start the heartbeats (joining) and no topics leave the group."""
        self._apply(self.machine.subscribe(topics))
        if self._active:
            if self.machine.topics:
                self._ensure_running()
            elif self._task is not None:
                task, self._task = self._task, None
                self._leaving = asyncio.ensure_future(self._leave_after(task))
        self._wake.set()

    def assignment(self) -> set[TopicPartition]:
        """The assigned partitions whose topic ids the metadata already maps to names (a
        metadata refresh is asked for the others)."""
        cluster = self._client.cluster
        names = {cluster.topic_id(t): t for t in cluster.topics(exclude_internal_topics=False)}
        out: set[TopicPartition] = set()
        missing = False
        for tid, parts in self.machine.assignment.items():
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
        if self.machine.polled():
            self._log.info("group %s: polled again, joining", self.group_id)
            self._wake.set()

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        """Start heartbeating (joining first) as soon as something is subscribed."""
        self._active = True
        if self.machine.topics:
            self._ensure_running()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            leaving = self._leaving
            self._task = asyncio.ensure_future(self._guard.run(lambda: self._run(leaving)))

    async def _leave_after(self, task: asyncio.Task[None]) -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await self._leave(self.machine.leave(), self._client.timeouts.request_ms / 1000)

    async def _run(self, leaving: asyncio.Task[None] | None = None) -> None:
        if leaving is not None:  # unsubscribed, then subscribed again: leave first
            await asyncio.gather(leaving, return_exceptions=True)
        machine = self.machine
        machine.join()
        backoff = self._client.retry_backoff_ms / 1000
        while True:
            if not machine.heartbeating:  # out of the group until the next poll
                self._wake.clear()
                await self._wake.wait()
                continue
            if time.monotonic() - self._last_poll > self._max_poll_s and machine.epoch > 0:
                self._log.warning(
                    "group %s: no poll for max_poll_interval_ms (%.0f s): leaving the group "
                    "until the next poll (poll more often, or raise max_poll_interval_ms)",
                    self.group_id,
                    self._max_poll_s,
                )
                await self._leave(
                    machine.leave(poll_timeout=True), self._client.timeouts.request_ms / 1000
                )
                continue
            pause = machine.interval_s
            send = machine.heartbeat()
            try:
                resp = await coordinator_call(
                    self._client,
                    self.group_id,
                    _GROUP_KEY,
                    send.request,
                    lambda r: int(r.error_code),
                    timeout_ms=max(pause * 1000, self._client.timeouts.request_ms),
                    what=send.what,
                )
            except Errors.KafkaError as exc:
                action = retry_action(exc, coordinator=True)
                if action.retriable:
                    self._log.debug("group %s %s: %r", self.group_id, send.what, exc)
                    pause = backoff
                elif action is RetryAction.REJOIN:
                    self._log.info("group %s: %r, joining again", self.group_id, exc)
                actions = machine.failed(exc, action)
            else:
                actions = machine.answered(resp)
                self._guard.ok()
            if self._apply(actions):
                pause = 0
            if self.error is not None:
                return
            if machine.epoch > 0:
                self.joined.set()
            self._wake.clear()
            if machine.subscription_unsent:
                continue  # the subscription changed while the heartbeat was out
            until_poll_timeout = self._last_poll + self._max_poll_s - time.monotonic()
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, min(pause, until_poll_timeout)))
            except asyncio.TimeoutError:
                pass

    def _apply(self, actions: Sequence[Action]) -> bool:
        """Carry out the machine's actions but leaves; True when one asks to heartbeat now."""
        now = False
        for action in actions:
            if isinstance(action, Assign):
                if action.from_broker:
                    self._client.request_update()  # new topic ids may need names
                self._on_assignment()
            elif isinstance(action, Rejoin):
                now = True
            elif isinstance(action, Fatal):
                self._log.error("group %s: %r", self.group_id, action.exc)
                self.error = action.exc
                self.joined.set()
            elif isinstance(
                action, Leave
            ):  # pragma: no cover - the machines return it from leave()
                raise Errors.IllegalStateError(f"a leave outside leave(): {action.what}")
        return now

    async def _leave(self, actions: Sequence[Action], timeout_s: float) -> None:
        """Send the machine's leave (an unknown, dead or moving coordinator is looked up again
        within ``timeout_s``), then tell the machine it was sent."""
        for action in actions:
            if isinstance(action, Leave):
                await send_leave(
                    self._client, self.group_id, action.request, timeout_s, action.what
                )
                self._apply(self.machine.left())
            else:
                self._apply([action])

    async def leave(self, timeout_s: float) -> None:
        """Stop heartbeating and leave the group, waiting at most ``timeout_s``: an unknown,
        dead or moving coordinator is looked up again (FindCoordinator, every
        ``retry_backoff_ms``) and the leave sent to the new one within that time."""
        self._active = False
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        leaving, self._leaving = self._leaving, None
        if leaving is not None:
            await asyncio.gather(leaving, return_exceptions=True)
        await self._leave(self.machine.leave(), timeout_s)

    def cancel(self) -> Any:
        """Cancel the loop without leaving (the component is being torn down)."""
        if self._leaving is not None:
            self._leaving.cancel()
        if self._task is not None:
            self._task.cancel()
        return self._task
