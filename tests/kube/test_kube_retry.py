"""Read-modify-write with optimistic concurrency."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.kube.api import NODECLAIM, ConflictError, Manifest
from reconciler.kube.memory import MemoryKube
from reconciler.kube.retry import modify, retry_on_conflict
from reconciler.kube.semantics import merge_patch, merge_patch_diff

CLAIM = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {"name": "a", "labels": {"x": "1"}},
    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
}

json_values = st.recursive(
    st.integers() | st.text(max_size=3) | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=2), json_values), st.dictionaries(st.text(max_size=2), json_values))
def test_diff_is_the_merge_patch_between_two_objects(old: dict, new: dict) -> None:
    assert merge_patch(old, merge_patch_diff(old, new)) == new


async def test_modify_retries_after_a_concurrent_write() -> None:
    kube = MemoryKube()
    await kube.create(CLAIM)
    reads = 0

    async def get_then_race(*args: object, **kwargs: object) -> Manifest:
        """The first read is followed by another writer's change, so our write is stale."""
        nonlocal reads
        reads += 1
        result = await MemoryKube.get(kube, *args, **kwargs)  # type: ignore[arg-type]
        if reads == 1:
            await kube.patch(NODECLAIM, "a", {"metadata": {"labels": {"z": "3"}}})
        return result

    def add_label(claim: Manifest) -> Manifest:
        claim["metadata"]["labels"]["y"] = "2"
        return claim

    kube.get = get_then_race  # type: ignore[method-assign]
    stored = await modify(kube, NODECLAIM, "a", add_label)
    assert reads == 2, "the conflict made modify re-read and re-apply the change"
    assert stored["metadata"]["labels"] == {"x": "1", "y": "2", "z": "3"}


async def test_modify_status_and_no_op() -> None:
    kube = MemoryKube()
    created = await kube.create(CLAIM)

    def launched(claim: Manifest) -> Manifest:
        claim["status"] = {
            "providerID": "aws:///z/i-1",
            "conditions": [{"type": "Launched", "status": "True"}],
        }
        return claim

    stored = await modify(kube, NODECLAIM, "a", launched, subresource="status")
    assert stored["status"]["providerID"] == "aws:///z/i-1"
    unchanged = await modify(kube, NODECLAIM, "a", lambda claim: None)
    assert unchanged["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_retry_gives_up_after_the_attempts() -> None:
    attempts = 0

    async def always_conflicts() -> None:
        nonlocal attempts
        attempts += 1
        raise ConflictError("stale")

    with pytest.raises(ConflictError):
        await retry_on_conflict(always_conflicts, attempts=3, backoff=0)
    assert attempts == 3


class CountingKube(MemoryKube):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, *args: object, **kwargs: object) -> Manifest:
        self.gets += 1
        return await super().get(*args, **kwargs)  # type: ignore[arg-type]


def labelled(claim: Manifest) -> Manifest:
    claim["metadata"]["labels"]["y"] = "2"
    return claim


async def test_modify_writes_against_the_callers_copy_without_reading_and_reads_only_after_a_409() -> None:
    """Karpenter patches its cached object with optimistic locking and re-reads only on a conflict."""
    kube = CountingKube()
    cached = await kube.create(CLAIM)
    stored = await modify(kube, NODECLAIM, "a", labelled, current=cached)
    assert kube.gets == 0 and stored["metadata"]["labels"] == {"x": "1", "y": "2"}
    # The copy is stale now (another write happened): one 409, one read, and the change lands on top.
    await kube.patch(NODECLAIM, "a", {"metadata": {"labels": {"z": "3"}}})
    stored = await modify(kube, NODECLAIM, "a", lambda c: {**c, "metadata": {**c["metadata"], "labels": {
        **c["metadata"]["labels"], "w": "4"}}}, current=cached)
    assert kube.gets == 1
    assert stored["metadata"]["labels"] == {"x": "1", "y": "2", "z": "3", "w": "4"}
    assert cached["metadata"]["labels"] == {"x": "1"}, "the caller's (cache's) copy is never changed"


async def test_modify_reads_when_the_copy_carries_no_resource_version() -> None:
    kube = CountingKube()
    await kube.create(CLAIM)
    await modify(kube, NODECLAIM, "a", labelled, current={"metadata": {"name": "a"}})
    assert kube.gets == 1
