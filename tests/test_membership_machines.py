"""The membership engine's sans-I/O machines, driven without a broker by fabricated answers
(a machine is pure: these are its contract with the member shell)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.membership import (
    COOPERATIVE_TRANSITIONS,
    EAGER_TRANSITIONS,
    SHARE_TRANSITIONS,
    Assign,
    ClassicMachine,
    ClassicState,
    CooperativeMachine,
    EagerMachine,
    Fatal,
    Leave,
    Rejoin,
    Retry,
    Revoke,
    ShareMachine,
    ShareState,
)
from aiokafka_lite.membership.consumer import CONSUMER_TRANSITIONS, ConsumerMachine, ConsumerState
from aiokafka_lite.protocol import messages as m

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
R = m.ShareGroupHeartbeatResponse


def answer(epoch: int, assignment: dict[Any, list[int]] | None = None, interval: int = 500) -> Any:
    """A ShareGroupHeartbeat answer as the coordinator sends it."""
    return R(
        error_code=0,
        error_message=None,
        member_id="m",
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=None
        if assignment is None
        else R.Assignment(
            topic_partitions=[
                R.TopicPartitions(topic_id=t, partitions=p) for t, p in assignment.items()
            ]
        ),
    )


def joined(topics: tuple[str, ...] = ("a",)) -> ShareMachine:
    machine = ShareMachine("g", "m", rack_id="r1")
    machine.subscribe(topics)
    machine.heartbeat()
    machine.answered(answer(3, {T1: [0, 1]}))
    return machine


def failure(exc: Errors.KafkaError) -> tuple[Errors.KafkaError, RetryAction]:
    return exc, retry_action(exc, coordinator=True)


def test_share_join_sends_everything_then_only_changes() -> None:
    machine = ShareMachine("g", "m", rack_id="r1")
    assert machine.subscribe(["a", "b"]) == []
    first = machine.heartbeat().request
    assert (first.member_epoch, first.rack_id) == (0, "r1")
    assert first.subscribed_topic_names == ["a", "b"]
    actions = machine.answered(answer(3, {T1: [1, 0]}, interval=700))
    assert actions == [Assign({T1: frozenset({0, 1})}, from_broker=True)]
    assert (machine.state, machine.epoch, machine.interval_s) == (ShareState.STABLE, 3, 0.7)
    steady = machine.heartbeat().request
    assert (steady.member_epoch, steady.rack_id, steady.subscribed_topic_names) == (3, None, None)
    # the same assignment again changes nothing; a new one is handed to the shell
    assert machine.answered(answer(3, {T1: [0, 1]})) == []
    assert machine.answered(answer(4, {T2: [0]})) == [Assign({T2: frozenset({0})}, True)]
    machine.subscribe(["a"])
    assert machine.subscription_unsent
    assert machine.heartbeat().request.subscribed_topic_names == ["a"]
    machine.answered(answer(4))
    assert not machine.subscription_unsent


@pytest.mark.parametrize("exc", [Errors.FencedMemberEpochError(), Errors.UnknownMemberIdError()])
def test_share_fenced_drops_the_assignment_and_joins_at_epoch_0(exc: Errors.KafkaError) -> None:
    machine = joined()
    assert machine.failed(*failure(exc)) == [Assign({}), Rejoin()]
    assert (machine.state, machine.epoch, machine.assignment) == (ShareState.UNJOINED, 0, {})
    request = machine.heartbeat().request
    assert (request.member_epoch, request.subscribed_topic_names, request.member_id) == (
        0,
        ["a"],
        "m",
    )


@pytest.mark.parametrize(
    "exc",
    [
        Errors.NotCoordinatorError(),
        Errors.CoordinatorNotAvailableError(),
        Errors.KafkaConnectionError(),
        Errors.GroupLoadInProgressError(),
    ],
)
def test_share_retriable_errors_keep_the_membership(exc: Errors.KafkaError) -> None:
    machine = joined()
    assert machine.failed(*failure(exc)) == []
    assert (machine.state, machine.epoch) == (ShareState.STABLE, 3)


def test_share_fatal_error_is_kept_and_never_left() -> None:
    machine = joined()
    exc = Errors.GroupAuthorizationFailedError()
    assert machine.failed(*failure(exc)) == [Fatal(exc)]
    assert machine.state is ShareState.FATAL
    assert machine.leave() == [Assign({})]  # no leave heartbeat: the group refused us
    assert machine.state is ShareState.FATAL
    with pytest.raises(Errors.IllegalStateError):
        machine.answered(answer(5))


def test_share_leave_then_subscribe_again_joins_at_epoch_0() -> None:
    machine = joined()
    assert machine.subscribe([]) == [Assign({})]  # at once, as Java's unsubscribe()
    (leave,) = machine.leave()
    assert isinstance(leave, Leave) and leave.request.member_epoch == -1
    assert machine.state is ShareState.LEAVING
    assert machine.left() == []
    assert (machine.state, machine.epoch) == (ShareState.LEFT, -1)
    machine.subscribe(["a"])
    machine.join()
    assert machine.heartbeat().request.member_epoch == 0
    assert machine.state is ShareState.UNJOINED


def test_share_poll_timeout_leaves_until_the_next_poll() -> None:
    machine = joined()
    (leave,) = machine.leave(poll_timeout=True)
    assert isinstance(leave, Leave) and "max poll interval" in leave.what
    assert machine.left() == [Assign({})]
    assert (machine.state, machine.epoch, machine.heartbeating) == (
        ShareState.POLL_TIMEOUT,
        0,
        False,
    )
    assert machine.polled() is True
    assert machine.heartbeating and machine.heartbeat().request.subscribed_topic_names == ["a"]
    assert machine.polled() is False


def test_share_leave_before_joining_sends_nothing() -> None:
    machine = ShareMachine("g", "m")
    machine.subscribe(["a"])
    assert machine.leave() == []
    assert machine.state is ShareState.LEFT


def test_share_transition_table_refuses_the_rest() -> None:
    machine = ShareMachine("g", "m")
    assert ShareState.STABLE not in SHARE_TRANSITIONS[ShareState.LEFT]
    machine.leave()
    with pytest.raises(Errors.IllegalStateError, match="left cannot become stable"):
        machine.answered(answer(1))
    # every state is in the table; FATAL has no way out
    assert set(SHARE_TRANSITIONS) == set(ShareState)
    assert SHARE_TRANSITIONS[ShareState.FATAL] == frozenset()


# -- KIP-848 (ConsumerGroupHeartbeat) ---------------------------------------------------------

C = m.ConsumerGroupHeartbeatResponse


def consumer_answer(epoch: int, target: dict[Any, list[int]] | None = None) -> Any:
    """A ConsumerGroupHeartbeat answer without error."""
    return C(
        error_code=0,
        error_message=None,
        member_id="m",
        member_epoch=epoch,
        heartbeat_interval_ms=800,
        assignment=None
        if target is None
        else C.Assignment(
            topic_partitions=[
                C.TopicPartitions(topic_id=t, partitions=p) for t, p in target.items()
            ]
        ),
    )


def consumer_member(instance_id: str | None = None) -> ConsumerMachine:
    machine = ConsumerMachine(
        "g",
        "m",
        instance_id=instance_id,
        rack_id="r",
        server_assignor="uniform",
        rebalance_timeout_ms=9000,
    )
    assert machine.join() is True
    return machine


def test_consumer_join_reconcile_stable_and_only_changes_sent() -> None:
    machine = consumer_member()
    first = machine.heartbeat(["b", "a"], None).request
    assert (first.member_epoch, first.rack_id, first.rebalance_timeout_ms) == (0, "r", 9000)
    assert (first.subscribed_topic_names, first.server_assignor) == (["a", "b"], "uniform")
    assert first.subscribed_topic_regex is None and first.topic_partitions == []
    actions = machine.answered(consumer_answer(5, {T1: [0, 1]}))
    assert actions == [Assign({T1: frozenset({0, 1})}, from_broker=True)]
    assert (machine.state, machine.epoch, machine.interval_s) == (ConsumerState.RECONCILING, 5, 0.8)
    machine.reconciling()
    machine.owns({T1: frozenset({0, 1})})
    assert machine.state is ConsumerState.STABLE
    ack = machine.heartbeat(["a", "b"], None).request  # only the owned partitions changed
    assert (ack.member_epoch, ack.subscribed_topic_names, ack.server_assignor) == (5, None, None)
    assert [(tp.topic_id, tp.partitions) for tp in ack.topic_partitions] == [(T1, [0, 1])]
    assert machine.heartbeat(["a", "b"], None).request.topic_partitions is None
    # the same target again is no news; an error makes the next heartbeat carry everything
    assert machine.answered(consumer_answer(5, {T1: [1, 0]})) == []
    assert machine.failed(Errors.KafkaConnectionError()) == []
    assert machine.heartbeat(["a", "b"], None).request.subscribed_topic_names == ["a", "b"]


def test_consumer_broker_regex_sends_no_names_and_clears_with_empty_string() -> None:
    machine = consumer_member()
    request = machine.heartbeat([], "t-.*").request
    assert (request.subscribed_topic_names, request.subscribed_topic_regex) == ([], "t-.*")
    machine.answered(consumer_answer(1))
    assert machine.heartbeat(["x"], None).request.subscribed_topic_regex == ""


@pytest.mark.parametrize(
    "code", [Errors.FencedMemberEpochError.errno, Errors.UnknownMemberIdError.errno]
)
def test_consumer_fenced_loses_everything_then_joins_at_epoch_0(code: int) -> None:
    machine = consumer_member()
    machine.heartbeat(["a"], None)
    machine.answered(consumer_answer(4, {T1: [0]}))
    actions = machine.refused(code, "fenced", retry_action(code, coordinator=True))
    assert actions == [Revoke(None, lost=True), Rejoin()]
    assert (machine.state, machine.epoch, machine.target, machine.lost_pending) == (
        ConsumerState.FENCED,
        0,
        None,
        True,
    )
    machine.gave_up()
    assert (machine.state, machine.owned, machine.lost_pending) == (
        ConsumerState.JOINING,
        {},
        False,
    )
    request = machine.heartbeat(["a"], None).request
    assert (request.member_id, request.member_epoch, request.rack_id) == ("m", 0, "r")


def test_consumer_refusals_retry_or_stay_fatal_as_java() -> None:
    machine = consumer_member()
    for code in (14, 15, 16, 7):  # loading, coordinator moved / unavailable, timed out
        assert machine.refused(code, "", retry_action(code, coordinator=True)) == []
    assert machine.state is ConsumerState.JOINING
    (fatal,) = machine.refused(35, "", retry_action(35, coordinator=True))
    assert isinstance(fatal, Fatal) and "CONSUMER group protocol" in str(fatal.exc)
    assert machine.state is ConsumerState.FATAL
    for code in (111, 113):  # UNRELEASED_INSTANCE_ID, STALE_MEMBER_EPOCH in a heartbeat
        (fatal,) = machine.refused(code, "no", retry_action(code, coordinator=True))
        assert isinstance(fatal, Fatal) and isinstance(fatal.exc, Errors.for_code(code))
    # the heartbeats go on after the fatal error was raised: the next answer reconciles
    machine.answered(consumer_answer(2, {T1: [3]}))
    machine.reconciling()
    assert machine.state is ConsumerState.RECONCILING


def test_consumer_poll_timeout_and_static_leave() -> None:
    machine = consumer_member(instance_id="i-1")
    machine.heartbeat(["a"], None)
    machine.answered(consumer_answer(3, {T1: [0]}))
    lost, leave = machine.leave(poll_timeout=True)
    assert lost == Revoke(None, lost=True) and machine.heartbeating is False
    assert machine.polled() is False  # the partitions are not given up yet
    assert isinstance(leave, Leave) and leave.request.member_epoch == -2  # static: broker waits
    assert machine.left() == []
    machine.gave_up()
    assert machine.state is ConsumerState.UNSUBSCRIBED  # stale: joins on the next poll
    assert machine.polled() is True and machine.join() is True
    assert machine.state is ConsumerState.JOINING and machine.leave() != []
    machine.left()
    assert machine.leave() == []  # out of the group: nothing to send


def test_consumer_transition_table_refuses_the_rest() -> None:
    assert set(CONSUMER_TRANSITIONS) == set(ConsumerState)
    machine = ConsumerMachine("g", "m")
    with pytest.raises(Errors.IllegalStateError, match="UNSUBSCRIBED cannot become RECONCILING"):
        machine.reconciling()


# -- classic eager / cooperative (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ----------------


def join_answer(
    code: int = 0, generation: int = 1, member: str = "m-1", leader: str = "m-1"
) -> Any:
    """A JoinGroup answer (the fields the machine reads)."""
    return SimpleNamespace(
        error_code=code,
        generation_id=generation,
        member_id=member,
        protocol_name="range",
        leader=leader,
    )


def classic_member(machine: type[ClassicMachine], generation: int = 1) -> ClassicMachine:
    """A member through JoinGroup and SyncGroup into ``generation`` (subscribed)."""
    member = machine("g")
    member.subscribe(["t"])
    member.join_request([("range", b"")], 10000, 10000)
    assert member.join_answered(join_answer(generation=generation), False) == []
    assert member.state is ClassicState.SYNCING and member.leader
    assert member.sync_answered(0) == [Assign()]
    assert (member.state, member.rejoin) == (ClassicState.STABLE, False)
    return member


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_join_member_id_required_then_sync(machine: type[ClassicMachine]) -> None:
    member = machine("g", instance_id=None)
    assert member.rejoin and member.generation == -1
    first = member.join_request([("range", b"x")], 10000, 20000).request
    assert (first.member_id, first.session_timeout_ms, first.rebalance_timeout_ms) == (
        "",
        10000,
        20000,
    )
    # KIP-394: the broker names the member, the same JoinGroup goes again at once with it
    required = join_answer(Errors.MemberIdRequired.errno, member="m-1")
    assert member.join_answered(required, False) == [Rejoin()]
    assert member.join_request([("range", b"x")], 10000, 20000).request.member_id == "m-1"
    assert member.join_answered(join_answer(generation=4, leader="other"), False) == []
    assert (member.generation, member.protocol, member.leader) == (4, "range", False)
    sync = member.sync_request({}).request
    assert (sync.generation_id, sync.member_id, sync.protocol_name) == (4, "m-1", "range")
    assert member.sync_answered(0) == [Assign()]
    assert member.heartbeat().request.generation_id == 4


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_refused_joins_retry_or_stay_fatal(machine: type[ClassicMachine]) -> None:
    member = machine("g")
    for code in (14, 15, 16, 27):  # loading, coordinator gone / moved, rebalance in progress
        member.join_request([], 1, 1)
        assert member.join_answered(join_answer(code), False) == [Retry()]
        assert member.state is ClassicState.UNJOINED
    member.join_request([], 1, 1)
    (fatal,) = member.join_answered(join_answer(Errors.InconsistentGroupProtocolError.errno), False)
    assert isinstance(fatal, Fatal) and isinstance(fatal.exc, Errors.InconsistentGroupProtocolError)
    assert member.state is ClassicState.FATAL
    member.join_request([], 1, 1)  # raised once; the member joins again
    member.join_failed()  # not answered (connection lost): join again after the back-off
    assert member.state is ClassicState.UNJOINED


def test_eager_membership_errors_rejoin_and_never_lose() -> None:
    member = classic_member(EagerMachine, generation=3)
    assert member.heartbeat_answered(Errors.RebalanceInProgressError.errno, 3) == [Rejoin()]
    assert member.rejoin and member.state is ClassicState.STABLE
    # no heartbeat while the rejoin is due, except while the revoke listener runs before it
    assert member.heartbeating is False
    member.revoking = True
    assert member.heartbeating is True
    # the driver already knows: a second answer asks nothing more of it
    assert member.heartbeat_answered(Errors.RebalanceInProgressError.errno, 3) == []
    member.revoking = False
    assert member.membership_lost(Errors.UnknownMemberIdError.errno) is True
    assert (member.member_id, member.generation, member.state) == ("", -1, ClassicState.UNJOINED)
    # an eager member has nothing to lose: its table has no LOST
    with pytest.raises(Errors.IllegalStateError, match="cannot become LOST"):
        member._to(ClassicState.LOST)


def test_cooperative_lost_generation_loses_the_partitions_but_not_for_old_answers() -> None:
    member = classic_member(CooperativeMachine, generation=5)
    # an answer to a request of an older generation says nothing about this one
    assert member.membership_lost(Errors.IllegalGenerationError.errno, 4) is False
    assert (member.state, member.rejoin) == (ClassicState.STABLE, False)
    # REBALANCE_IN_PROGRESS: the partitions stay (a refused commit is RebalanceInProgressError)
    assert member.membership_lost(Errors.RebalanceInProgressError.errno, 5) is False
    assert member.state is ClassicState.STABLE and member.rejoin
    # ILLEGAL_GENERATION while the JoinGroup is out: its answer brings the new generation
    member.join_request([], 1, 1)
    assert member.membership_lost(Errors.IllegalGenerationError.errno, 5) is False
    assert member.state is ClassicState.JOINING
    assert member.join_answered(join_answer(generation=6), True) == []
    member.sync_answered(0)
    actions = member.heartbeat_answered(Errors.IllegalGenerationError.errno, 6)
    assert actions == [Revoke(None, lost=True)]
    assert (member.state, member.generation) == (ClassicState.LOST, -1)
    assert isinstance(member, CooperativeMachine)
    member.gave_up()  # on_partitions_lost ran: a join from scratch
    assert member.state is ClassicState.UNJOINED
    # a JoinGroup answered UNKNOWN_MEMBER_ID while partitions are owned: lost first
    member.join_request([], 1, 1)
    lost = member.join_answered(join_answer(Errors.UnknownMemberIdError.errno), True)
    assert lost == [Revoke(None, lost=True)] and member.state is ClassicState.LOST


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_poll_timeout_leaves_until_the_next_poll(machine: type[ClassicMachine]) -> None:
    member = classic_member(machine)
    assert member.poll_timed_out() == [Revoke(None)]  # revoked, not lost: still a member
    member.revoking = True
    assert member.heartbeating is False
    (leave,) = member.leave("max_poll_interval_ms exceeded")
    assert isinstance(leave, Leave) and leave.request.members[0].member_id == "m-1"
    member.left()
    assert (member.member_id, member.generation) == ("", -1)
    assert member.polled() is True and member.state is ClassicState.UNJOINED and member.rejoin
    assert member.polled() is False
    assert member.leave("stop") == []  # out of the group: nothing to send


def test_classic_static_member_never_sends_leavegroup() -> None:
    member = EagerMachine("g", instance_id="i-1")
    member.join_request([], 1, 1)
    member.join_answered(join_answer(generation=2), False)
    member.sync_answered(0)
    assert member.leave("stop") == [] and member.generation == -1  # the broker keeps its place
    (fatal,) = member.heartbeat_answered(Errors.FencedInstanceIdError.errno, 2)
    assert isinstance(fatal, Fatal) and "i-1" in str(fatal.exc)


def test_classic_transition_tables_cover_every_state() -> None:
    assert set(EAGER_TRANSITIONS) == set(ClassicState) == set(COOPERATIVE_TRANSITIONS)
    assert all(ClassicState.LOST not in targets for targets in EAGER_TRANSITIONS.values())
    member = EagerMachine("g")
    with pytest.raises(Errors.IllegalStateError, match="UNJOINED cannot become STABLE"):
        member.sync_answered(0)


def test_close_options_choose_the_leave() -> None:
    """KIP-1092's group membership operation at stop(), as Java 4.4's CloseOptions."""
    static = classic_member(EagerMachine)
    static.instance_id = "i-1"
    (leave,) = static.leave("stop", "leave_group")  # a static member leaves for good
    assert isinstance(leave, Leave)
    assert leave.request.members[0].group_instance_id == "i-1"
    dynamic = classic_member(CooperativeMachine)
    assert dynamic.leave("stop", "remain_in_group") == [] and dynamic.generation == -1
    member = consumer_member(instance_id="i-2")
    member.heartbeat(["a"], None)
    member.answered(consumer_answer(3))
    (gone,) = member.leave(operation="leave_group")
    assert isinstance(gone, Leave) and gone.request.member_epoch == -1


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_heartbeats_only_in_a_stable_generation(machine: type[ClassicMachine]) -> None:
    """The member shell's view of a classic member: it heartbeats in an applied generation
    only (never while its JoinGroup or SyncGroup is out), and not when unsubscribed."""
    member = machine("g", interval_s=0.5)
    member.subscribe(["t"])
    assert (member.heartbeating, member.epoch, member.interval_s) == (False, -1, 0.5)
    assert member.join() is False and member.subscription_unsent is False  # the driver joins
    member.join_request([("range", b"")], 10000, 10000)
    assert member.heartbeating is False  # JOINING
    member.join_answered(join_answer(generation=7), False)
    assert member.heartbeating is False  # SYNCING
    assert member.in_group is False
    member.sync_answered(0)
    assert member.heartbeating is True and member.epoch == 7 and member.in_group
    # Tansu numbers its first generation 0: in the group all the same (the max poll interval)
    assert classic_member(machine, generation=0).in_group
    send = member.heartbeat()
    assert (send.what, send.request.generation_id) == ("Heartbeat", 7)
    assert member.answered(SimpleNamespace(error_code=0)) == []
    member.subscribe(None)
    assert member.heartbeating is False and member.leave()[0].request.members[0].reason == (
        "unsubscribed"
    )


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_heartbeat_failures_as_the_shell_reports_them(
    machine: type[ClassicMachine],
) -> None:
    """What the shell hands the machine: a refusal as the code's error (with its
    retry_action), a lost connection as a retriable error."""
    member = classic_member(machine, generation=4)
    member.heartbeat()
    # coordinator errors: nothing for the member (the shell looks the coordinator up again)
    for exc in (Errors.NotCoordinatorError("x"), Errors.KafkaConnectionError("x")):
        assert member.failed(exc, retry_action(exc, coordinator=True)) == []
    assert member.heartbeating
    # another member took the static id: fatal, raised by the next poll
    fenced = Errors.FencedInstanceIdError("x")
    (fatal,) = member.failed(fenced, retry_action(fenced, coordinator=True))
    assert isinstance(fatal, Fatal) and member.rejoin and not member.heartbeating
    # a rebalance: the driver joins (said once)
    member = classic_member(machine, generation=4)
    member.heartbeat()
    rebalance = Errors.RebalanceInProgressError("x")
    assert member.failed(rebalance, RetryAction.REJOIN) == [Rejoin()]
    assert member.failed(rebalance, RetryAction.REJOIN) == []
    # the generation is gone: reset (a new member id), join again; cooperative: lost first
    member = classic_member(machine, generation=4)
    member.heartbeat()
    actions = member.failed(Errors.UnknownMemberIdError("x"), RetryAction.REJOIN)
    assert (member.member_id, member.generation, member.rejoin) == ("", -1, True)
    assert actions == ([Revoke(None, lost=True)] if member.COOPERATIVE else [Rejoin()])
    # an answer to a heartbeat of an older generation says nothing of this one (cooperative)
    member = classic_member(machine, generation=4)
    member.heartbeat()
    member.generation = 5
    stale = member.failed(Errors.IllegalGenerationError("x"), RetryAction.REJOIN)
    assert stale == ([] if member.COOPERATIVE else [Rejoin()])


@pytest.mark.parametrize("machine", [EagerMachine, CooperativeMachine])
def test_classic_leave_for_lack_of_polls_revokes_first(machine: type[ClassicMachine]) -> None:
    """The shell's leave for lack of polls: Revoke (not lost: the host's listener runs while
    still a member), then the LeaveGroup; the next poll joins again."""
    member = classic_member(machine, generation=2)
    revoke, leave = member.leave(poll_timeout=True)
    assert revoke == Revoke(None) and isinstance(leave, Leave)
    assert leave.request.members[0].reason == "max_poll_interval_ms exceeded"
    assert member.left() == [] and member.state is ClassicState.POLL_TIMEOUT
    assert not member.heartbeating
    assert member.polled() is True and member.rejoin and member.state is ClassicState.UNJOINED
