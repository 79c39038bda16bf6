"""verl 0.9.1's single controller traced unmodified: `flowmap trace examples/verl_grpo.py`.

Three traced runs of the example (Ray start is the slow part) serve every
test here: split mode twice (one worker group per role; the second run only
for the seam labels' stability) and colocated mode with `--preset verl`
(`create_colocated_worker_cls` + `spawn`, as `RayPPOTrainer` does), plus a
seam map on verl's GSM8K scorer, which the reward role calls. Expected
bytes come from verl itself: the example's own batches, split with
`DataProto.chunk` and summed with torch's `nbytes`.

verl pins transformers<5.11 (the TRL extra pins 5.24), so these tests run in
their own venv: `bash scripts/setup-verl.sh && .venv-verl/bin/python -m pytest
tests/integration/test_verl.py` (scripts/test.sh does both).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

import flowmap
from flowmap.findings import duplicates, findings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("verl") is None,
                       reason="verl tests run in .venv-verl: bash scripts/setup-verl.sh && "
                              ".venv-verl/bin/python -m pytest tests/integration/test_verl.py"),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "verl_grpo.py"
STEPS, PROMPTS, N, WORLD = 3, 4, 4, 2  # the example's defaults: 16 samples a step, 2 actor ranks
DISPATCHED = {"init_model", "generate_sequences", "compute_reward", "update_actor", "evaluate"}


def _trace(tmp: Path, name: str, *args: str) -> flowmap.Run:
    from flowmap_cli import run_cli

    # Ray's socket paths must stay under 107 bytes: pytest's tmp paths are too deep.
    ray_tmp = tempfile.mkdtemp(prefix="fmverl", dir="/tmp")
    try:
        r = run_cli(["trace", "-o", str(tmp / name), *args], cwd=tmp, timeout=400,
                    env={"RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": ray_tmp})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("step ") == STEPS and "held-out accuracy" in r.stdout
    assert "never appeared" not in r.stderr
    return flowmap.load(str(tmp / name))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verl")
    (tmp / "score.yaml").write_text(
        "seams:\n  - {target: 'verl.utils.reward_score.gsm8k:compute_score', owner: score,"
        " args: [solution_str, ground_truth]}\n")
    return {
        "split": _trace(tmp, "split", str(EXAMPLE)),
        "colocated": _trace(tmp, "colocated", "--preset", "verl", "--seams", "score.yaml",
                            str(EXAMPLE), "--colocated"),
    }


@pytest.fixture(scope="module")
def example():
    """The example module itself, to rebuild its batches with verl."""
    spec = importlib.util.spec_from_file_location("verl_grpo_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def hops(run, src, dst, name):
    return [h for h in run.hops if h.seam == (src, dst, name)]


def tensor_bytes(hop, prefix):
    return sum(x.nbytes for x in hop.leaves if x.path.startswith(prefix))


def leaf(hop, path):
    return next(x for x in hop.leaves if x.path == path)


@pytest.mark.parametrize("mode, reward_ranks", [("split", 1), ("colocated", 2)])
def test_owners_are_verl_roles_and_ranks(runs, mode, reward_ranks):
    run = runs[mode]
    expected = {"driver", "actor_rollout/0", "actor_rollout/1", "get_master_addr_port",
                "group[0,1]", *(f"reward/{r}" for r in range(reward_ranks))}
    if mode == "colocated":
        expected |= {"advantage", "loss", "score"}  # from --preset verl and score.yaml
    assert set(run.owners) == expected
    # no Ray-level names (prefixed methods, Worker.__init__'s own calls) reach the graph
    assert {h.name for h in run.hops} <= DISPATCHED | {
        "__init__", "get_master_addr_port", "scores", "advantages", "loss_mat", "loss",
        "compute_score", "all_reduce"}
    assert run.health.tracer_errors == 0 and run.health.bad_lines == 0


@pytest.mark.parametrize("mode", ["split", "colocated"])
def test_the_gradient_all_reduce_shows_per_actor_rank(runs, example, mode):
    # update_actor all-reduces each parameter's gradient over the actor group (gloo):
    # flowmap's torch.distributed capture gives one hop per parameter per step,
    # from the role and rank that runs it, carrying that gradient's bytes.
    params = [p.nbytes for p in example.TinyPolicy().parameters()]
    for rank in range(WORLD):
        got = hops(runs[mode], f"actor_rollout/{rank}", "group[0,1]", "all_reduce")
        assert len(got) == STEPS * len(params)
        assert sum(h.nbytes for h in got) == STEPS * sum(params)
        assert {h.transport for h in got} == {"collective"}
        assert sorted({h.step for h in got}) == list(range(1, STEPS + 1))


@pytest.mark.parametrize("mode", ["split", "colocated"])
def test_each_dispatched_call_is_one_hop_per_rank_with_its_chunk(runs, example, mode):
    import numpy as np

    run = runs[mode]
    rng = np.random.default_rng(0)  # the example's prompt stream, rebuilt with verl
    for step in range(1, STEPS + 1):
        batch, _ = example.make_prompts(rng, PROMPTS)
        batch = batch.repeat(repeat_times=N, interleave=True)
        chunks = batch.chunk(WORLD)  # what DP_COMPUTE_PROTO sends each rank
        for rank, chunk in enumerate(chunks):
            [hop] = [h for h in hops(run, "driver", f"actor_rollout/{rank}", "generate_sequences")
                     if h.step == step]
            want = sum(t.nbytes for t in chunk.batch.values())
            assert want == (PROMPTS * N // WORLD) * example.PROMPT_LEN * 8
            assert tensor_bytes(hop, "prompts.batch.") == want
            for key in chunk.non_tensor_batch:  # the walk reaches the numpy object arrays
                assert tuple(leaf(hop, f"prompts.non_tensor_batch.{key}").shape) == (8,)
            assert leaf(hop, "prompts.meta_info.global_steps").kind == "int"
    for rank in range(WORLD):  # and nothing twice: exactly one call hop per step
        call = hops(run, "driver", f"actor_rollout/{rank}", "generate_sequences")
        assert sorted(h.step for h in call) == [1, 2, 3]
        assert {h.transport for h in call} == {"rpc"}


@pytest.mark.parametrize("mode", ["split", "colocated"])
def test_one_to_all_sends_the_whole_batch_to_every_rank(runs, example, mode):
    import numpy as np
    import torch

    held_out, answers = example.make_prompts(np.random.default_rng(1), 8)
    held_out.batch["answers"] = torch.as_tensor(answers)
    want = sum(t.nbytes for t in held_out.batch.values())
    for rank in range(WORLD):
        [hop] = hops(runs[mode], "driver", f"actor_rollout/{rank}", "evaluate")
        assert tensor_bytes(hop, "data.batch.") == want == 8 * 4 * 8 + 8 * 8
        assert hop.step == STEPS
        # evaluate is non-blocking: the driver never holds the results, the ranks record them
        [back] = hops(runs[mode], f"actor_rollout/{rank}", "driver", "evaluate")
        assert back.step == STEPS and [(x.path, x.kind) for x in back.leaves] == [("result", "float")]


@pytest.mark.parametrize("mode, reward_ranks", [("split", 1), ("colocated", 2)])
def test_later_calls_carry_each_ranks_share_of_the_grown_batch(runs, example, mode,
                                                               reward_ranks):
    import torch
    from verl import DataProto

    rows, r = PROMPTS * N, example.RESPONSE_LEN
    p, t = example.PROMPT_LEN, example.PROMPT_LEN + example.RESPONSE_LEN
    # the batch update_actor gets, by the shapes of what rollout, reward and GRPO add
    whole = DataProto.from_dict(tensors={
        **{k: torch.zeros(rows, n, dtype=torch.int64) for k, n in [
            ("prompts", p), ("responses", r), ("response_mask", r), ("input_ids", t),
            ("attention_mask", t), ("position_ids", t)]},
        **{k: torch.zeros(rows, r) for k in [
            "old_log_probs", "token_level_scores", "advantages", "returns"]}})
    for rank, chunk in enumerate(whole.chunk(WORLD)):
        for hop in hops(runs[mode], "driver", f"actor_rollout/{rank}", "update_actor"):
            assert tensor_bytes(hop, "data.batch.") == sum(x.nbytes for x in chunk.batch.values())
    before_reward = whole.select(batch_keys=[
        "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
        "old_log_probs"])
    for rank, chunk in enumerate(before_reward.chunk(reward_ranks)):
        call = hops(runs[mode], "driver", f"reward/{rank}", "compute_reward")
        assert [h.step for h in call] == [1, 2, 3]
        assert all(tensor_bytes(h, "data.batch.") == sum(x.nbytes for x in chunk.batch.values())
                   for h in call)


@pytest.mark.parametrize("mode", ["split", "colocated"])
def test_results_travel_back_from_each_rank_at_its_step(runs, example, mode):
    run = runs[mode]
    pids = {}
    for rank in range(WORLD):
        back = hops(run, f"actor_rollout/{rank}", "driver", "generate_sequences")
        assert sorted(h.step for h in back) == [1, 2, 3]
        for h in back:  # recorded in the worker, where the result is real
            assert tuple(leaf(h, "result.batch.responses").shape) == (8, example.RESPONSE_LEN)
            assert tuple(leaf(h, "result.batch.input_ids").shape) == (
                8, example.PROMPT_LEN + example.RESPONSE_LEN)
        assert {h.pid for h in back} != {run.hops[0].pid}  # not the driver
        pids[rank] = {h.pid for h in back}
        metrics = hops(run, f"actor_rollout/{rank}", "driver", "update_actor")
        assert [h.step for h in metrics] == [1, 2, 3]
        assert [x.path for x in metrics[0].leaves] == ["result.loss"]
    assert pids[0] != pids[1]
    reward = hops(run, "reward/0", "driver", "compute_reward")
    assert len(reward) == STEPS
    if mode == "colocated":  # one process per rank hosts both roles, each under its own name
        assert {h.pid for h in reward} == pids[0]


def test_work_inside_a_call_runs_as_the_role_and_rank(runs):
    run = runs["colocated"]  # --preset verl maps core_algos.agg_loss, called in update_actor
    for rank in range(WORLD):
        loss = hops(run, f"actor_rollout/{rank}", "loss", "loss_mat")
        assert [h.step for h in loss] == [1, 2, 3]
        assert tensor_bytes(loss[0], "loss_mat") == 8 * 6 * 4
        # the reward role shares the process with actor_rollout, yet its calls are its own:
        # one GSM8K score per sample of its chunk, from the process of the same rank
        score = hops(run, f"reward/{rank}", "score", "compute_score")
        assert Counter(h.step for h in score) == {1: 8, 2: 8, 3: 8}
        assert {h.pid for h in score} == {h.pid for h in loss}
        assert leaf(score[0], "ground_truth").kind == "str"
    # GRPO's advantage runs on the driver: 16 samples' rewards and masks, one uid each
    [adv] = [h for h in hops(run, "driver", "advantage", "scores") if h.step == 1]
    assert tensor_bytes(adv, "token_level_rewards") == 16 * 6 * 4
    assert tuple(leaf(adv, "index").shape) == (16,)


def test_findings_raise_no_false_duplicates(runs):
    for run in runs.values():
        # the one true duplicate: ONE_TO_ALL sends the held-out set to both ranks
        dup = duplicates.detect(run.view)
        assert [f.seams for f in dup] == [[f"driver -> actor_rollout/{r} : evaluate"
                                           for r in range(WORLD)]], dup
        # ... a few hundred bytes a step, under 1 % of the step's payload: not worth a line
        assert dup[0].bytes_per_step < 0.01 * run.view.totals.bytes_per_step_mean
        assert [f for f in findings(run.view) if f.kind == "duplicate"] == []


def test_seam_labels_are_identical_across_two_runs(runs, tmp_path_factory):
    again = _trace(tmp_path_factory.mktemp("verl-again"), "split", str(EXAMPLE))
    assert set(again.seams) == set(runs["split"].seams)
    assert Counter(h.seam for h in again.hops) == Counter(h.seam for h in runs["split"].hops)
