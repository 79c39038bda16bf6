"""Runs for the HTML tests: an RL-shaped pipeline traced for real, and a 1M-hop run built in memory.

`write_rl_run` goes through the public capture API (`flowmap.tracing`,
`hop`, `counter`, `drop`, `step`), so the HTML tests exercise the whole path
trace -> load -> render. Payloads are small numpy arrays with the RL loop's
shapes (varying sequence lengths give dynamic dims). `hostile=True` gives
owners, a seam, a leaf and a counter names that are markup.

`synthetic_run` builds a `Run` of any number of hops directly from reader
records: tracing a million hops for real would take minutes, and the size
bound is about what the renderer makes of them, not about capture.
"""

from __future__ import annotations

import os

import numpy as np

import flowmap
from flowmap.model.run import Run
from flowmap.read.reader import CounterSample, Drop, Hop, Leaf, Shard

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = "</script><script>alert(2)</script>"

OWNERS = (
    "dataset", "driver", "rollout/0", "rollout/1", "env", "ready_buffer", "batcher",
    "reward", "advantage", "trainer/rank0", "trainer/rank1", "weight_sync",
)
COUNTERS = ("in_flight", "target_watermark", "ready_buffer_depth", "staleness_max", "reward_mean", "loss")


def write_rl_run(path: str, *, steps: int = 6, group: int = 4, hostile: bool = False, seed: int = 0) -> str:
    """Trace `steps` steps of an asynchronous GRPO-shaped loop into the run directory `path`."""
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    with flowmap.tracing(path, children=False):
        traj_id = 0
        for step in range(steps):
            flowmap.step(step)
            with flowmap.owner("dataset"):
                prompts = {"input_ids": np.zeros((group, int(rng.integers(16, 48))), np.int32),
                           "uid": np.arange(group, dtype=np.int64)}
                flowmap.hop("dataset", "driver", prompts, name="prompts")
            ready: list[int] = []
            for engine in ("rollout/0", "rollout/1"):
                with flowmap.owner("driver"):
                    flowmap.hop("driver", engine, {"prompt_ids": prompts["input_ids"]}, name="request",
                                transport="rpc")
                    flowmap.counter("in_flight", 2 * group + int(rng.integers(0, 4)))
                    flowmap.counter("target_watermark", 2 * group + 2)
                for _ in range(group):
                    n = int(rng.integers(32, 160))
                    with flowmap.owner(engine):
                        flowmap.hop(engine, "env", {"action": np.zeros(n, np.int32)}, name="action")
                        flowmap.hop("env", engine, {"observation": np.zeros(n // 2, np.int32)}, name="observation")
                        traj = {
                            "tokens": np.zeros(n, np.int32),
                            "logprobs": np.zeros(n, np.float32),
                            "routed_experts": np.zeros((n, 4, 2), np.int16),
                        }
                        flowmap.hop(engine, "ready_buffer", traj, name="trajectory", items=[traj_id],
                                    transport="pickle", dims={"routed_experts": ("tokens", "layers", "topk")})
                    ready.append(traj_id)
                    traj_id += 1
            with flowmap.owner("ready_buffer"):
                flowmap.counter("ready_buffer_depth", len(ready))
                stale, fresh = ready[:1], ready[1:]
                flowmap.drop(stale, reason="stale")
                flowmap.counter("staleness_max", float(rng.integers(0, 3)))
                batch = {"tokens": np.zeros((len(fresh), 160), np.int32),
                         "mask": np.zeros((len(fresh), 160), np.bool_)}
                flowmap.hop("ready_buffer", "batcher", batch, name="trajectories", items=fresh)
            with flowmap.owner("batcher"):
                flowmap.hop("batcher", "reward", batch, name="batch")
            with flowmap.owner("reward"):
                scores = {"scores": np.zeros(len(fresh), np.float32)}
                flowmap.hop("reward", "advantage", scores, name="rewards")
                flowmap.counter("reward_mean", float(rng.random()))
            with flowmap.owner("advantage"):
                half = len(fresh) // 2
                for rank in ("trainer/rank0", "trainer/rank1"):
                    mb = {"tokens": batch["tokens"][:half], "advantages": np.zeros((half, 160), np.float32)}
                    flowmap.hop("advantage", rank, mb, name="micro_batch", transport="shm")
            with flowmap.owner("trainer/rank0"):
                flowmap.counter("loss", 1.0 / (step + 1) + float(rng.random()) * 0.1)
                weights = {"layers.0.weight": np.zeros((64, 64), np.float32), "lm_head": np.zeros((64, 256), np.float32)}
                flowmap.hop("trainer/rank0", "weight_sync", weights, name="weights", transport="collective",
                            version=step + 1)
            with flowmap.owner("weight_sync"):
                for engine in ("rollout/0", "rollout/1"):
                    flowmap.hop("weight_sync", engine, weights, name="weights", transport="collective",
                                version=step + 1)
        if hostile:
            with flowmap.owner(HOSTILE):
                flowmap.hop(HOSTILE, "driver", {HOSTILE: np.zeros(3, np.float32)}, name=HOSTILE_SCRIPT)
                flowmap.hop("driver", HOSTILE_SCRIPT, {"x\u2028y": b"abc"}, name=HOSTILE)
                flowmap.counter(HOSTILE_SCRIPT, 1.0)
                flowmap.counter(HOSTILE_SCRIPT, 2.0)
    return path


def synthetic_run(num_hops: int, *, num_steps: int = 5_000, counter_samples: int = 60_000) -> Run:
    """A `Run` of `num_hops` hops over the RL seams, built from reader records in memory.

    Sizes and times vary by fixed arithmetic (no RNG): the run is the same on every call.
    """
    seams = _rl_seams()
    leaves = {name: tuple(_leaf(p, shape) for p, shape in spec) for (_, _, name, spec) in seams}
    base = {name: sum(leaf.nbytes for leaf in ls) for name, ls in leaves.items()}
    per_step = max(1, num_hops // num_steps)
    n_seams = len(seams)
    hops = [
        Hop(1_000_000_000 + i * 1_200 + (i * 7919) % 500, 1, src, dst, name,
            base[name] + (i * 31) % 64, leaves[name], (), i // per_step, None, "ref",
            (i // n_seams,) if name == "trajectory" else ())
        for i, (src, dst, name, _) in ((i, seams[i % n_seams]) for i in range(num_hops))
    ]
    t_end = hops[-1].t_ns if hops else 1_000_000_000
    every = max(1, (t_end - 1_000_000_000) // max(1, counter_samples // len(COUNTERS)))
    counters = [
        CounterSample(t, 1, name, float((t // every * (k + 3)) % 17), "driver")
        for t in range(1_000_000_000, t_end, every) for k, name in enumerate(COUNTERS)
    ]
    shard = Shard("synthetic.jsonl", 1, 0, "host", [], None, 1_000_000_000, 0, hops=hops,
                  counters=counters, drops=[Drop(t_end, 1, "ready_buffer", "stale", (0, 1, 2))],
                  truncated=False)
    return Run("synthetic", [shard], {})


def _rl_seams() -> list[tuple[str, str, str, list[tuple[str, tuple]]]]:
    return [
        ("dataset", "driver", "prompts", [("input_ids", (8, 64))]),
        ("driver", "rollout/0", "request", [("prompt_ids", (8, 64))]),
        ("driver", "rollout/1", "request", [("prompt_ids", (8, 64))]),
        ("rollout/0", "ready_buffer", "trajectory", [("tokens", (512,)), ("logprobs", (512,))]),
        ("rollout/1", "ready_buffer", "trajectory", [("tokens", (512,)), ("logprobs", (512,))]),
        ("ready_buffer", "batcher", "trajectories", [("tokens", (16, 512))]),
        ("batcher", "reward", "batch", [("tokens", (16, 512)), ("mask", (16, 512))]),
        ("reward", "advantage", "rewards", [("scores", (16,))]),
        ("advantage", "trainer/rank0", "micro_batch", [("tokens", (8, 512))]),
        ("advantage", "trainer/rank1", "micro_batch", [("tokens", (8, 512))]),
        ("trainer/rank0", "weight_sync", "weights", [("w", (1024, 1024))]),
        ("weight_sync", "rollout/0", "weights", [("w", (1024, 1024))]),
        ("weight_sync", "rollout/1", "weights", [("w", (1024, 1024))]),
    ]


def _leaf(path: str, shape: tuple) -> Leaf:
    numel = 1
    for d in shape:
        numel *= d
    return Leaf(path, "tensor", shape, "float32", "cpu", numel * 4, 1, None)
