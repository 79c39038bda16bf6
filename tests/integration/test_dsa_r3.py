"""The DSA R3 case end to end: `examples/dsa_r3.py` traced with both transports, read with the CLI.

GIVEN the trainer with MoE + DSA, run synchronously with the same seed under
`flowmap trace`, once with `--transport payload` and once with `--transport handle`
(3 steps, with zero-variance groups filtered so that leaves are dropped too: the
staleness budget leaves nothing to go stale)
THEN
- the two runs train identically: the same `loss` series, to the last bit;
- projected to DeepSeek-V3.2 at 32K tokens, the payload run's hop into the
  ready buffer carries `indexer_topk` of 61 x 2048 x 4 B per token, 16.4 GB per
  leaf trajectory, and its top finding is that array passing through the
  control path (rollout -> ready_buffer -> batcher -> ranks);
- the handle run carries no replay array on the control path, a handle of a few
  hundred bytes per leaf instead, each rank reads only its own rows from the
  store, and the store ends empty (stale leaves freed and recorded as drops,
  no segment left in /dev/shm);
- `flowmap diff --project` shows the control path going from GB to KB.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import flowmap
from flowmap.model.projection import project
from flowmap.trainer.replay import SHM_DIR

PRESET = "deepseek-v3.2@32k"
INDEXER_BYTES_PER_SAMPLE = 32768 * 61 * 2048 * 4  # tokens x layers x index_topk x int32
ARGS = ["--steps", "3", "--groups-per-batch", "2", "--n", "4", "--max-staleness", "0",
        "--set", "warmup.clean_steps=10", "--set", "warmup.noisy_steps=0",
        "--set", "rollout.filter_zero_variance=true", "--no-progress"]
DROPPED = ("stale", "zero_variance")  # why the ready buffer lets leaves go
CONTROL = ("env", "ready_buffer", "batcher", "reward", "advantage", "weight_sync")
REPLAY_NAMES = ("routed_experts", "indexer_topk")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from flowmap_cli import run_cli

    root = tmp_path_factory.mktemp("dsa_r3")
    before = _segments()
    out = {}
    for transport in ("payload", "handle"):
        path = root / transport
        r = run_cli(["trace", "-o", str(path), "examples/dsa_r3.py", "--transport", transport,
                     *ARGS], cwd=Path(__file__).parents[2], timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"dsa_r3 [{transport}]: losses" in r.stdout
        out[transport] = path
    assert _segments() <= before, "replay-store segments left in /dev/shm"
    return out


def _segments() -> set[str]:
    return {p.name for p in SHM_DIR.glob("fmr*")} if SHM_DIR.is_dir() else set()


def _json(run_cli: Any, *args: str) -> dict[str, Any]:
    r = run_cli(list(args))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_both_transports_train_identically(runs: dict[str, Path]) -> None:
    series = {t: [v for _, v in flowmap.load(str(p)).counters["loss"].series]
              for t, p in runs.items()}
    assert len(series["payload"]) == 3
    assert series["payload"] == series["handle"]  # exact: the ranks replayed the same tensors


def test_payload_projects_to_16_gb_of_indexer_topk_per_sample_into_the_ready_buffer(
        runs: dict[str, Path], run_cli: Any) -> None:
    doc = _json(run_cli, "report", str(runs["payload"]), "--project", PRESET, "--json")
    assert doc["projection"]["preset"] == "deepseek-v3.2"
    into_buffer = [s for s in doc["seams"] if s["dst"] == "ready_buffer"]
    assert {s["src"] for s in into_buffer} == {"rollout/0", "rollout/1"}
    for s in into_buffer:
        leaf = next(x for x in s["leaves"] if x["path"] == "[*].indexer_topk")
        assert leaf["dims"] == ["tokens", "layers", "index_topk"]
        assert leaf["bytes"] >= 10e9 and leaf["shape"][1:] == [61, 2048]
    # per leaf trajectory (a hop carries a trajectory's 1 or 2 leaves): exactly one sample's
    run = project(flowmap.load(str(runs["payload"])), PRESET)
    for h in run.hops:
        if h.dst == "ready_buffer":
            (leaf,) = [x for x in h.leaves if x.path == "[*].indexer_topk"]
            assert math.isclose(leaf.nbytes / len(h.items), INDEXER_BYTES_PER_SAMPLE,
                                rel_tol=1e-6)


def test_the_top_finding_of_the_payload_run_is_the_pass_through_of_the_replay_arrays(
        runs: dict[str, Path], run_cli: Any) -> None:
    top = _json(run_cli, "report", str(runs["payload"]), "--project", PRESET,
                "--json")["findings"][0]
    assert top["kind"] == "pass_through"
    assert "`indexer_topk`" in top["message"]
    assert "rollout -> ready_buffer -> batcher -> reward, trainer" in top["message"]
    assert {"rollout/0 -> ready_buffer : trajectory", "ready_buffer -> batcher : samples",
            "batcher -> trainer/rank0 : micro_batch",
            "batcher -> trainer/rank1 : micro_batch"} <= set(top["seams"])


def test_the_handle_run_keeps_replay_arrays_off_the_control_path(runs: dict[str, Path]) -> None:
    run = flowmap.load(str(runs["handle"]))
    for key, seam in run.seams.items():
        arrays = [x.path for x in seam.leaves
                  if x.kind == "tensor" and x.path.rsplit(".", 1)[-1] in REPLAY_NAMES]
        if "replay_store" in key[:2]:
            assert arrays, key  # the data path: into the store, out to the ranks
        else:
            assert not arrays, f"{key} carries {arrays}"
    for h in run.hops:
        if h.name in ("trajectory", "samples") and h.items:
            handle = sum(x.nbytes for x in h.leaves if "replay_handle" in x.path)
            assert 0 < handle / len(h.items) <= 4096


def test_each_rank_reads_only_its_own_rows_and_the_store_ends_empty(
        runs: dict[str, Path]) -> None:
    run = flowmap.load(str(runs["handle"]))
    fed: dict[tuple[str, int | None], set[str]] = defaultdict(set)
    read: dict[tuple[str, int | None], set[str]] = defaultdict(set)
    for h in run.hops:
        if h.name == "micro_batch":
            fed[(h.dst, h.step)].update(h.items)
        if h.src == "replay_store":
            assert h.transport == "shm"
            read[(h.dst, h.step)].update(h.items)
    assert read and read == fed
    stored = {i for h in run.hops if h.dst == "replay_store" for i in h.items}
    # stale groups leave from the ready buffer, filtered ones from batch assembly
    dropped = {i for d in run.drops if d.owner in ("ready_buffer", "batcher") for i in d.items}
    freed = {i for d in run.drops if d.owner == "replay_store" and d.reason in DROPPED
             for i in d.items}
    assert dropped and freed == dropped
    assert set().union(*read.values()).isdisjoint(freed) and freed <= stored
    assert run.counters["replay_store_entries"].last == 0
    assert run.counters["replay_store_bytes"].last == 0


def test_diff_shows_the_control_path_going_from_gb_to_kb(
        runs: dict[str, Path], run_cli: Any) -> None:
    doc = _json(run_cli, "diff", str(runs["payload"]), str(runs["handle"]),
                "--project", PRESET, "-f", "json")
    by_seam = {s["seam"]: s for s in doc["seams"]}
    for label in ("rollout/0 -> ready_buffer : trajectory", "ready_buffer -> batcher : samples",
                  "batcher -> reward : rollout_batch", "batcher -> trainer/rank0 : micro_batch"):
        s = by_seam[label]
        assert s["a_bytes_per_step"] > 1e9 and s["b_bytes_per_step"] < 100e3, label
        assert any("indexer_topk removed" in x["change"] for x in s["leaves"])
    assert by_seam["replay_store -> trainer/rank0 : replay"]["status"] == "new"


def test_the_handle_run_names_no_store_as_a_pass_through_and_narrows_the_positions(
        runs: dict[str, Path], run_cli: Any) -> None:
    found = _json(run_cli, "report", str(runs["handle"]), "--project", PRESET,
                  "--json")["findings"]
    # the store is read through shared memory: where the data rests, not a middleman
    assert not [f for f in found if f["kind"] == "pass_through" and "replay_store" in f["message"]]
    wide = {f["message"].split("`")[1]: f for f in found if f["kind"] == "wide_ids"}
    # at 32K tokens, positions 0..32767 and the -1 pad fit int16 (routed experts, ~1 GiB a
    # step next to the indexer's TiB, are under the 1 % a finding needs)
    assert "int16 holds them" in wide["indexer_topk"]["message"]
    assert found[0] == wide["indexer_topk"]
