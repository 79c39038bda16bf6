"""Storage identity survives address reuse: a freed tensor's address names the next one.

GIVEN tensors that the program frees and allocates again (the allocator hands the same
address to the next one of the same size),
WHEN they are hopped and the trace read back,
THEN two different tensors never share a storage id, one tensor kept alive (or a view of it)
keeps its id, and the flow of a pipeline that uses only `flowmap.hop` names only true producers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import flowmap
from flowmap.capture.describers import torch_, walk


@pytest.fixture(params=["C", "Python"])
def loops(request: pytest.FixtureRequest) -> Iterator[str]:
    """With the describers' C loops and without them (FLOWMAP_PURE_PYTHON)."""
    saved = torch_.tensor_entries, walk.disjoint_total
    if request.param == "Python":
        torch_.tensor_entries = walk.disjoint_total = None
    elif torch_.tensor_entries is None:
        pytest.skip("the C loops are not built here")
    try:
        yield request.param
    finally:
        torch_.tensor_entries, walk.disjoint_total = saved


def test_tensors_freed_and_allocated_at_one_address_never_link(tmp_path: Path, loops: str) -> None:
    addresses: list[int] = []
    with flowmap.tracing(tmp_path / "run"):
        for k in range(20):
            t = torch.full((256,), float(k))
            addresses.append(t.data_ptr())
            flowmap.hop("a", "b", {"x": t}, name="x")
            del t
            gc.collect()
    # the allocator did reuse addresses (else the test proves nothing)
    assert len(set(addresses)) < len(addresses)
    hops = _storage_ids(tmp_path / "run")
    assert len(hops) == 20 and len(set(hops)) == 20


def test_a_live_tensor_and_its_views_keep_their_id(tmp_path: Path, loops: str) -> None:
    base = torch.zeros(64, 8)
    arr = np.zeros(128)
    with flowmap.tracing(tmp_path / "run"):
        for _ in range(3):
            flowmap.hop("a", "b", {"x": base}, name="whole")
            flowmap.hop("a", "b", {"x": base[:]}, name="view")  # a fresh view: its base lives
            flowmap.hop("a", "b", [arr], name="array")
            fresh = torch.zeros(64, 8)
            flowmap.hop("a", "b", {"x": fresh}, name="fresh")
            del fresh
    ids = _storage_ids(tmp_path / "run", by_name=True)
    assert len(set(ids["whole"] + ids["view"])) == 1
    assert len(set(ids["array"])) == 1
    assert len(set(ids["fresh"])) == 3 and not set(ids["fresh"]) & set(ids["whole"])


def test_the_flow_of_a_hop_only_pipeline_names_only_true_producers(tmp_path: Path,
                                                                  loops: str) -> None:
    # a loader's prompts, a generator's trajectories, a controller that passes them on; each
    # step frees the last step's tensors, whose addresses the next ones take
    with flowmap.tracing(tmp_path / "run"):
        for s in range(4):
            flowmap.step(s)
            prompts = torch.randint(0, 100, (8, 64))
            flowmap.hop("loader", "controller", {"prompts": prompts}, name="prompts")
            flowmap.hop("controller", "generator", {"prompts": prompts}, name="prompts")
            trajectories = torch.randint(0, 100, (8, 64))
            flowmap.hop("generator", "controller", {"tokens": trajectories}, name="trajectories")
            flowmap.hop("controller", "trainer", {"tokens": trajectories}, name="trajectories")
            del prompts, trajectories
    flow = flowmap.load(str(tmp_path / "run")).view.flow
    edges = {(e.src, e.dst, e.names, e.hops) for e in flow.edges}
    assert edges == {("loader", "generator", ("prompts",), 4),
                     ("generator", "trainer", ("trajectories",), 4)}


def _storage_ids(run_dir: Path, by_name: bool = False) -> Any:
    """Each hop's storage ids, in order (by payload name when `by_name`)."""
    hops = flowmap.load(str(run_dir)).view.events.hops
    if not by_name:
        return [h.storages for h in hops]
    out: dict[str, list[tuple[int, ...]]] = {}
    for h in hops:
        out.setdefault(h.name, []).append(h.storages)
    return out



