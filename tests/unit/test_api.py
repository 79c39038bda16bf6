"""The public capture API: no-op when idle, owners per thread/task, seams, never raises."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
import torch

import flowmap
from flowmap.capture import describe_lazy, state


def test_everything_is_a_noop_when_not_tracing(tmp_path):
    assert not flowmap.is_tracing()
    flowmap.hop("a", "b", {"x": torch.zeros(3)}, name="p", items=[1])
    flowmap.counter("c", 1.0)
    flowmap.mark("m")
    flowmap.drop([1], "stale")
    flowmap.step(3)
    assert list(tmp_path.iterdir()) == []


def test_hops_counters_marks_drops_and_steps_are_recorded(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        flowmap.step(0)
        flowmap.hop("driver", "rollout/0", {"prompt": torch.zeros(4, dtype=torch.int64)},
                    name="request", items=["t0", "t1"], version=3, transport="rpc")
        flowmap.step(1)
        with flowmap.owner("ready_buffer"):
            flowmap.counter("ready_buffer_depth", 2)
            flowmap.mark("assemble")
            flowmap.drop(["t1"], "stale")
    run = flowmap.load(tmp_path / "run")
    (h,) = run.hops
    assert (h.src, h.dst, h.name, h.nbytes, h.step, h.version, h.transport, h.items) == (
        "driver", "rollout/0", "request", 32, 0, 3, "rpc", ("t0", "t1"))
    assert h.leaves[0].path == "prompt" and h.leaves[0].shape == (4,)
    assert run.counter_samples[0].owner == "ready_buffer"
    assert run.marks[0].name == "assemble"
    assert run.drops[0].items == ("t1",) and run.drops[0].owner == "ready_buffer"
    assert run.items.dropped == {"stale": 1}
    assert not run.truncated


def test_owner_is_per_thread_and_per_task(tmp_path):
    seen: dict[str, str] = {}

    def worker(name: str) -> None:
        with flowmap.owner(name):
            seen[name] = flowmap.current_owner()

    async def task(name: str) -> str:
        with flowmap.owner(name):
            await asyncio.sleep(0)
            return flowmap.current_owner()

    async def both() -> list[str]:
        return await asyncio.gather(task("t1"), task("t2"))

    with flowmap.owner("main-block"):
        threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert flowmap.current_owner() == "main-block"
        assert asyncio.run(both()) == ["t1", "t2"]
    assert seen == {f"w{i}": f"w{i}" for i in range(4)}
    assert flowmap.current_owner() == state.default_owner


def test_set_owner_in_a_thread_names_that_thread_and_in_the_main_one_the_process(tmp_path):
    # GIVEN a server whose roles run as threads, each naming itself with `set_owner`
    seen: dict[str, str] = {}
    before, auto = state.default_owner, state.auto_owner
    ready = threading.Barrier(3)

    def role(name: str) -> None:
        flowmap.set_owner(name)
        ready.wait()  # every role has named itself before any reads its owner
        with flowmap.owner("a block"):
            pass
        seen[name] = flowmap.current_owner()

    with flowmap.tracing(tmp_path / "run"):
        threads = [threading.Thread(target=role, args=(n,)) for n in ("engine", "tokenizer")]
        for t in threads:
            t.start()
        ready.wait()
        for t in threads:
            t.join()
        # THEN each thread keeps its own name (a block inside it returns to it), and the
        # process's default, what the main thread runs as, is untouched
        assert seen == {"engine": "engine", "tokenizer": "tokenizer"}
        assert state.default_owner == before and flowmap.current_owner() == before
        try:
            flowmap.set_owner("driver")  # in the main thread: the process's default
            assert state.default_owner == "driver" == flowmap.current_owner()
        finally:
            state.default_owner, state.auto_owner = before, auto


def test_owner_as_decorator_sync_and_async():
    @flowmap.owner("learner")
    def f() -> str:
        return flowmap.current_owner()

    @flowmap.owner("env")
    async def g() -> str:
        return flowmap.current_owner()

    assert f() == "learner"
    assert asyncio.run(g()) == "env"


def test_a_decorated_generator_runs_as_its_owner_and_its_consumer_as_itself():
    seen: list[tuple[str, str]] = []

    @flowmap.owner("loader")
    def batches(n: int):
        for i in range(n):
            got = yield (i, flowmap.current_owner())
            seen.append(("body", flowmap.current_owner()))
            if got == "stop":
                return "stopped"
        return "done"

    with flowmap.owner("driver"):
        out = list(batches(2))
        assert out == [(0, "loader"), (1, "loader")]
        assert seen == [("body", "loader")] * 2
        assert flowmap.current_owner() == "driver"
        g = batches(5)
        next(g)
        assert flowmap.current_owner() == "driver"  # between two resumptions: the caller's
        with pytest.raises(StopIteration) as stop:
            g.send("stop")
        assert stop.value.value == "stopped"

        class Boom(Exception):
            pass

        def guarded():
            try:
                yield 1
            except Boom:
                yield flowmap.current_owner()
            finally:
                seen.append(("finally", flowmap.current_owner()))

        h = flowmap.owner("loader")(guarded)()
        next(h)
        assert h.throw(Boom()) == "loader"  # thrown in: handled by the body, as its owner
        h.close()
        assert seen[-1] == ("finally", "loader") and flowmap.current_owner() == "driver"


def test_a_decorated_async_generator_runs_as_its_owner():
    @flowmap.owner("rollout")
    async def stream(n: int):
        for _ in range(n):
            await asyncio.sleep(0)
            yield flowmap.current_owner()

    async def consume() -> tuple[list[str], str]:
        got = [o async for o in stream(3)]
        return got, flowmap.current_owner()

    with flowmap.owner("driver"):
        assert asyncio.run(consume()) == (["rollout"] * 3, "driver")


def test_seam_records_arguments_in_and_result_out(tmp_path):
    class Learner:
        @flowmap.seam("learner", name="train_step", args=["batch"])
        def train(self, batch: dict, lr: float = 0.1) -> dict:
            assert flowmap.current_owner() == "learner"
            return {"loss": torch.zeros(())}

    with flowmap.tracing(tmp_path / "run"), flowmap.owner("driver"):
        Learner().train({"input_ids": torch.zeros(2, 8, dtype=torch.int64)}, lr=0.5)
    hops = flowmap.load(tmp_path / "run").hops
    assert [(h.src, h.dst, h.name) for h in hops] == [
        ("driver", "learner", "train_step"), ("learner", "driver", "train_step")]
    assert [leaf.path for leaf in hops[0].leaves] == ["batch.input_ids"]
    assert [leaf.path for leaf in hops[1].leaves] == ["result.loss"]  # as a seam map's dims key it
    assert hops[0].nbytes == 128
    assert hops[1].nbytes == 4


def test_seam_without_result_and_default_args(tmp_path):
    @flowmap.seam("reward", result=False)
    def score(self_like, responses, *, scale=1.0):
        return 1

    with flowmap.tracing(tmp_path / "run"):
        score(None, torch.zeros(3), scale=2.0)
    (h,) = flowmap.load(tmp_path / "run").hops
    assert {leaf.path for leaf in h.leaves} == {"self_like", "responses", "scale"}


def test_internal_errors_are_counted_not_raised(tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("describe exploded")

    with flowmap.tracing(tmp_path / "run"):
        monkeypatch.setattr(describe_lazy, "describe", broken)
        flowmap.hop("a", "b", 1)  # must not raise
        monkeypatch.undo()
        flowmap.hop("a", "b", 2)
    run = flowmap.load(tmp_path / "run")
    assert len(run.hops) == 1
    assert run.health.tracer_errors == 1
    assert "describe exploded" in run.health.error_messages[0]


def test_a_full_disk_turns_capture_off_and_keeps_what_was_written(tmp_path, monkeypatch, capfd):
    from flowmap.capture import shard_file

    real = os.posix_fallocate
    monkeypatch.setattr(shard_file, "FIRST_CHUNK", 1 << 16)
    with flowmap.tracing(tmp_path / "run"):
        monkeypatch.setattr(os, "posix_fallocate", lambda *a: (_ for _ in ()).throw(
            OSError(28, "No space left on device")))
        for i in range(5000):  # ~40 bytes a hop: past the first 64 KiB chunk
            flowmap.hop("a", "b", {"x": i}, items=[i])
        assert not flowmap.is_tracing()
        flowmap.hop("a", "b", 1)  # still a harmless no-op
    monkeypatch.setattr(os, "posix_fallocate", real)
    err = capfd.readouterr().err
    assert err.count("capture is off") == 1
    assert "No space left" in err
    run = flowmap.load(tmp_path / "run")
    kept = [h.items[0] for h in run.hops]
    assert 1000 < len(kept) < 5000 and kept == list(range(len(kept)))
    assert not run.truncated  # closed in the reserve, with a note of why
    assert "capture stopped: No space left on device" in run.health.error_messages


def test_unwritable_run_directory_warns_once(tmp_path, capfd):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with flowmap.tracing(str(blocker / "run")):
        flowmap.hop("a", "b", 1)
    assert "capture is off" in capfd.readouterr().err


def test_hostile_payloads_and_names_never_disturb_the_program(tmp_path):
    class Evil:
        def __getattr__(self, name):
            raise RuntimeError("gotcha")

        def __len__(self):
            raise RuntimeError("no len")

    loop: dict = {}
    loop["me"] = loop
    name = "<img src=x onerror=alert(1)>"
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop(name, "</script>", {"evil": Evil(), "loop": loop}, name='"quoted"\n')
    run = flowmap.load(tmp_path / "run")
    (h,) = run.hops
    assert (h.src, h.dst, h.name) == (name, "</script>", '"quoted"\n')
    assert run.health.tracer_errors == 0


@pytest.mark.parametrize("n", [1, 3])
def test_repeated_structures_are_interned(tmp_path, n):
    with flowmap.tracing(tmp_path / "run"):
        for i in range(200):
            flowmap.hop("a", "b", {"x": torch.zeros(4 + i % n)})
    (shard,) = [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".jsonl")]
    schema_lines = [ln for ln in shard.read_text().splitlines() if ln.startswith('["S"')]
    assert len(schema_lines) == n
