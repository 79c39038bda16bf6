"""Folding and ranking on hand-built process records (no hook, no torch)."""

from __future__ import annotations

from discover_records import fn, record

from flowmap.discover.candidates import analyse
from flowmap.discover.naming import KERNEL
from flowmap.discover.record import NOTHING_NEW, PASS_THROUGH, SAME_SELF, SHARES

S, SH, NN, PT = SAME_SELF, SHARES, NOTHING_NEW, PASS_THROUGH


def kept(d):
    return [c.fn.key for c in d.seams]


def test_the_trl_pattern_keeps_one_objects_methods_and_folds_the_rest():
    T = "trl.grpo:GRPOTrainer"
    rec = record(
        fn(f"{T}.training_step", result_bytes=8, contexts=[((), 2)]),
        fn(f"{T}._prepare_inputs", result_bytes=1400,
           contexts=[([(f"{T}.training_step", S)], 2)]),
        fn(f"{T}._generate_and_score", result_bytes=1400,
           contexts=[([(f"{T}._prepare_inputs", S), (f"{T}.training_step", S)], 2)]),
        fn(f"{T}._calculate_rewards", result_bytes=32,
           contexts=[([(f"{T}._generate_and_score", S)], 2)]),
        fn(f"{T}.compute_loss", call_bytes=1400, result_bytes=8, args=["inputs"],
           contexts=[([(f"{T}.training_step", S)], 2)]),
        # compute_loss returns _compute_loss's result as it is: folded (delegation)
        fn(f"{T}._compute_loss", call_bytes=1400, result_bytes=8, args=["inputs"],
           contexts=[([(f"{T}.compute_loss", S | SH)], 2)],
           delegated_to={f"{T}.compute_loss": 2}),
        # the model's forward, in another package, and everything it calls: folded
        fn("transformers.qwen:Model.forward", call_bytes=700, result_bytes=9000,
           args=["input_ids"], contexts=[([(f"{T}._compute_loss", SH)], 2)]),
        fn("transformers.qwen:Layer.forward", call_bytes=9000, result_bytes=9000,
           args=["hidden"], contexts=[([("transformers.qwen:Model.forward", 0)], 4)]),
    )
    d = analyse([rec])
    # ranked by bytes per step (compute_loss moves 1408 B), ties by calls, then by name
    assert kept(d) == [f"{T}.compute_loss", f"{T}._generate_and_score", f"{T}._prepare_inputs",
                       f"{T}._calculate_rewards", f"{T}.training_step"]
    loss = next(c for c in d.seams if c.fn.key == f"{T}.compute_loss")
    assert dict(loss.folded) == {f"{T}._compute_loss": 2, "transformers.qwen:Model.forward": 2,
                                 "transformers.qwen:Layer.forward": 2}


def test_a_nested_helper_is_kept_when_it_returns_new_data_and_folded_when_it_does_not():
    P = "pipe"
    rec = record(
        fn(f"{P}:Learner.train_step", call_bytes=8800, args=["batch"], contexts=[((), 3)]),
        # group_advantages(batch.rewards) returns new tensors: a seam of its own
        fn(f"{P}:group_advantages", call_bytes=64, result_bytes=64, args=["rewards"],
           contexts=[([(f"{P}:Learner.train_step", SH)], 3)]),
        # a helper in another module of the same package, on part of the payload: folded
        fn(f"{P}.utils:masked_mean", call_bytes=64, result_bytes=4, args=["x"],
           contexts=[([(f"{P}:Learner.train_step", SH)], 3)]),
        fn(f"{P}:WeightSync.push", call_bytes=16640, args=["state"], contexts=[((), 3)]),
        # load_weights(state) takes the pushed weights and returns nothing new: folded
        fn(f"{P}:Rollout.load_weights", call_bytes=16640, args=["state"],
           contexts=[([(f"{P}:WeightSync.push", SH | NN)], 3)]),
        # a pass-through returns its argument as it was given: folded
        fn(f"{P}:maybe_pad", call_bytes=8800, result_bytes=8800, args=["batch"],
           contexts=[([(f"{P}:Learner.train_step", SH | NN | PT)], 3)]),
    )
    d = analyse([rec])
    assert kept(d) == [f"{P}:WeightSync.push", f"{P}:Learner.train_step", f"{P}:group_advantages"]
    by_key = {c.fn.key: c for c in d.seams}
    assert set(by_key[f"{P}:Learner.train_step"].folded) == {f"{P}.utils:masked_mean",
                                                             f"{P}:maybe_pad"}
    assert set(by_key[f"{P}:WeightSync.push"].folded) == {f"{P}:Rollout.load_weights"}