def test_a_detached_alias_keeps_the_storage_s_id_after_the_tensor_that_showed_it_died(
        tmp_path: Path, loops: str) -> None:
    # GIVEN log-probs returned by a policy, kept only as `.detach()` (an alias of the same
    # storage) while the name that held the original is rebound, as a GRPO loop does
    with flowmap.tracing(tmp_path / "run"):
        out = torch.randn(64, 32)
        flowmap.hop("policy", "driver", {"log_probs": out}, name="log_probs")
        kept = out.detach()
        out = torch.randn(64, 32)  # the original tensor object dies; its storage lives on
        gc.collect()
        flowmap.hop("driver", "loss", {"old_log_probs": kept}, name="old_log_probs")
    ids = _storage_ids(tmp_path / "run", by_name=True)
    # THEN the alias is the same storage, and the loss is fed by the policy
    assert ids["log_probs"] == ids["old_log_probs"]
    flow = flowmap.load(str(tmp_path / "run")).view.flow
    assert ("policy", "loss") in {(e.src, e.dst) for e in flow.edges}


def _ids(run: Path) -> list[tuple[int, ...]]:
    return [h.storages for h in sorted(flowmap.load(run).view.events.hops, key=lambda h: h.t_ns)]


def test_a_storage_written_in_place_gets_a_new_id_and_one_read_keeps_it(tmp_path: Path,
                                                                       loops: str) -> None:
    t = torch.zeros(32, 32)
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("a", "b", {"x": t, "y": torch.ones(4)}, name="first")
        _ = t.sum()  # read: the same data
        flowmap.hop("b", "c", {"x": t}, name="read")
        t[3].add_(1.0)  # written through a view: the whole storage is new data
        flowmap.hop("c", "d", {"x": t}, name="written")
        flowmap.hop("d", "e", {"x": t[0]}, name="row")
    first, read, written, row = _ids(tmp_path / "run")
    assert read[0] == first[0] and written[0] != first[0] and row == (written[0],)


def test_a_storage_moved_into_shared_memory_keeps_its_id(tmp_path: Path, loops: str) -> None:
    # torch moves a tensor's storage into shared memory as a multiprocessing queue pickles it:
    # another address, the same data
    t = torch.randn(64, 64)
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("a", "b", t, name="before")
        before = t.data_ptr()
        t.share_memory_()
        assert t.data_ptr() != before
        flowmap.hop("b", "c", t, name="after")
        flowmap.hop("c", "d", t[8:16], name="rows")
    got = _ids(tmp_path / "run")
    assert got[1] == got[0], got
    run = flowmap.load(tmp_path / "run")
    from flowmap.read.events import storage_bases

    assert storage_bases(run.view.events.shards).get((run.view.events.hops[0].pid,
                                                      got[2][0])) == got[0][0]


def test_an_array_sent_on_as_a_tensor_moved_into_shared_memory_keeps_its_id(
        tmp_path: Path, loops: str) -> None:
    # GIVEN an array a collector received, sent on as `torch.from_numpy` of it: a queue
    # moves the tensor's storage into shared memory, and the array (its memory left
    # behind) is freed
    import gc

    import numpy as np

    with flowmap.tracing(tmp_path / "run"):
        a = np.random.default_rng(0).standard_normal(16384).astype(np.float32)
        flowmap.hop("env", "collector", a, name="obs")
        t = torch.from_numpy(a)
        del a
        t.share_memory_()
        gc.collect()
        flowmap.hop("collector", "learner", t, name="obs")
    got = _ids(tmp_path / "run")
    # THEN the tensor is the array's data: the collector relayed it
    assert got[1] == got[0], got


def test_rows_of_the_other_library_s_view_of_a_storage_lie_in_it(tmp_path: Path,
                                                                  loops: str) -> None:
    # GIVEN a tensor hopped, then its rows sent on as numpy (`x.numpy()[16:32]`); an array
    # hopped, then its rows sent on as torch (`torch.from_numpy(a)[4:20]`)
    import numpy as np

    from flowmap.read.events import storage_bases

    with flowmap.tracing(tmp_path / "run"):
        x = torch.randn(32, 16)
        flowmap.hop("rollout", "driver", x, name="batch")
        flowmap.hop("driver", "scorer", x.numpy()[16:32], name="rows")
        a = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
        flowmap.hop("loader", "driver", a, name="batch")
        flowmap.hop("driver", "trainer", torch.from_numpy(a)[4:20], name="rows")
    got = _ids(tmp_path / "run")
    run = flowmap.load(tmp_path / "run")
    bases = storage_bases(run.view.events.shards)
    pid = run.view.events.hops[0].pid
    # THEN each row lies in the storage first hopped: the driver handed on the producer's data
    assert bases.get((pid, got[1][0])) == got[0][0], (got, bases)
    assert bases.get((pid, got[3][0])) == got[2][0], (got, bases)


