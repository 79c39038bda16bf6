"""The shared-memory replay store: handles travel, arrays stay, entries never leak.

Readers run in other processes, as DP ranks do: a spawned child (shares the
creator's multiprocessing resource tracker) and an unrelated interpreter (its
own tracker, the case where attaching with SharedMemory would unlink the
segment when the reader exits).
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import torch

from flowmap.capture.describe import describe
from flowmap.trainer.replay import (
    SHM_DIR,
    Replay,
    ReplayEntryFreedError,
    ReplayHandle,
    ReplayStore,
    fetch,
    fetch_batch,
)

pytestmark = pytest.mark.skipif(not SHM_DIR.is_dir(), reason="segments are checked in /dev/shm")


def segments(store: ReplayStore) -> list[str]:
    return sorted(p.name for p in Path(SHM_DIR).glob(f"{store.name}_*"))


def arrays(tokens: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "routed_experts": torch.randint(0, 8, (tokens, 3, 2), generator=g, dtype=torch.int32),
        "indexer_topk": torch.randint(-1, 50, (tokens, 3, 5), generator=g, dtype=torch.int32),
    }


@pytest.fixture
def store() -> ReplayStore:
    with ReplayStore() as s:
        yield s
    assert segments(s) == []


def test_round_trip_and_row_slices(store: ReplayStore) -> None:
    data = arrays(7)
    handle = store.put("traj-0", Replay(**data).arrays())
    assert segments(store) == [handle.key] and store.live_entries == {handle.key: "traj-0"}
    got = store.get(handle)
    assert got.keys() == data.keys() and all(torch.equal(got[k], data[k]) for k in data)
    assert Replay(**got).indexer_topk is not None
    rows = fetch(handle, rows=slice(2, 5))
    assert all(torch.equal(rows[k], data[k][2:5]) for k in data)
    assert fetch(handle, rows=slice(5, None))["indexer_topk"].shape == (2, 3, 5)
    assert fetch(handle, rows=slice(9, 12))["routed_experts"].shape == (0, 3, 2)
    with pytest.raises(ValueError, match="contiguous"):
        fetch(handle, rows=slice(0, 6, 2))


def test_a_spawned_process_reads_its_rows_by_name_and_leaves_the_entry(store: ReplayStore) -> None:
    data = arrays(10, seed=1)
    handle = store.put("traj-1", data)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = pool.submit(fetch, handle, slice(4, 8)).result(timeout=60)
    assert all(torch.equal(got[k], data[k][4:8]) for k in data)
    assert segments(store) == [handle.key]  # the reader's exit unlinked nothing
    store.free(handle)
    assert segments(store) == [] and store.live_entries == {}


def test_an_unrelated_interpreter_reads_by_name_and_leaves_the_entry(store: ReplayStore) -> None:
    data = arrays(6, seed=2)
    handle = store.put("traj-2", data)
    code = (
        "import pickle, sys; from flowmap.trainer.replay import fetch; "
        "h = pickle.load(sys.stdin.buffer); "
        "rows = fetch(h, slice(1, 3)); "
        "sys.stdout.buffer.write(pickle.dumps({k: v.tolist() for k, v in rows.items()}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(handle), capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    got = pickle.loads(proc.stdout)
    assert got == {k: v[1:3].tolist() for k, v in data.items()}
    assert segments(store) == [handle.key]


def test_free_is_idempotent_and_a_freed_entry_reads_as_a_clear_error(store: ReplayStore) -> None:
    handle = store.put("traj-3", arrays(3))
    store.free(handle)
    store.free(handle)
    with pytest.raises(ReplayEntryFreedError, match="freed"):
        fetch(handle)


def test_nothing_leaks_after_a_run_of_consumed_and_dropped_entries() -> None:
    # GIVEN a run: entries put, some consumed (read then freed), some dropped (freed unread)
    store = ReplayStore()
    handles = [store.put(f"traj-{i}", arrays(4 + i, seed=i)) for i in range(12)]
    assert len(segments(store)) == 12 and store.live_bytes > 0
    for h in handles[:8]:
        fetch(h, rows=slice(0, 2))
        store.free(h)
    for h in handles[8:10]:
        store.free(h)  # dropped as stale
    # WHEN the run ends with two still in flight and the store is closed
    assert sorted(store.live_entries.values()) == ["traj-10", "traj-11"]
    store.close()
    # THEN every segment is unlinked
    assert store.live_entries == {} and store.live_bytes == 0 and segments(store) == []
    # and a store dropped without close() still cleans up when collected
    forgotten = ReplayStore()
    forgotten.put("traj-x", arrays(2))
    name = forgotten.name
    del forgotten
    gc.collect()
    assert list(Path(SHM_DIR).glob(f"{name}_*")) == []


def test_a_handle_describes_as_a_few_hundred_bytes_without_tensors(store: ReplayStore) -> None:
    data = arrays(4096)  # 4K tokens: ~450 KB of replay arrays
    handle = store.put("traj-4", data)
    d = describe(handle)
    assert not any(leaf[1] in ("tensor", "ndarray") for leaf in d.leaves)
    assert d.nbytes < 400 and len(pickle.dumps(handle)) < 4096
    assert handle.nbytes == sum(t.nbytes for t in data.values())
    assert isinstance(pickle.loads(pickle.dumps(handle)), ReplayHandle)
    with pytest.raises(TypeError, match="ReplayHandles"):
        pickle.dumps(store)


def test_any_dtype_and_scalars_round_trip(store: ReplayStore) -> None:
    data = {
        "narrow": torch.arange(10, dtype=torch.uint8).view(5, 2),
        "wide": torch.randn(3, 4, dtype=torch.float64),
        "flag": torch.tensor(True),
        "empty": torch.empty(0, 2, dtype=torch.int16),
    }
    got = fetch(store.put("traj-5", data))
    assert all(got[k].dtype == data[k].dtype and torch.equal(got[k], data[k]) for k in data)


def test_a_rank_fetches_its_rows_aligned_with_its_micro_batch(store: ReplayStore) -> None:
    # GIVEN two trajectories in the store and a micro-batch [left-padded prompt | response]
    a, b = arrays(4, seed=3), arrays(6, seed=4)
    handles = [store.put("a", a), None, store.put("b", b)]
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    # WHEN the rank fetches by handle
    replay = fetch_batch(handles, mask)
    # THEN each row's rows sit at its tokens' columns, -1 elsewhere
    assert replay.routed_experts is not None and replay.routed_experts.shape == (3, 7, 3, 2)
    assert torch.equal(replay.routed_experts[0, 2:6], a["routed_experts"])
    assert torch.equal(replay.routed_experts[2, :6], b["routed_experts"])
    assert (replay.routed_experts[1] == -1).all() and (
        replay.routed_experts[0, [0, 1, 6]] == -1
    ).all()