def test_closures_are_listed_with_their_reason_or_folded_where_they_run():
    why = "a closure defined inside make: nothing outside it can name it"
    rec = record(
        # a decorator's wrapper between training_step and its method: transparent
        fn("trl.t:T.training_step", result_bytes=8, contexts=[((), 2)]),
        fn("trl.p:profiling.<locals>.wrapper", result_bytes=1400, target=False, why_not=why,
           contexts=[([("trl.t:T.training_step", S)], 2)]),
        fn("trl.t:T._prepare_inputs", result_bytes=1400,
           contexts=[([("trl.p:profiling.<locals>.wrapper", S), ("trl.t:T.training_step", S)], 2)],
           delegated_to={"trl.p:profiling.<locals>.wrapper": 2}),
        # a closure nobody encloses: listed, with the reason
        fn("app:make.<locals>.reward", call_bytes=100, result_bytes=4, target=False, why_not=why,
           contexts=[((), 5)]),
    )
    d = analyse([rec])
    assert kept(d) == ["trl.t:T._prepare_inputs", "trl.t:T.training_step"]
    assert [(c.fn.key, c.fn.why_not) for c in d.unnamed] == [("app:make.<locals>.reward", why)]
    assert "trl.p:profiling.<locals>.wrapper" in d.seams[0].folded


def test_autograd_kernels_are_dropped_with_what_they_call():
    rec = record(
        fn("trl.k:LogProb.backward", call_bytes=100, result_bytes=900, target=False,
           why_not=KERNEL, contexts=[((), 2)]),
        fn("trl.k:_addmm", call_bytes=900, contexts=[([("trl.k:LogProb.backward", 0)], 4)]),
        fn("trl.t:T.step", call_bytes=10, contexts=[((), 2)]),
    )
    d = analyse([rec])
    assert kept(d) == ["trl.t:T.step"] and not d.unnamed


def test_ranking_is_by_bytes_per_step_then_calls_and_min_bytes_leaves_small_ones_out():
    rec = record(
        fn("a:small", calls=10, call_bytes=100, contexts=[((), 10)]),
        fn("a:big", calls=2, call_bytes=4000, contexts=[((), 2)]),
        fn("a:tie", calls=5, call_bytes=4000, contexts=[((), 5)]),
        steps=(0, 1, 2, 3),
    )
    d = analyse([rec])
    assert kept(d) == ["a:tie", "a:big", "a:small"]
    assert d.seams[0].fn.bytes_per_step == 1000.0
    d = analyse([rec], min_bytes=1000)
    assert kept(d) == ["a:big"] and d.below_min_bytes == 2  # tie moves 800 B per call


def test_records_of_several_processes_merge():
    a = record(fn("w:Worker.run", calls=3, call_bytes=300, args=["batch"], contexts=[((), 3)]),
               steps=(0,))
    b = record(fn("w:Worker.run", calls=2, call_bytes=200, args=["batch"], contexts=[((), 2)]),
               steps=(0, 1))
    d = analyse([a, b])
    (c,) = d.seams
    assert (c.calls, c.fn.processes, c.bytes_in_per_call) == (5, 2, 100.0)
    assert c.fn.bytes_per_step == 300 / 1 + 200 / 2
    assert d.processes == 2


def test_nothing_carried_means_no_seams():
    d = analyse([record(fn("a:f", calls=9, contexts=[]))])
    assert d.seams == [] and d.unnamed == []


def test_a_private_helper_looped_inside_its_own_class_is_no_seam_and_says_why():
    E = "hidden.engine:Engine"
    rec = record(
        fn(f"{E}.generate", call_bytes=512, result_bytes=256, args=["prompts"],
           contexts=[((), 2)]),
        # called by generate, on the same object, 8 times per call: its inner loop
        fn(f"{E}._sample_tokens", calls=16, call_bytes=16 * 4096, result_bytes=16 * 32,
           args=["logits"], contexts=[([(f"{E}.generate", S)], 16)]),
        # private too, but called from another class: a hand-over, kept
        fn(f"{E}._load", call_bytes=2048, args=["state"],
           contexts=[([("hidden.sync:WeightSync.push", 0)], 2)]),
        fn("hidden.sync:WeightSync.push", call_bytes=2048, args=["state"], contexts=[((), 2)]),
    )
    d = analyse([rec])
    assert f"{E}._sample_tokens" not in kept(d)
    assert {f"{E}.generate", f"{E}._load"} <= set(kept(d))
    gen = next(c for c in d.seams if c.fn.key == f"{E}.generate")
    assert gen.helpers == {f"{E}._sample_tokens":
                           "a private method called only from inside Engine "
                           "(8 calls per call of Engine.generate)"}
    from flowmap.discover.table import render

    assert (f"not a seam: {E}._sample_tokens: a private method called only from inside "
            "Engine (8 calls per call of Engine.generate)") in render(d)