def test_the_address_a_storage_left_for_shared_memory_names_nothing_after(
        tmp_path: Path, loops: str) -> None:
    # GIVEN a tensor hopped, then moved into shared memory (`share_memory_`): its old
    # address is freed while the storage lives on, for the allocator to hand out again
    from flowmap.capture import state

    with flowmap.tracing(tmp_path / "run"):
        t = torch.randn(64, 64)
        old = t.data_ptr()
        flowmap.hop("rollout", "driver", t, name="moved")
        table = state.tracer.writer  # type: ignore[union-attr]
        assert old in table.storages
        t.share_memory_()
        # THEN the tracer names it at its new address only (torch told it of the move)
        assert old not in table.storages and t.data_ptr() in table.storages
        flowmap.hop("driver", "trainer", t, name="moved")
    got = _ids(tmp_path / "run")
    assert got[1] == got[0], got


def test_the_address_a_storage_left_as_it_grew_names_nothing_after(
        tmp_path: Path, loops: str) -> None:
    # GIVEN a buffer hopped, then grown in place (`resize_` past its storage: a new
    # allocation, the old one freed while the storage lives on)
    from flowmap.capture import state

    with flowmap.tracing(tmp_path / "run"):
        buf = torch.randn(64, 64)
        old = buf.data_ptr()
        flowmap.hop("rollout", "ref", buf, name="seqs")
        table = state.tracer.writer  # type: ignore[union-attr]
        buf.resize_(4096, 64)
        # THEN the tracer names it at its new address only: a tensor the allocator puts
        # at the old one is another
        assert buf.data_ptr() != old
        assert old not in table.storages and buf.data_ptr() in table.storages


def test_a_tensor_at_an_address_a_moved_storage_left_is_another(tmp_path: Path) -> None:
    # GIVEN a table that named a storage at `old`, told it moved (`left`), then a hop of
    # another tensor read at `old` (the allocator reuses freed addresses)
    from flowmap.writer.storage_table import StorageTable

    lines: list[str] = []
    table = StorageTable(lines.append)
    t, other = torch.randn(64, 64), torch.randn(64, 64)
    first = table.storage_ids([t.data_ptr()], [t], "rollout", "driver")
    old = t.data_ptr()
    t.share_memory_()  # no tracer: the table is told by hand, as `shared_moves` tells it
    table.left(old, t.data_ptr(), t.untyped_storage().nbytes(), t.untyped_storage())
    # THEN the other tensor gets an id of its own; the moved one keeps its id, read before
    # the move (as a queue describes what it sends) or after
    assert table.storage_ids([old], [other], "reward", "advantage", described_before=True) \
        != first
    assert table.storage_ids([t.data_ptr()], [t], "driver", "trainer") == first
    # a row read at its old address lies in what was named at the storage's start
    row = table.storage_ids([old + 256], [t[1:]], "driver", "trainer", described_before=True)
    assert row != first and lines[-1] == f'["b",{row},{first}]', lines


def test_inference_tensors_which_have_no_version_counter_are_recorded(tmp_path: Path,
                                                                     loops: str) -> None:
    # a rollout engine's outputs, made under `torch.inference_mode`, beside a plain tensor
    with torch.inference_mode():
        made = torch.randn(8, 8)
    plain = torch.zeros(4)
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("engine", "driver", {"ids": made, "mask": plain}, name="out")
        flowmap.hop("driver", "trainer", {"ids": made, "mask": plain}, name="batch")
    run = flowmap.load(tmp_path / "run")
    first, second = _ids(tmp_path / "run")
    assert len(first) == 2 and second == first  # the same data, handed on
    assert not any(sh.errors for sh in run.view.events.shards)


def test_views_of_one_flat_buffer_stepped_in_place_are_all_new_data(tmp_path: Path,
                                                                   loops: str) -> None:
    # weights as views of one flat buffer (FSDP's flat parameter): loaded by the checkpoint
    # stage, stepped in place by the trainer, then sent on together
    flat = torch.zeros(4 * 64)
    views = {f"layer{i}": flat[i * 64:(i + 1) * 64] for i in range(4)}
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("ckpt", "trainer", views, name="weights")
        flat.add_(0.1)  # the optimizer's step, through the buffer
        flowmap.hop("trainer", "rollout", views, name="weights")
    loaded, synced = _ids(tmp_path / "run")
    assert len(set(synced)) == 4 and not set(synced) & set(loaded)


