"""The requirements algebra: set laws (hypothesis) and Karpenter's undefined-key rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import labels as wk
from reconciler.model.requirements import (
    ALLOW_UNDEFINED_WELL_KNOWN,
    Requirement,
    RequirementError,
    Requirements,
)

UNIVERSE = ("a", "b", "c", "0", "1", "2", "3", "5", "8", "10", "-1", "")
TEXT = st.sampled_from(("a", "b", "c", "1", "2", "3", "5", "8"))


@st.composite
def requirements(draw, key: str = "k") -> Requirement:
    operator = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")))
    if operator in ("Gt", "Lt", "Gte", "Lte"):
        values = [str(draw(st.integers(0, 9)))]
    elif operator == "In":
        values = draw(st.lists(TEXT, min_size=1, max_size=4))
    elif operator == "NotIn":
        values = draw(st.lists(TEXT, max_size=4))
    else:
        values = []
    min_values = draw(st.one_of(st.none(), st.integers(1, 3)))
    return Requirement.new(key, operator, values, min_values)


def members(requirement: Requirement) -> set[str]:
    return {v for v in UNIVERSE if requirement.has(v)}


def nonempty(requirement: Requirement) -> bool:
    return requirement.complement or bool(requirement.values)


@given(requirements(), requirements())
def test_intersection_is_the_set_intersection(a: Requirement, b: Requirement) -> None:
    assert members(a.intersection(b)) == members(a) & members(b)


@given(requirements(), requirements())
def test_intersection_is_commutative(a: Requirement, b: Requirement) -> None:
    assert a.intersection(b) == b.intersection(a)


@given(requirements(), requirements(), requirements())
def test_intersection_is_associative(a: Requirement, b: Requirement, c: Requirement) -> None:
    left, right = a.intersection(b).intersection(c), a.intersection(b.intersection(c))
    assert members(left) == members(right)
    assert left.min_values == right.min_values


@given(requirements())
def test_intersection_with_the_universe_is_identity(a: Requirement) -> None:
    assert a.intersection(Requirement.exists("k")) == a
    assert members(Requirement.exists("k").intersection(a)) == members(a)


@given(requirements())
def test_intersection_is_idempotent(a: Requirement) -> None:
    assert members(a.intersection(a)) == members(a)


@given(requirements(), requirements())
def test_has_intersection_agrees_with_the_intersection(a: Requirement, b: Requirement) -> None:
    assert a.has_intersection(b) == nonempty(a.intersection(b))
    assert a.has_intersection(b) == b.has_intersection(a)


@given(st.integers(0, 50))
def test_gt_and_lt_are_gte_and_lte_shifted(n: int) -> None:
    assert Requirement.new("k", "Gt", [n]) == Requirement.new("k", "Gte", [n + 1])
    assert Requirement.new("k", "Lt", [n]) == Requirement.new("k", "Lte", [n - 1])
    assert members(Requirement.new("k", "Gt", [n])) == {v for v in UNIVERSE if v.lstrip("-").isdigit() and int(v) > n}


@given(st.lists(requirements(key="x"), max_size=2), st.lists(requirements(key="y"), max_size=2),
       st.lists(requirements(key="x"), max_size=2))
def test_requirements_intersects_is_symmetric(xs, ys, others) -> None:
    left, right = Requirements.of(*xs, *ys), Requirements.of(*others)
    assert (left.intersects(right) is None) == (right.intersects(left) is None)


def test_conflicting_bounds_become_does_not_exist():
    both = Requirement.new("k", "Gt", ["5"]).intersection(Requirement.new("k", "Lt", ["3"]))
    assert both.operator == "DoesNotExist"


def test_two_sided_bounds_serialise_as_two_requirements():
    both = Requirement.new("k", "Gte", ["2"]).intersection(Requirement.new("k", "Lte", ["8"]))
    assert both.to_manifest() == [
        {"key": "k", "operator": "Gte", "values": ["2"]},
        {"key": "k", "operator": "Lte", "values": ["8"]},
    ]


def test_custom_keys_must_be_defined_unless_negative():
    pool = Requirements.of(Requirement.new("team", "In", ["a"]))
    assert pool.incompatibility(Requirements.of(Requirement.new("team", "In", ["a"]))) is None
    error = pool.incompatibility(Requirements.of(Requirement.new("tema", "In", ["a"])))
    assert error is not None and 'label "tema" does not have known values' in error
    assert pool.incompatibility(Requirements.of(Requirement.new("other", "NotIn", ["x"]))) is None
    assert pool.incompatibility(Requirements.of(Requirement.new("other", "DoesNotExist"))) is None
    assert pool.incompatibility(Requirements.of(Requirement.new("other", "Exists"))) is not None


def test_well_known_keys_may_be_undefined_and_typos_get_a_hint():
    pool = Requirements.of(Requirement.new(wk.CAPACITY_TYPE, "In", ["spot"]))
    arm = Requirements.of(Requirement.new(wk.ARCH, "In", ["arm64"]))
    assert pool.incompatibility(arm, ALLOW_UNDEFINED_WELL_KNOWN) is None
    assert pool.incompatibility(arm) is not None  # strict (existing nodes)
    typo = Requirements.of(Requirement.new("kubernetes.io/arc", "In", ["arm64"]))
    assert "typo of" in pool.incompatibility(typo, ALLOW_UNDEFINED_WELL_KNOWN)


def test_negative_requirements_on_both_sides_are_compatible():
    left = Requirements.of(Requirement.new("k", "NotIn", ["a"]))
    right = Requirements.of(Requirement.new("k", "DoesNotExist"))
    assert left.intersects(right) is None
    assert Requirements.of(Requirement.new("k", "In", ["a"])).intersects(right) is not None


def test_legacy_keys_are_normalised():
    requirement = Requirement.new("failure-domain.beta.kubernetes.io/zone", "In", ["z"])
    assert requirement.key == wk.ZONE


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"key": "k", "operator": "In", "values": []}, "requirements[0].values: operator In needs at least one"),
        ({"key": "k", "operator": "Gt", "values": ["x"]}, "requirements[0].values: operator Gt needs exactly one"),
        ({"key": "k", "operator": "Near"}, "requirements[0].operator: 'Near' is not one of"),
        ({"operator": "Exists"}, "requirements[0].key: required"),
    ],
)
def test_invalid_requirements_name_the_field(raw, message):
    with pytest.raises(RequirementError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Requirements.from_manifest([raw])


def test_min_values_take_the_maximum_on_intersection():
    a = Requirement.new("k", "In", ["a", "b", "c"], 2)
    b = Requirement.new("k", "Exists", min_values=3)
    assert a.intersection(b).min_values == 3
    assert Requirements.of(a, b).has_min_values()


def test_single_values_become_labels():
    reqs = Requirements.of(Requirement.new("a", "In", ["x"]), Requirement.new("b", "In", ["x", "y"]),
                           Requirement.new("c", "Exists"))
    assert reqs.single_values() == {"a": "x"}
