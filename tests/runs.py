"""Synthetic runs written straight in the trace format, for graph/findings/render tests.

Tests import this as `runs` (pytest puts `tests/` on sys.path through its
conftest). Shards are written by flowmap's writer (`flowmap.writer.TraceWriter`)
rather than by the tracer, so every timestamp, storage id and size is fixed:
golden files stay stable and no test needs torch.

`write_rl_run` writes an asynchronous GRPO-shaped run across three kinds of
process (driver, rollout engines, trainer ranks) with what the findings look
for: trajectories dropped as stale, a ready buffer that passes trajectories on
unchanged (same storage ids), padded tensors next to masks, one batch sent
whole to every rank (duplicate copies), pickled and collective transports, and
the cycle weight_sync -> rollout.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from flowmap.writer import TraceWriter, encode_line, items_json

ITEMSIZE = {"int64": 8, "float64": 8, "float32": 4, "int32": 4, "bfloat16": 2, "uint8": 1, "bool": 1}
HOSTILE = "<img src=x onerror=alert(1)>"


def tensor(path: str, shape: tuple, dtype: str = "float32", *, count: int = 1,
           dims: tuple[str, ...] | None = None, device: str = "cpu") -> tuple:
    """A leaf tuple as the trace stores it; bytes from shape and dtype (ranges use their max)."""
    numel = 1
    for d in shape:
        numel *= d[1] if isinstance(d, tuple) else d
    return (path, "tensor", shape, dtype, device, numel * ITEMSIZE[dtype] * count, count, dims)


def scalar(path: str, kind: str = "float") -> tuple:
    return (path, kind, (), "", "", 8, 1, None)


@dataclass
class ShardWriter:
    """One process's shard, written by flowmap's own `TraceWriter` with fixed times and ids."""

    path: str
    pid: int
    process: str | None = None
    t0_mono_ns: int = 1_000_000_000_000
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.writer = TraceWriter(self.lines.append)
        self.writer.header({"pid": self.pid, "ppid": 1, "host": "testhost", "argv": ["train.py"],
                            "process": self.process, "t0_mono_ns": self.t0_mono_ns,
                            "t0_wall_ns": 1_700_000_000_000_000_000})

    def hop(self, t_us: int, src: str, dst: str, name: str, leaves: list[tuple], *,
            storages: tuple[int, ...] = (), step: int | None = None, version: int | None = None,
            transport: str = "ref", items: list[Any] | None = None,
            nbytes: int | None = None) -> None:
        nb = sum(leaf[5] for leaf in leaves) if nbytes is None else nbytes
        # storage ids given, not interned: a test fixes which hops share a storage
        self.writer.hop(t_us, src, dst, name, leaves, nb, ",".join(map(str, storages)), step,
                        version, transport, items_json(items))

    def counter(self, t_us: int, name: str, value: float, owner: str = "") -> None:
        self.writer.counter(t_us, name, value, owner)

    def mark(self, t_us: int, name: str, owner: str = "") -> None:
        self.writer.mark(t_us, name, owner)

    def drop(self, t_us: int, owner: str, reason: str, items: list[Any]) -> None:
        self.writer.drop(t_us, owner, reason, items)

    def step(self, t_us: int, n: int) -> None:
        self.writer.step(t_us, n)

    def close(self, t_us: int, *, clean: bool = True) -> None:
        if clean:
            self.writer.end(t_us, len(self.lines), 0)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(self.path, "wb") as f:
            f.write(b"".join(map(encode_line, self.lines)))


def _traj_len(t: int) -> tuple[int, int]:
    """(prompt + response tokens, response tokens) of trajectory number `t`: varied, fixed."""
    response = 6 + (t * 7) % 19
    return 8 + response, response


@dataclass
class RLRunSpec:
    steps: int = 4
    rollouts: int = 2
    ranks: int = 2
    prompts_per_step: int = 2
    group_size: int = 4
    layers: int = 16
    topk: int = 8
    padding_counter: bool = False  # report `padding/batch` as the pipeline would
    hostile: bool = False  # add a seam and owners named like markup


def write_rl_run(path: str, spec: RLRunSpec | None = None) -> str:
    """Write the GRPO-shaped run into directory `path` (created) and return `path`."""
    spec = spec or RLRunSpec()
    os.makedirs(path, exist_ok=True)
    drv = ShardWriter(os.path.join(path, "testhost-1000-0001.flowmap.jsonl"), 1000, "driver")
    rollouts = [ShardWriter(os.path.join(path, f"testhost-{2000 + i}-0001.flowmap.jsonl"),
                            2000 + i, f"rollout{i}") for i in range(spec.rollouts)]
    ranks = [ShardWriter(os.path.join(path, f"testhost-{3000 + k}-0001.flowmap.jsonl"),
                         3000 + k, f"rank{k}") for k in range(spec.ranks)]
    sid = iter(range(1, 1_000_000))
    traj_no = 0
    for s in range(spec.steps):
        base = 1_000 + s * 100_000
        drv.step(base, s)
        for w in ranks:
            w.step(base, s)
        uids = [f"u{s}-{j}" for j in range(spec.prompts_per_step)]
        drv.hop(base + 10, "dataset", "driver", "prompts",
                [tensor("[*].prompt_ids", ((6, 8),), "int64", count=len(uids))],
                step=s, items=uids)
        trajs: list[tuple[str, int, int, int, tuple[int, ...]]] = []
        t = base + 100
        for uid in uids:
            for g in range(spec.group_size):
                tid = f"{uid}/{g}"
                length, response = _traj_len(traj_no)
                traj_no += 1
                r = len(trajs) % spec.rollouts
                drv.hop(t, "driver", f"rollout/{r}", "request",
                        [tensor("prompt_ids", (8,), "int64"), scalar("sampling.temperature")],
                        storages=(next(sid),), step=s, transport="rpc", items=[tid])
                trajs.append((tid, r, length, response, ()))
                t += 20
        t = base + 20_000
        for i, w in enumerate(rollouts):
            w.counter(t + i, "kv_cache_usage", 0.4 + 0.1 * i + 0.01 * s, f"rollout/{i}")
        arrived = []
        for tid, r, length, response, _ in trajs:
            storages = (next(sid), next(sid), next(sid))
            leaves = [tensor("input_ids", (length,), "int64", dims=("tokens",)),
                      tensor("old_logprobs", (response,), "float32"),
                      tensor("routed_experts", (length, spec.layers, spec.topk), "int32",
                             dims=("tokens", "layers", "topk"))]
            drv.hop(t, f"rollout/{r}", "ready_buffer", "trajectory", leaves, storages=storages,
                    step=s, version=max(0, s - 1), transport="pickle", items=[tid])
            arrived.append((tid, length, response, leaves, storages))
            t += 50
        drv.counter(t, "ready_buffer_depth", len(arrived), "ready_buffer")
        drv.counter(t, "in_flight", len(trajs), "driver")
        drv.counter(t, "target_watermark", spec.prompts_per_step * spec.group_size, "driver")
        # The last trajectory of every step after the first is too old to train on.
        if s > 0:
            stale = arrived.pop()
            drv.drop(t + 10, "ready_buffer", "stale", [stale[0]])
        t += 1_000
        for tid, _, _, leaves, storages in arrived:
            drv.hop(t, "ready_buffer", "batcher", "trajectory", leaves, storages=storages,
                    step=s, items=[tid])
            t += 10
        t = _train_step(drv, ranks, spec, s, arrived, t + 1_000, sid)
        _weight_sync(drv, ranks[0], spec, s, t)
    if spec.hostile:
        drv.hop(spec.steps * 100_000, 'evil"owner', "x\ny\\N", HOSTILE,
                [tensor(HOSTILE, (4,), "float32")], step=spec.steps - 1)
    end = spec.steps * 100_000 + 1_000
    for w in [drv, *rollouts, *ranks]:
        w.close(end)
    with open(os.path.join(path, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"flowmap": "run", "schema": 1, "command": ["train.py"]}, f)
    return path


def _train_step(drv: ShardWriter, ranks: list[ShardWriter], spec: RLRunSpec, s: int,
                arrived: list[tuple], t: int, sid: Any) -> int:
    b = len(arrived)
    tmax = max(a[1] for a in arrived)
    rmax = max(a[2] for a in arrived)
    items = [a[0] for a in arrived]
    # Right-padded batch: (B, T) token ids and masks, (B, R) response fields.
    batch = [tensor("input_ids", (b, tmax), "int64"),
             tensor("attention_mask", (b, tmax), "int64"),
             tensor("routed_experts", (b, tmax, spec.layers, spec.topk), "int32"),
             tensor("response_mask", (b, rmax), "int64"),
             tensor("old_logprobs", (b, rmax), "float32")]
    storages = tuple(next(sid) for _ in batch)
    if spec.padding_counter:
        real = sum(a[1] for a in arrived)
        drv.counter(t - 1, "padding/batch", 1 - real / (b * tmax), "batcher")
    drv.hop(t, "batcher", "reward", "batch", batch, storages=storages, step=s, items=items)
    rewards = tensor("token_level_rewards", (b, rmax), "float32")
    storages += (next(sid),)
    drv.hop(t + 500, "reward", "advantage", "batch", batch + [rewards], storages=storages,
            step=s, items=items)
    drv.counter(t + 501, "reward_mean", 0.25 + 0.1 * s, "reward")
    micro = batch + [rewards, tensor("advantages", (b, rmax), "float32")]
    storages += (next(sid),)
    # The whole batch goes to every rank: a copy per rank of the same storages.
    for k in range(len(ranks)):
        drv.hop(t + 1_000 + k, "advantage", f"trainer/rank{k}", "micro_batch", micro,
                storages=storages, step=s, transport="shm", items=items)
    for k, w in enumerate(ranks):
        w.mark(t + 2_000, "train.step", f"trainer/rank{k}")
        w.counter(t + 30_000, "loss", 1.0 / (s + 1) + 0.01 * k, f"trainer/rank{k}")
    return t + 40_000


def _weights() -> list[tuple]:
    return [tensor("embed.weight", (64, 32)), tensor("layers.0.mlp.weight", (32, 128)),
            tensor("lm_head.weight", (32, 64))]


def _weight_sync(drv: ShardWriter, rank0: ShardWriter, spec: RLRunSpec, s: int, t: int) -> None:
    rank0.hop(t, "trainer/rank0", "weight_sync", "state_dict", _weights(), storages=(1, 2, 3),
              step=s, version=s + 1, transport="collective")
    drv.mark(t + 100, "weight_sync.begin", "weight_sync")
    for i in range(spec.rollouts):
        drv.hop(t + 200 + i, "weight_sync", f"rollout/{i}", "weights", _weights(),
                storages=(900_000 + s * 10, 900_001 + s * 10, 900_002 + s * 10),
                step=s, version=s + 1, transport="rpc")
    drv.mark(t + 300, "weight_sync.end", "weight_sync")


def write_two_owner_run(path: str, hops: list[tuple]) -> str:
    """A one-process run of plain hops `(t_us, src, dst, name, nbytes[, items])`, step = index // 2."""
    os.makedirs(path, exist_ok=True)
    w = ShardWriter(os.path.join(path, "testhost-1-0001.flowmap.jsonl"), 1)
    for i, (t, src, dst, name, nbytes, *items) in enumerate(hops):
        w.hop(t, src, dst, name, [("data", "bytes", (nbytes,), "", "", nbytes, 1, None)],
              step=i // 2, items=items[0] if items else None)
    w.close(max((h[0] for h in hops), default=0) + 1)
    return path


def check_trace_rules(trace: dict) -> None:
    """The rules a viewer relies on; raises AssertionError naming the first broken one."""
    events = trace["traceEvents"]
    json.dumps(trace, allow_nan=False)
    named_pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_tracks = {(e["pid"], e["tid"]) for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    last_ts: dict[tuple, float] = {}
    slices: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        assert e["ph"] in {"M", "X", "s", "f", "C", "i"}, e
        if e["ph"] == "M":
            continue
        assert e["pid"] in named_pids, f"process {e['pid']} has no process_name"
        track = (e["pid"], e.get("tid"), e["name"] if e["ph"] == "C" else None)
        assert e["ts"] >= last_ts.get(track, -1), f"timestamps go back on {track}"
        last_ts[track] = e["ts"]
        if e["ph"] == "X":
            assert (e["pid"], e["tid"]) in named_tracks
            assert e["dur"] >= 2  # room for a flow point strictly inside
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())
    for track, spans in slices.items():
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"slices overlap on {track}"
    starts = Counter(e["id"] for e in events if e["ph"] == "s")
    ends = Counter(e["id"] for e in events if e["ph"] == "f")
    assert starts == ends and set(starts.values()) <= {1}, "every flow needs one start, one end"
    for e in events:
        if e["ph"] in ("s", "f"):
            assert e["ph"] == "s" or e["bp"] == "e"
            inside = [a <= e["ts"] < b for a, b in slices[(e["pid"], e["tid"])]]
            assert any(inside), f"flow point {e} is not inside a slice of its track"
