from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.quantity import QuantityError, format_quantity, parse_quantity
from reconciler.model.resources import Resources, total


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("1", 1000),
        ("1.5", 1500),
        ("0.1", 100),
        ("1Ki", 1024 * 1000),
        ("4Gi", 4 * 2**30 * 1000),
        ("1k", 1_000_000),
        ("1M", 10**9),
        ("1e3", 1_000_000),
        ("1n", 1),  # sub-milli rounds up, like the API server
        (2, 2000),
        (0.25, 250),
    ],
)
def test_parse_quantity(text: str | int | float, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("bad", ["", "abc", "1Qi", "1.2.3", "--1", "1 Gi", True, None, float("nan")])
def test_parse_quantity_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_format_quantity_round_trips_common_values() -> None:
    assert format_quantity(parse_quantity("512Mi"), "memory") == "512Mi"
    assert format_quantity(parse_quantity("1930m"), "cpu") == "1930m"
    assert format_quantity(parse_quantity("2"), "cpu") == "2"
    assert format_quantity(parse_quantity("110"), "pods") == "110"


@given(
    st.integers(min_value=0, max_value=10**15), st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"])
)
def test_format_then_parse_is_identity(milli: int, resource: str) -> None:
    assert parse_quantity(format_quantity(milli, resource)) == milli


def test_resources_arithmetic_and_fit() -> None:
    node = Resources.of(cpu="2", memory="4Gi", pods="29")
    pod = Resources.of(cpu="500m", memory="1Gi", pods="1")
    assert (pod + pod).amount("cpu") == 1000
    assert (node - pod).amount("memory") == 3 * 2**30 * 1000
    assert pod.fits_in(node)
    assert not Resources.of(cpu="3").fits_in(node)
    assert Resources.of(cpu="3", memory="5Gi").exceeding(node) == ["cpu", "memory"]
    assert Resources.of(**{"nvidia.com/gpu": "1"}).exceeding(node) == ["nvidia.com/gpu"]
    assert total([pod, pod, pod]).amount("pods") == 3000
    assert node.max(Resources.of(cpu="4")).amount("cpu") == 4000


def test_resources_from_manifest_names_bad_path() -> None:
    with pytest.raises(ValueError, match=r"spec.requests.cpu: 'lots' is not a valid quantity"):
        Resources.from_manifest({"cpu": "lots"}, path="spec.requests")
    assert Resources.from_manifest({"cpu": "1", "memory": "1Gi"}).to_manifest() == {
        "cpu": "1",
        "memory": "1Gi",
    }


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), st.integers(-5, 5)),
                max_size=5),
       st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage"]), st.sampled_from([None, 0, 7]))
def test_resources_answer_lookups_as_the_generic_mapping_does(amounts: list, name: str, default: int | None) -> None:
    """``get``/``in``/``keys``/``items``/``values`` answered by the dict itself equal the Mapping mixins' answers
    (built on ``__getitem__`` and ``__iter__``), zero amounts dropped alike."""
    resources = Resources(amounts)
    assert resources.get(name, default) == Mapping.get(resources, name, default)
    assert resources.get(name) == Mapping.get(resources, name)
    assert (name in resources) == Mapping.__contains__(resources, name)
    assert list(resources.keys()) == list(Mapping.keys(resources))
    assert list(resources.items()) == list(Mapping.items(resources))
    assert list(resources.values()) == list(Mapping.values(resources))
    assert resources.items() == Mapping.items(resources)
