"""The roster's units and records (`roster_unit`, `member_unit`, spec and states): what is
written inside a unit is one step for every reader, across processes."""

from __future__ import annotations

from typing import Any

from teamd import budget, roster
from teamd.store.api import Store
from tests.store import forked

T = "t"
STEPS = 150


def make_team(store: Store) -> None:
    spec = {**roster.new_roster(T, ""), "members": [{"name": "ann"}], "step": 0}
    assert store.create_team(T, spec, {"schema": budget.SCHEMA, "spent_usd": 0.0})
    with store.roster_unit(T), store.member_unit(T, "ann"):
        store.write_state(T, "ann", {"name": "ann", "step": 0})


def writer(store: Store, steps: int) -> int:
    """Write the spec and the member's state as one roster step, `steps` times."""
    for step in range(1, steps + 1):
        with store.roster_unit(T):
            spec = store.read_spec(T)
            assert spec is not None
            store.write_spec(T, {**spec, "step": step})
            with store.member_unit(T, "ann"):
                store.write_state(T, "ann", {"name": "ann", "step": step})
    return steps


def reader(store: Store, until: int) -> list[tuple[Any, Any]]:
    """Read both inside the roster unit until the last step is seen; every pair that did
    not match (half a step)."""
    halves: list[tuple[Any, Any]] = []
    while True:
        with store.roster_unit(T):
            spec, state = store.read_spec(T), store.read_state(T, "ann")
        assert spec is not None and state is not None
        if spec["step"] != state["step"]:
            halves.append((spec["step"], state["step"]))
        if spec["step"] == until:
            return halves


def test_a_reader_never_sees_half_a_roster_step(store: Store) -> None:
    make_team(store)
    procs, out = forked.start(reader, [(store, STEPS), (store, STEPS)])
    wrote = forked.run(writer, [(store, STEPS)])
    assert wrote == [STEPS]
    assert forked.results(procs, out) == [[], []]


def test_member_unit_without_create_holds_nothing_for_a_member_with_no_state(
        store: Store) -> None:
    make_team(store)
    with store.member_unit(T, "bob", create=False) as held:
        assert held is False
    assert store.read_state(T, "bob") is None  # and made nothing
    with store.member_unit(T, "bob") as held:
        assert held is True
        store.write_state(T, "bob", {"name": "bob"})
    with store.member_unit(T, "bob", create=False) as held:
        assert held is True


def test_units_of_a_team_that_does_not_exist_hold_nothing(store: Store) -> None:
    with store.roster_unit("nope") as held:
        assert held is False
    with store.member_unit("nope", "ann") as held:
        assert held is False
    assert not store.team_exists("nope")
    assert store.read_spec("nope") is None


def test_a_unit_this_process_holds_is_entered_again_without_waiting(store: Store) -> None:
    make_team(store)
    with store.roster_unit(T) as outer, store.roster_unit(T) as inner:
        assert outer and inner
        with store.member_unit(T, "ann") as first, store.member_unit(T, "ann") as second:
            assert first and second


def test_a_state_dropped_is_gone(store: Store) -> None:
    make_team(store)
    with store.roster_unit(T), store.member_unit(T, "ann"):
        store.drop_state(T, "ann")
    assert store.read_state(T, "ann") is None
