"""The member shell: the one place where group membership does I/O and keeps time.

It drives a sans-I/O heartbeat machine (:mod:`.share`, :mod:`.consumer`, and the stable phase
of :mod:`.classic`'s eager and cooperative members; DESIGN.md, "The membership engine"): it
sends the machine's heartbeats to the group coordinator through
``ops._exec.coordinator_call`` (coordinator discovery: an unknown, dead or moving coordinator is
looked up again), classifies a failure with :func:`~aiokafka_lite.errors.retry_action` (as sent
to a coordinator) and hands it to the machine, carries out the actions it returns (assignment
changes, rejoin at once, a fatal error kept for the application, leaves within a budget through
``ops.membership.send_leave``), keeps the heartbeat interval, the retry back-off and the max poll
interval, and runs its loop under the component's :class:`~aiokafka_lite._supervise.Supervisor`.

The loop runs only while the machine is subscribed (a share heartbeat without topics is
refused with INVALID_REQUEST): the first subscription starts it, an empty one stops it and
leaves; subscribing again joins with epoch 0 (a leave still under way finishes first). What the
host does with an assignment (naming topic ids, pause, commit, listener calls) is the host's:
the shell tells it through ``on_assignment`` and ``on_fatal``, and the host tells the shell
through :meth:`MemberShell.wake` when the machine may heartbeat again.

A classic member joins through its driver's JoinGroup/SyncGroup exchanges, not here: the
machine is ``heartbeating`` only in a completed generation, the driver tells the shell when a
JoinGroup was answered (:meth:`MemberShell.restart_interval`: the next heartbeat is a whole
interval later) and when the generation is applied (:meth:`MemberShell.stable`: the max poll
interval starts again, as Java's), and the shell tells the driver to join again (``on_rejoin``) and
lets it give its partitions up, still a member, before a leave for lack of polls
(``give_up``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite._timeouts import loop_time
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.ops.membership import send_leave
from aiokafka_lite.structs import TopicPartition

from .machine import Action, Assign, Fatal, Leave, Rejoin, Revoke, Send

__all__ = ["HeartbeatMachine", "MemberShell"]

log = logging.getLogger(__name__)

_GROUP_KEY = 0  # FindCoordinator key type of a group


class HeartbeatMachine(Protocol):
    """What the shell needs of a heartbeat protocol's machine (share, KIP-848 consumer,
    classic eager and cooperative)."""

    group_id: str
    member_id: str
    interval_s: float
    topics: frozenset[str]

    @property
    def epoch(self) -> int:
        """The member epoch (classic: the generation)."""

    @property
    def in_group(self) -> bool:
        """A member of the group now (epoch > 0; classic: a generation applied, which may be
        0 on some brokers): the max poll interval applies."""

    @property
    def state(self) -> Any: ...
    @property
    def subscribed(self) -> bool:
        """Something is subscribed: the loop runs (joining first)."""

    @property
    def heartbeating(self) -> bool:
        """The member heartbeats now (else the loop waits for :meth:`MemberShell.wake`)."""

    @property
    def subscription_unsent(self) -> bool: ...
    def join(self) -> Any:
        """Heartbeating (re)starts: out of the group, join with epoch 0."""

    def resync(self) -> None:
        """The next heartbeat carries the full state (after an unexpected error)."""

    def polled(self) -> bool: ...
    def heartbeat(self) -> Send: ...
    def answered(self, resp: Any) -> list[Action]: ...
    def failed(self, exc: Errors.KafkaError, action: RetryAction) -> list[Action]: ...
    def leave(self, *, poll_timeout: bool = False, operation: str = "default") -> list[Action]: ...
    def left(self) -> list[Action]: ...


class _Assigned(Protocol):
    assignment: dict[Any, frozenset[int]]


class MemberShell:
    """Keeps one member in its group: the heartbeat loop, leaves and timing of a machine."""

    def __init__(
        self,
        client: KafkaClient,
        machine: HeartbeatMachine,
        supervisor: Supervisor,
        *,
        on_assignment: Callable[[], None] = lambda: None,
        on_fatal: Callable[[], None] = lambda: None,
        on_rejoin: Callable[[], None] = lambda: None,
        give_up: Callable[[Revoke], Awaitable[None]] | None = None,
        max_poll_interval_ms: int = 300000,
        logger: logging.Logger = log,
    ) -> None:
        self._client = client
        self.machine = machine
        self._on_assignment = on_assignment
        self._on_fatal = on_fatal
        #: a classic member's answer asked for a rebalance: its driver joins again
        self._on_rejoin = on_rejoin
        #: awaited for a Revoke before a leave (classic: the revoke listener runs while still
        #: a member, so commits in it work); without it, a Revoke goes to ``on_assignment``
        self._give_up = give_up
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
        #: set by every heartbeat answered without error (cleared by who waits for the next)
        self.answered = asyncio.Event()
        self._max_poll_s = max_poll_interval_ms / 1000
        self._last_poll = 0.0  # (loop time) set by start() and by every poll
        self._due = 0.0  # (loop time) no heartbeat before (restart_interval)
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
        """Change a share member's subscription (see :meth:`subscription_changed`)."""
        machine: Any = self.machine
        self._apply(machine.subscribe(topics))
        self.subscription_changed()

    def subscription_changed(self) -> None:
        """The machine's subscription changed; the next heartbeat (sent now) carries it. Once
        started, the first subscription starts the heartbeats (joining) and an empty one
        leaves the group."""
        if self._active:
            if self.machine.subscribed:
                self._ensure_running()
            elif self._task is not None:
                task, self._task = self._task, None
                self._leaving = asyncio.ensure_future(self._leave_after(task))
        self._wake.set()

    def wake(self) -> None:
        """Heartbeat now (the host gave up lost partitions, or needs the current epoch)."""
        self._wake.set()

    def assignment(self) -> set[TopicPartition]:
        """The assigned partitions whose topic ids the metadata already maps to names (a
        metadata refresh is asked for the others)."""
        cluster = self._client.cluster
        names = {cluster.topic_id(t): t for t in cluster.topics(exclude_internal_topics=False)}
        out: set[TopicPartition] = set()
        missing = False
        machine: _Assigned = self.machine  # type: ignore[assignment]  # a share machine
        for tid, parts in machine.assignment.items():
            name = names.get(tid)
            if name is None:
                missing = True
                continue
            out.update(TopicPartition(name, p) for p in parts)
        if missing:
            self._client.request_update()
        return out

    def polled(self) -> bool:
        """The application polled: the max poll interval starts again; a member that left
        for lack of polls joins again (epoch 0), as Java's: then True."""
        self._last_poll = loop_time()
        if self.machine.polled():
            self._log.info("group %s: polled again, joining", self.group_id)
            self._wake.set()
            return True
        return False

    def restart_interval(self) -> None:
        """A classic JoinGroup was answered: the next heartbeat is a whole interval from now
        (as Java resets its heartbeat timer there). The broker answers the JoinGroups of a
        rebalance together, so the members heartbeat in phase and learn of the next
        rebalance together (an eager member out of phase would keep the others waiting
        without partitions for up to an interval)."""
        self._due = loop_time() + self.machine.interval_s
        self._wake.set()

    def stable(self) -> None:
        """A classic generation is applied: the heartbeats go on (a whole interval after the
        JoinGroup answer), and the max poll interval starts again, as Java's heartbeat thread
        resets its timers when a join completes (a join may take longer than the interval)."""
        self._last_poll = loop_time()
        self._wake.set()

    async def settled(self) -> None:
        """Until a leave under way (an unsubscription's) was sent: a classic driver joins
        again only after it."""
        leaving = self._leaving
        if leaving is not None:
            await asyncio.gather(leaving, return_exceptions=True)

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        """Start heartbeating (joining first) as soon as something is subscribed."""
        self._active = True
        self._last_poll = loop_time()
        if self.machine.subscribed:
            self._ensure_running()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            leaving = self._leaving
            self._task = asyncio.ensure_future(
                self._guard.run(lambda: self._run(leaving), self.machine.resync)
            )

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
        while machine.subscribed:  # unsubscribed: _leave_after() leaves
            if not machine.heartbeating:  # out of the group until the next poll
                self._wake.clear()
                await self._wake.wait()
                continue
            machine.join()
            if loop_time() - self._last_poll > self._max_poll_s and machine.in_group:
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
            until_poll_timeout = self._last_poll + self._max_poll_s - loop_time()
            due = self._due - loop_time()
            if due > 0:  # a classic JoinGroup was answered: a whole interval from it
                self._wake.clear()
                await self._wait_wake(
                    min(due, until_poll_timeout) if until_poll_timeout > 0 else due
                )
                continue
            pause = machine.interval_s
            send = machine.heartbeat()
            try:
                resp = await self._send(send, pause)
            except Errors.KafkaError as exc:
                action = retry_action(exc, coordinator=True)
                if action.retriable:
                    self._log.debug("group %s %s: %r", self.group_id, send.what, exc)
                    pause = backoff
                elif action is RetryAction.REJOIN:
                    self._log.info("group %s: %r, joining again", self.group_id, exc)
                actions = machine.failed(exc, action)
                if not actions and action is RetryAction.FATAL:  # classic: not the member's
                    self._log.warning("group %s %s: %r", self.group_id, send.what, exc)
            else:
                actions = machine.answered(resp)
                self.answered.set()
                self._guard.ok()
            if self._apply(actions):
                pause = 0
            if self.error is not None:
                return  # fatal for good (share; a host that takes it in on_fatal goes on)
            if machine.in_group:
                self.joined.set()
            self._wake.clear()
            if machine.subscription_unsent:
                continue  # the subscription changed while the heartbeat was out
            until_poll_timeout = self._last_poll + self._max_poll_s - loop_time()
            await self._wait_wake(max(0.0, min(pause, until_poll_timeout)))

    async def _send(self, send: Send, interval_s: float) -> Any:
        """One heartbeat at the coordinator (looked up again while unknown or moving); a
        refusal raises the code's error, with the broker's message when it gave one."""
        refusal: list[Any] = []

        def error_of(resp: Any) -> int:
            refusal[:] = [resp]
            return int(resp.error_code)

        def failure(code: int) -> BaseException:
            message = getattr(refusal[0], "error_message", None) if refusal else None
            if not message:
                return Errors.for_code(code)(send.what)
            return Errors.for_code(code)(f"{send.what} of group {self.group_id!r}: {message}")

        return await coordinator_call(
            self._client,
            self.group_id,
            _GROUP_KEY,
            send.request,
            error_of,
            timeout_ms=max(interval_s * 1000, self._client.timeouts.request_ms),
            what=send.what,
            failure=failure,
        )

    async def _wait_wake(self, timeout: float) -> None:
        """Until :meth:`wake` or ``timeout``; a cancellation always propagates (3.11's
        ``wait_for`` returns instead when the wake-up came at the same moment)."""
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait([waiter], timeout=timeout)
        finally:
            waiter.cancel()

    def _apply(self, actions: Sequence[Action]) -> bool:
        """Carry out the machine's actions but leaves; True when one asks to heartbeat now."""
        now = False
        for action in actions:
            if isinstance(action, Assign):
                if action.from_broker:
                    self._client.request_update()  # new topic ids may need names
                self._on_assignment()
            elif isinstance(action, Revoke):  # the host gives them up, then wakes the shell
                self._on_assignment()
            elif isinstance(action, Rejoin):
                now = True
                self._on_rejoin()
            elif isinstance(action, Fatal):
                self._log.error("group %s: %r", self.group_id, action.exc)
                self.error = action.exc
                self.joined.set()
                self._on_fatal()
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
            elif isinstance(action, Revoke) and self._give_up is not None:
                await self._give_up(action)
            else:
                self._apply([action])

    async def leave(self, timeout_s: float, operation: str = "default") -> None:
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
        await self._leave(self.machine.leave(operation=operation), timeout_s)

    def cancel(self) -> Any:
        """Cancel the loop without leaving (the component is being torn down)."""
        if self._leaving is not None:
            self._leaving.cancel()
        if self._task is not None:
            self._task.cancel()
        return self._task