def test_a_numpy_buffer_refilled_between_two_messages_holds_new_data(tmp_path: Path) -> None:
    # GIVEN an env worker's staging buffer (numpy: no version counter) sent down a pipe,
    # which pickles its bytes: refilled in place, sent again unchanged, refilled again
    import multiprocessing as mp

    rng = np.random.default_rng(0)
    buf = np.empty((64, 128), np.float32)
    here, there = mp.Pipe()
    with flowmap.tracing(tmp_path / "run"):
        for refill in (True, False, True):
            if refill:
                buf[:] = rng.standard_normal((64, 128))
            here.send({"obs": buf, "actions": rng.integers(0, 9, 64)})
            there.recv()
        # a hop that serialises nothing does not read it: the same id, written or not
        buf[:] = 0.0
        flowmap.hop("env", "buffer", {"obs": buf}, name="in_process")
    obs = [ids[0] for ids in _ids(tmp_path / "run")]
    # THEN each refill is new data and the unchanged message the same: a duplicate only there
    assert obs[1] == obs[0] and obs[2] != obs[1] and obs[3] == obs[2]


def test_rows_past_a_written_row_block_are_still_the_buffers(tmp_path: Path, loops: str) -> None:
    # GIVEN a buffer stage's output buffer; its first rows handed to engine0, filled in place
    # and handed back; then its other rows, untouched, handed to engine1
    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("buffer"):
            out = torch.zeros(8, 10)
        flowmap.hop("buffer", "driver", out, name="alloc")
        first, rest = out[0:4], out[4:8]
        flowmap.hop("driver", "engine0", first, name="rows")
        with flowmap.owner("engine0"):
            first.fill_(1.0)
        flowmap.hop("engine0", "driver", first, name="filled")
        flowmap.hop("driver", "engine1", rest, name="rows")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN engine1's rows are the buffer's (the write was the first rows', hopped at it)
    assert ("buffer", "engine1") in edges and ("driver", "engine1") not in edges
    assert ("engine0", "engine1") not in edges


def test_arrays_a_pipe_pickles_carry_content_windows_that_show_a_prefix(tmp_path: Path) -> None:
    # GIVEN a conversation's ids sent whole down a pipe every turn (a numpy array, and a
    # torch tensor, which torch moves into shared memory: not read), and new rows alone
    import multiprocessing as mp

    rng = np.random.default_rng(1)
    so_far = rng.integers(0, 30_000, 64)
    here, there = mp.Pipe()
    with flowmap.tracing(tmp_path / "run"):
        for _ in range(3):
            new = rng.integers(0, 30_000, 128)
            so_far = np.concatenate([so_far, new])
            here.send({"ids": so_far, "new": new, "t": torch.from_numpy(new.copy())})
            there.recv()
    hops = sorted(flowmap.load(tmp_path / "run").view.events.hops, key=lambda h: h.t_ns)
    windows = [dict(h.windows) for h in hops]
    # THEN each numpy array has its windows, the tensor none; the whole conversation's agree
    # turn to turn where both have one, the new rows' do not
    assert all(set(w) == {"ids", "new"} for w in windows)
    for a, b in zip(windows, windows[1:]):
        shared = min(len(a["ids"]), len(b["ids"]))
        assert shared >= 2 and a["ids"][:shared] == b["ids"][:shared]
        assert a["new"] != b["new"]


def test_what_a_decorated_owner_returns_or_yields_is_its_making(tmp_path: Path) -> None:
    # GIVEN a loader generator and a tokenizer function, decorated as owners, that never
    # hop what they make; the driver hands it on
    @flowmap.owner("loader")
    def batches():
        for _ in range(2):
            yield torch.randn(8, 16)

    @flowmap.owner("tokenizer")
    def tokenize(prompts: torch.Tensor) -> torch.Tensor:
        return (prompts * 100).long()

    kept = []
    with flowmap.tracing(tmp_path / "run"):
        for prompts in batches():
            kept.append(prompts)
            ids = tokenize(prompts)
            kept.append(ids)
            flowmap.hop("driver", "generator", {"prompts": prompts, "ids": ids}, name="batch")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the generator's data comes from the loader and the tokenizer, not the driver
    assert edges == {("loader", "generator"), ("tokenizer", "generator")}
