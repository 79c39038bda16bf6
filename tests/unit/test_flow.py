"""The flow from storage identity: producer -> consumer edges, the driver's hand-offs collapsed.

GIVEN hand-built hops of a script whose driver (`main`) calls every stage,
WHEN the flow is built,
THEN a stage whose output is a later stage's input feeds it directly, in the order data moved.
"""

from __future__ import annotations

import pytest
import torch

from flowmap.model.flow import build_flow
from flowmap.read.events import Hop, Leaf


class Script:
    """Hops as a seam map records them: `main -> stage` for a call, `stage -> main` for its result."""

    def __init__(self) -> None:
        self.hops: list[Hop] = []

    def hop(self, src: str, dst: str, name: str, storages: list[int], nbytes: int = 100) -> None:
        leaves = tuple(Leaf(f"x{k}", "tensor", (10,), "float32", "cpu", nbytes, 1, None)
                       for k in range(len(storages)))
        self.hops.append(Hop(len(self.hops) * 1000, 1, src, dst, name, nbytes * len(storages),
                             leaves, tuple(storages), None, None, "ref", ()))

    def call(self, stage: str, given: list[int], made: list[int]) -> None:
        self.hop("main", stage, stage, given)
        self.hop(stage, "main", stage, made)


def grpo_script(steps: int = 2) -> Script:
    s = Script()
    for k in range(steps):
        base = 100 * k
        s.call("rollout", [base + 1], [base + 2])  # prompts -> sequences
        s.call("reward", [base + 2], [base + 3])  # sequences -> rewards
        s.call("advantage", [base + 3], [base + 4])  # rewards -> advantages
        s.call("policy", [base + 2], [base + 5])  # sequences -> log-probs
        s.call("loss", [base + 4, base + 5], [base + 6])  # advantages, log-probs -> loss
    return s


def test_a_stage_feeds_the_stage_that_takes_its_output_not_the_driver():
    flow = build_flow(grpo_script().hops)
    pairs = {(e.src, e.dst) for e in flow.edges}
    assert {("rollout", "reward"), ("reward", "advantage"), ("rollout", "policy"),
            ("advantage", "loss"), ("policy", "loss"), ("main", "rollout")} <= pairs
    # the driver's hand-offs are collapsed: no stage -> main edge for data main handed on
    assert ("rollout", "main") not in pairs and ("advantage", "main") not in pairs
    # the loss's output goes back to main and no further: main consumed it
    assert ("loss", "main") in pairs
    assert flow.found and flow.hand_offs == 8  # 4 hand-offs a step: sequences twice, 2 more
    assert flow.stages == ("main", "rollout", "reward", "advantage", "policy", "loss")


def test_bytes_and_hops_of_an_edge_are_those_of_the_producer_s_data():
    flow = build_flow(grpo_script(steps=3).hops)
    edge = next(e for e in flow.edges if (e.src, e.dst) == ("rollout", "policy"))
    assert (edge.hops, edge.nbytes, edge.names) == (3, 300, ("policy",))
    loss_in = [e for e in flow.edges if e.dst == "loss"]
    assert {e.src for e in loss_in} == {"advantage", "policy"}
    assert all(e.nbytes == 300 and e.hops == 3 for e in loss_in)


def test_a_result_that_is_its_input_and_hops_without_tensors_stay_direct_edges():
    s = Script()
    s.call("check", [1], [1])  # returns what it was given
    s.hops.append(Hop(10_000, 1, "main", "logger", "metrics", 16,  # no tensor: its own edge
                      (Leaf("loss", "float", (), "", "", 16, 1, None),), (), None, None, "ref", ()))
    flow = build_flow(s.hops)
    pairs = {(e.src, e.dst) for e in flow.edges}
    assert pairs == {("main", "check"), ("main", "logger")}
    assert not flow.found


def test_storages_of_two_processes_never_link():
    s = grpo_script(steps=1)
    other = Hop(10**9, 2, "main", "reward", "reward", 100,
                (Leaf("x", "tensor", (10,), "float32", "cpu", 100, 1, None),), (2,),
                None, None, "ref", ())
    flow = build_flow([*s.hops, other])
    edge = next(e for e in flow.edges if (e.src, e.dst) == ("main", "reward"))
    assert edge.hops == 1  # storage 2 of pid 2 is not rollout's output in pid 1


def test_ray_stages_follow_the_data_not_the_calls_that_created_the_actors():
    # GIVEN a Ray driver that creates the trainer first, then calls each actor with a step
    # number (no tensor), fetches a rollout's batch and passes it to the trainer
    s = Script()
    s.hop("driver", "Trainer/0", "__init__", [])
    s.hop("driver", "Rollout/0", "__init__", [])
    for step in range(2):
        s.hop("driver", "Rollout/0", "generate", [])  # the step number: control, not data
        s.hop("Rollout/0", "driver", "generate", [10 + step])  # recorded in the driver
        s.hop("driver", "Trainer/0", "train", [20 + step])  # recorded in the trainer
    # THEN the stages go as the data went: rollout, driver, trainer
    flow = build_flow(s.hops)
    assert flow.stages == ("Rollout/0", "driver", "Trainer/0")


def test_data_an_owner_sends_without_a_hop_into_it_is_still_its_producer_s():
    # GIVEN advantage sending storage 7, which sync made and advantage never received through
    # a hop (it read it from an attribute); a freed address never comes back under the same
    # id (tests/unit/test_storage_identity.py), so 7 is still sync's data
    s = Script()
    s.call("sync", [1], [7])
    s.call("generate", [7], [8])
    s.call("reward", [8], [9])
    s.call("advantage", [9], [7, 11])  # 7 read off an object; 11 advantage's own
    s.call("loss", [7, 11], [10])
    flow = build_flow(s.hops)
    pairs = {(e.src, e.dst) for e in flow.edges}
    # THEN the loss is fed by its real producers, and no edge names advantage for sync's data
    assert {("sync", "loss"), ("advantage", "loss"), ("sync", "generate")} <= pairs
    loss_in = {e.src: e for e in flow.edges if e.dst == "loss"}
    assert set(loss_in) == {"sync", "advantage"}


def test_an_edge_names_the_data_by_the_consumer_s_argument():
    s = Script()
    s.hop("main", "rollout", "rollout", [1])
    s.hop("rollout", "main", "rollout", [2])
    s.hops.append(Hop(10**6, 1, "main", "loss", "loss", 200,
                      (Leaf("advantages", "tensor", (4,), "float32", "cpu", 100, 1, None),
                       Leaf("batch.sequences", "tensor", (4,), "float32", "cpu", 100, 1, None)),
                      (99, 2), None, None, "ref", ()))
    flow = build_flow(s.hops)
    edge = next(e for e in flow.edges if (e.src, e.dst) == ("rollout", "loss"))
    assert edge.args == ("batch",) and edge.names == ("loss",)


def test_a_send_no_traced_process_received_is_no_stage():
    # GIVEN a DataLoader's driver sending its next indices to a worker queue nobody read
    # (the loop broke): the receiver is "(untraced)", between two stages in time
    s = Script()
    s.call("generate", [1], [2])
    s.hop("main", "(untraced)", "tuple", [9])
    s.call("loss", [2], [3])
    flow = build_flow(s.hops)
    assert "(untraced)" not in flow.stages and flow.stages.index("generate") < flow.stages.index("loss")
    assert ("generate", "loss") in {(e.src, e.dst) for e in flow.edges}
    assert not [e for e in flow.edges if "(untraced)" in (e.src, e.dst)]


def test_a_stage_that_hands_its_input_on_comes_before_the_stage_it_called():
    # GIVEN an episode as pytorch's reinforce.py runs it: env.reset's state goes to
    # select_action, which hands it on to Policy and gets the probabilities back; env.step's
    # state goes round again; finish_episode learns from Policy's log-probs
    s = Script()
    for k in range(2):
        base = 100 * k
        s.call("reset", [], [base + 1])
        state = base + 1
        for t in range(3):
            s.hop("main", "select_action", "state", [state])
            s.hop("select_action", "Policy", "x", [state])
            s.hop("Policy", "select_action", "forward", [base + 10 + t])
            s.hop("env.step", "main", "step", [base + 20 + t])
            state = base + 20 + t
        s.hop("Policy", "finish_episode", "forward", [base + 10, base + 11, base + 12])
    flow = build_flow(s.hops)
    # THEN the stages read as the script calls them: the caller before the model it calls
    assert [st for st in flow.stages if st != "main"] == [
        "reset", "select_action", "Policy", "env.step", "finish_episode"]
    pairs = {(e.src, e.dst) for e in flow.edges}
    assert {("reset", "Policy"), ("env.step", "Policy"), ("Policy", "select_action"),
            ("Policy", "finish_episode")} <= pairs
    assert ("reset", "select_action") not in pairs  # only handed on: no edge of its own


def test_a_stage_and_the_helper_it_calls_come_before_a_stage_fed_only_by_older_data():
    # GIVEN nano-rl's GRPO loop, recorded from a rollout on: rollout hands its logits to a
    # helper and gets their sum back (a cycle, both reached at once), the replay buffer's
    # sample then returns experiences made before the recording began (no producer seen)
    s = Script()
    for k in range(2):
        base = 100 * k
        s.hop("rollout", "sum_log_probs", "logits", [base + 1])
        s.hop("sum_log_probs", "rollout", "result", [base + 2])
        s.hop("rollout", "main", "rollout", [base + 1])
        s.hop("main", "ReplayBuffer.push", "experiences", [base + 1])
        s.hop("ReplayBuffer.sample", "main", "sample", [base + 50])
        s.hop("main", "objective", "group", [base + 50])
        s.hop("objective", "train", "loss", [base + 60])
    flow = build_flow(s.hops)
    # THEN the cycle reached first is placed first: the sample, fed by nothing recorded,
    # does not jump ahead of it
    assert [st for st in flow.stages if st != "main"] == [
        "rollout", "sum_log_probs", "ReplayBuffer.push", "ReplayBuffer.sample", "objective",
        "train"]


def test_slices_handed_on_are_their_producer_s_data_through_the_tracer(tmp_path):
    # a controller that hands micro-batches (slices of the loader's prompts) and rows of the
    # generator's numpy output on produced none of them: no edge may leave it
    import numpy as np
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for s in range(3):
            flowmap.step(s)
            prompts = torch.randint(0, 100, (32, 64))
            flowmap.hop("loader", "controller", {"prompts": prompts}, name="prompts")
            for i in range(4):
                flowmap.hop("controller", "generator", prompts[i * 8:(i + 1) * 8], name="mb")
                out = np.random.rand(8, 128).astype(np.float32)
                flowmap.hop("generator", "controller", out, name="completions")
                flowmap.hop("controller", "trainer", [out[r] for r in range(0, 8, 2)], name="rows")
            other = torch.randint(0, 100, (32, 64))  # never seen whole: its slices are new data
            flowmap.hop("controller", "trainer", other[8:16], name="own")
    flow = flowmap.load(tmp_path / "run").view.flow
    edges = {(e.src, e.dst, e.names) for e in flow.edges}
    assert edges == {("loader", "generator", ("mb",)), ("generator", "trainer", ("rows",)),
                     ("controller", "trainer", ("own",))}


def test_a_view_of_a_freed_storage_is_not_linked_to_it(tmp_path):
    # a storage freed and another allocated where it was: its views are not the old data's
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for s in range(20):
            flowmap.step(s)
            a = torch.randn(64, 64)
            flowmap.hop("loader", "controller", a, name="a")
            del a
            b = torch.randn(64, 64)  # often at the freed address
            flowmap.hop("controller", "trainer", b[8:16], name="b")
            del b
    flow = flowmap.load(tmp_path / "run").view.flow
    assert {(e.src, e.dst) for e in flow.edges} == {("loader", "controller"),
                                                     ("controller", "trainer")}


def _text_hop(hops: list[Hop], src: str, dst: str, name: str, strings: list[str],
              numbers: int = 0) -> None:
    leaves = [Leaf("[*]", "str", ((min(map(len, strings)), max(map(len, strings))),), "", "",
                   sum(map(len, strings)), len(strings), None)]
    if numbers:
        leaves.append(Leaf("ids[*]", "int", (), "", "", 8 * numbers, numbers, None))
    hops.append(Hop(len(hops) * 1000, 1, src, dst, name, sum(leaf.nbytes for leaf in leaves),
                    tuple(leaves), (), None, None, "ref", ()))


def test_text_handed_on_comes_from_its_producer_and_text_a_stage_writes_from_it():
    hops: list[Hop] = []
    prompts = [f"question {i}: what is {i}+{i}?" for i in range(16)]
    _text_hop(hops, "loader", "controller", "prompts", prompts)
    _text_hop(hops, "controller", "generator", "prompts", prompts)
    _text_hop(hops, "generator", "controller", "completions", [p + " it is 4" for p in prompts])
    _text_hop(hops, "controller", "trainer", "completions", [p + " it is 4" for p in prompts])
    _text_hop(hops, "controller", "trainer", "summary", ["16 prompts"])  # its own text
    edges = {(e.src, e.dst, e.names) for e in build_flow(hops).edges}
    assert edges == {("loader", "generator", ("prompts",)),
                     ("generator", "trainer", ("completions",)),
                     ("controller", "trainer", ("summary",))}


def test_text_a_stage_writes_with_its_input_s_figures_is_its_own_through_the_tracer(tmp_path):
    # GIVEN a generator that writes as many completions as it got prompts, of the same
    # lengths, and a controller that hands both on (re-wrapped in a dict on one way)
    import random
    import string

    import flowmap

    rnd = random.Random(0)

    def text(n: int) -> str:
        return "".join(rnd.choice(string.ascii_lowercase) for _ in range(n))

    with flowmap.tracing(tmp_path / "run"):
        for s in range(6):
            flowmap.step(s)
            prompts = [text(24) for _ in range(8)]
            flowmap.hop("loader", "controller", prompts, name="prompts")
            flowmap.hop("controller", "generator", prompts, name="prompts")
            completions = [p[::-1].upper() for p in prompts]  # new strings, the same lengths
            flowmap.hop("generator", "controller", completions, name="completions")
            flowmap.hop("controller", "trainer", {"batch": prompts}, name="prompts")
            flowmap.hop("controller", "trainer", completions, name="completions")
    edges = {(e.src, e.dst, e.names) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN each edge leaves the stage that wrote the text, whatever its figures
    assert edges == {("loader", "generator", ("prompts",)), ("loader", "trainer", ("prompts",)),
                     ("generator", "trainer", ("completions",))}


def test_text_of_two_stages_in_one_payload_and_numbers_come_from_who_made_them(tmp_path):
    # GIVEN a driver that hands the trainer prompts and completions in one dict, rewards
    # handed on as the reward stage made them, and advantages computed from them (a list
    # of floats shaped as the rewards)
    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for s in range(3):
            flowmap.step(s)
            with flowmap.owner("loader"):
                prompts = [f"question {s}.{i}: what is {i}+{i}?" for i in range(8)]
            flowmap.hop("loader", "driver", prompts, name="prompts")
            flowmap.hop("driver", "gen", prompts, name="prompts")
            with flowmap.owner("gen"):
                completions = ["".join(reversed(p)) for p in prompts]  # the same lengths
            flowmap.hop("gen", "driver", completions, name="completions")
            flowmap.hop("driver", "trainer", {"p": prompts, "c": completions}, name="text")
            with flowmap.owner("reward"):
                rewards = [float(len(c) % 3) for c in completions]
            flowmap.hop("reward", "driver", rewards, name="rewards")
            flowmap.hop("driver", "adv", rewards, name="rewards")
            with flowmap.owner("adv"):
                mean = sum(rewards) / len(rewards)
                advantages = [r - mean for r in rewards]
            flowmap.hop("adv", "driver", advantages, name="advantages")
            flowmap.hop("driver", "trainer", advantages, name="advantages")
    flow = flowmap.load(tmp_path / "run").view.flow
    edges = {(e.src, e.dst, e.names) for e in flow.edges}
    # THEN the dict is the loader's and the generator's, in equal shares; the numbers are
    # followed by their objects
    assert edges == {("loader", "gen", ("prompts",)), ("loader", "trainer", ("text",)),
                     ("gen", "trainer", ("text",)), ("reward", "adv", ("rewards",)),
                     ("adv", "trainer", ("advantages",))}, edges
    text = {e.src: e.nbytes for e in flow.edges if e.names == ("text",)}
    assert text["loader"] == text["gen"]


def test_text_of_two_stages_in_one_payload_is_split_by_their_bytes_and_handed_on_so(tmp_path):
    # GIVEN long prompts and the short answers a generator wrote for them, handed to the
    # trainer in one dict by the generator, which the trainer hands on to a logger
    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for s in range(3):
            flowmap.step(s)
            with flowmap.owner("loader"):
                prompts = [f"question {s}.{i}: " + "context " * 40 for i in range(8)]
            flowmap.hop("loader", "gen", prompts, name="prompts")
            with flowmap.owner("gen"):
                answers = [f"a{i}" for i in range(8)]
            flowmap.hop("gen", "trainer", {"prompts": prompts, "answers": answers}, name="batch")
            flowmap.hop("trainer", "logger", {"batch": {"prompts": prompts, "answers": answers}},
                        name="log")
    run = flowmap.load(tmp_path / "run")
    (leaves,) = {tuple((leaf.path, leaf.nbytes) for leaf in h.leaves)
                 for h in run.hops if h.name == "batch"}
    log = {h.nbytes for h in run.hops if h.name == "log"}.pop()
    prompt_bytes = dict(leaves)["prompts[*]"] / sum(b for _, b in leaves)
    edges = {(e.src, e.dst): e.nbytes for e in run.view.flow.edges}
    # THEN the loader's part is the prompts' bytes, not half of the batch, though the
    # generator and then the trainer (which only handed it on) wrapped it anew
    assert edges == {("loader", "gen"): 3 * 2672, ("loader", "logger"): 3 * round(log * prompt_bytes),
                     ("gen", "logger"): 3 * round(log * (1 - prompt_bytes))}, edges


def test_rows_two_stages_fill_in_one_buffer_are_each_their_own_through_the_tracer(tmp_path):
    # GIVEN one preallocated staging buffer per kind (torch, numpy): the loader fills row 0,
    # the generator row 1 from it
    import numpy as np
    import torch

    import flowmap

    tbuf, nbuf = torch.empty(2, 8, 16), np.empty((2, 8, 16), dtype=np.float32)
    with flowmap.tracing(tmp_path / "run"):
        for s in range(4):
            flowmap.step(s)
            for buf, kind in ((tbuf, "t"), (nbuf, "n")):
                buf[0] = torch.randn(8, 16) if kind == "t" else np.random.rand(8, 16)
                flowmap.hop("loader", "generator", buf[0], name=f"prompts_{kind}")
                buf[1] = buf[0] * 3
                flowmap.hop("generator", "trainer", buf[1], name=f"traj_{kind}")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the generator's row is the generator's: the loader's row did not reach that far
    assert edges == {("loader", "generator"), ("generator", "trainer")}


def test_data_rewritten_in_place_is_new_data_of_the_stage_that_rewrote_it(tmp_path):
    # GIVEN rewards normalised in place into advantages, a buffer the driver hands out empty
    # and the loader fills, and weights the trainer steps in place and syncs each step
    import torch

    import flowmap

    buf, weights = torch.empty(8, 16), torch.zeros(64)
    with flowmap.tracing(tmp_path / "run"):
        for step in range(3):
            flowmap.step(step)
            flowmap.hop("driver", "loader", buf, name="buffer")
            with flowmap.owner("loader"):
                buf.normal_()  # filled where it lies
            flowmap.hop("loader", "reward", buf, name="prompts")
            with flowmap.owner("reward"):
                r = buf.sum(1)
            flowmap.hop("reward", "driver", r, name="rewards")
            flowmap.hop("driver", "adv", r, name="rewards")
            with flowmap.owner("adv"):
                r.sub_(r.mean()).div_(r.std() + 1e-6)  # r holds the advantages now
            flowmap.hop("adv", "driver", r, name="advantages")
            flowmap.hop("driver", "trainer", r, name="advantages")
            with flowmap.owner("trainer"):
                weights.add_(0.1)  # an optimizer step
            flowmap.hop("trainer", "rollout", weights, name="weights")
    edges = {(e.src, e.dst, e.names) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN each edge leaves the stage that wrote the data last
    assert edges == {("driver", "loader", ("buffer",)), ("loader", "reward", ("prompts",)),
                     ("reward", "adv", ("rewards",)), ("adv", "trainer", ("advantages",)),
                     ("trainer", "rollout", ("weights",))}, edges


def _normalise_in_a_block(flowmap, scores):
    with flowmap.owner("adv"):
        scores.sub_(scores.mean()).div_(scores.std())


def _normalise_in_a_seam(flowmap, scores):
    @flowmap.seam("adv", result=False)
    def normalize_(x):  # verl's compute_advantage: writes the batch, returns nothing
        x.sub_(x.mean()).div_(x.std())

    normalize_(scores)


@pytest.mark.parametrize("normalise", [_normalise_in_a_block, _normalise_in_a_seam])
def test_data_a_stage_writes_in_place_and_the_driver_hands_on_is_that_stages(tmp_path, normalise):
    # GIVEN scores the driver hands to `adv`, which normalises them where they lie and hands
    # nothing back: the driver sends them on to the trainer itself
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for step in range(2):
            flowmap.step(step)
            with flowmap.owner("reward"):
                scores = torch.randn(8)
            flowmap.hop("reward", "driver", scores, name="scores")
            flowmap.hop("driver", "adv", scores, name="adv_in")
            normalise(flowmap, scores)
            flowmap.hop("driver", "trainer", scores, name="train_in")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the trainer's input is the advantage stage's, not the driver's (the hop's sender)
    assert edges == {("reward", "adv"), ("adv", "trainer")}, edges


def test_a_write_by_no_stage_that_had_the_data_is_the_senders_not_a_bystanders(tmp_path):
    # GIVEN scores handed to `adv`, which never runs; the driver's own code (no owner block)
    # rescales them in place while a logger that never had them runs a block of its own
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("reward"):
            scores = torch.randn(8)
        flowmap.hop("reward", "driver", scores, name="scores")
        flowmap.hop("driver", "adv", scores, name="adv_in")
        with flowmap.owner("logger"):
            torch.randn(4).sum()
        scores.mul_(2.0)
        flowmap.hop("driver", "trainer", scores, name="train_in")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the rescaled scores are the sender's: the logger made nothing the trainer got
    assert edges == {("reward", "adv"), ("driver", "trainer")}, edges


def test_weights_their_maker_steps_again_are_its_though_the_receiver_ran_and_the_driver_sends(
        tmp_path):
    # GIVEN weights the trainer steps in place each step, that the driver syncs to the
    # rollout, which generates in between (so both ran since the last sync)
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("init"):
            model = torch.nn.Linear(8, 8)
        flowmap.hop("init", "trainer", model.state_dict(), name="init_weights")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            flowmap.step(step)
            with flowmap.owner("rollout"):
                torch.randn(4, 8).sum()
            with flowmap.owner("trainer"):
                model(torch.randn(4, 8)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
            flowmap.hop("driver", "rollout", model.state_dict(), name="weights")
    edges = {(e.src, e.dst, e.hops) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN every sync carries the trainer's weights: not the driver's, not the rollout's
    assert edges == {("init", "trainer", 1), ("trainer", "rollout", 3)}, edges


def test_weights_stepped_before_any_hop_carried_them_are_the_stepper_s_at_their_first_sync(
        tmp_path):
    # GIVEN a trainer that builds its model and steps it before any hop carries the weights;
    # the driver syncs a detached state dict to the rollout after each step
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("trainer"):
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for step in range(3):
            flowmap.step(step)
            with flowmap.owner("trainer"):
                model(torch.randn(4, 8)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
            flowmap.hop("driver", "rollout", {k: v.detach() for k, v in
                                              model.state_dict().items()}, name="weights")
    edges = {(e.src, e.dst, e.hops) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the first sync too carries the trainer's weights, not the driver's
    assert edges == {("trainer", "rollout", 3)}, edges


def test_a_fresh_tensor_at_a_freed_ones_address_has_no_writer_of_that_ones(tmp_path):
    # GIVEN a loop whose fresh tensors are scaled in place by a stage, then freed: the next
    # step's tensor may lie at the same address, its version counter behind the last one's
    import torch

    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for step in range(4):
            flowmap.step(step)
            with flowmap.owner("loader"):
                x = torch.randn(16, 16)
                flowmap.hop("loader", "scaler", x, name="x")
            with flowmap.owner("scaler"):
                x.mul_(2.0).add_(1.0)
                flowmap.hop("scaler", "model", x, name="x_scaled")
            with flowmap.owner("model"):
                h = (x @ x.T).relu_()
                flowmap.hop("model", "head", h.detach(), name="hidden")
            del x, h
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN each step's data is its own step's stages': none is credited to the stage that
    # wrote the tensor the address held before
    assert edges == {("loader", "scaler"), ("scaler", "model"), ("model", "head")}, edges


def test_rows_of_one_buffer_filled_in_turn_keep_their_filler_as_producer(tmp_path):
    # GIVEN a buffer whose rows two engines fill in turn, in place, each handing its rows
    # back; then the driver hands each row block on (the buffer's counter moved at both
    # fills: a view shares its storage's version counter)
    import torch

    import flowmap

    buf = torch.zeros(4, 8)
    with flowmap.tracing(tmp_path / "run"):
        for step in range(2):
            flowmap.step(step)
            for engine, rows in (("engine_a", slice(0, 2)), ("engine_b", slice(2, 4))):
                with flowmap.owner(engine):
                    buf[rows].copy_(torch.randn(2, 8) + step)
                flowmap.hop(engine, "driver", buf[rows], name="filled")
            flowmap.hop("driver", "trainer_a", buf[0:2], name="rows")
            flowmap.hop("driver", "trainer_b", buf[2:4], name="rows")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN each engine's rows are its own: the other engine's write was elsewhere
    assert edges == {("engine_a", "trainer_a"), ("engine_b", "trainer_b")}, edges


def test_a_tensor_a_relay_sends_through_a_pipe_stays_its_producer_s(tmp_path, run_cli):
    # GIVEN a driver that hands the loader's prompts to a worker process through a Pipe:
    # torch moves the tensor into shared memory as it pickles it
    script = tmp_path / "pipe.py"
    script.write_text(PIPE_RELAY)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import flowmap

    flow = flowmap.load(tmp_path / "run").view.flow
    edges = {(e.src, e.dst) for e in flow.edges}
    # THEN the worker got the loader's data, and what it sends back is its own (the driver
    # made only the `None` that ends the worker)
    assert ("loader", "worker") in edges and ("worker", "trainer") in edges, edges
    assert {e.names for e in flow.edges if e.src == "driver"} <= {("NoneType",)}, flow.edges


@pytest.mark.parametrize("body, maker", [("prompts.mul_(2).add_(1)", "worker"), ("pass", "loader")])
def test_a_tensor_sent_back_through_shared_memory_holds_what_the_other_side_sent(
        tmp_path, run_cli, body, maker):
    # GIVEN the loader's tensor sent to a worker process through a Pipe (into shared
    # memory), and sent back: the very storage returns, written in place there or not
    script = tmp_path / "pipe.py"
    script.write_text(PIPE_RELAY.replace("conn.send(prompts * 2)", f"{body}\n        conn.send(prompts)"))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import flowmap

    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN what the trainer gets is the worker's where it wrote it, else still the loader's
    assert (maker, "trainer") in edges, edges
    assert {e for e in edges if e[1] == "trainer"} == {(maker, "trainer")}, edges


def test_text_a_controller_sends_on_without_a_hop_to_it_is_its_makers(tmp_path):
    # GIVEN a single-controller script: the loader hands prompts to the rollout, and the
    # controller sends those same strings (its local variable) with the rollout's
    # completions to the reward; the reward's constant scores are logged by the driver
    import random

    import flowmap

    rng = random.Random(7)
    with flowmap.tracing(tmp_path / "run"):
        for step in range(3):
            flowmap.step(step)
            with flowmap.owner("loader"):
                prompts = [f"Q{step}.{i}: {rng.randint(1, 99)} + {rng.randint(1, 99)}?"
                           for i in range(4)]
                flowmap.hop("loader", "rollout", {"prompts": prompts}, name="prompts")
            with flowmap.owner("rollout"):
                completions = [f"it is {rng.random()}" for _ in prompts]
                flowmap.hop("rollout", "controller", {"completions": completions},
                            name="completions")
            with flowmap.owner("controller"):
                flowmap.hop("controller", "reward", {"prompts": prompts,
                                                     "completions": completions}, name="samples")
            with flowmap.owner("reward"):
                scores = [1.0 if rng.random() > 0.5 else 0.0 for _ in completions]
                flowmap.hop("reward", "trainer", {"scores": scores}, name="scores")
            with flowmap.owner("driver"):
                flowmap.hop("driver", "logger", {"scores": scores}, name="scores")
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the prompts are the loader's, the logged scores the reward's
    assert edges == {("loader", "rollout"), ("loader", "reward"), ("rollout", "reward"),
                     ("reward", "trainer"), ("reward", "logger")}, edges


def test_a_list_of_tensors_beside_a_batch_is_priced_by_its_bytes_not_its_count(tmp_path):
    # GIVEN the rollout's sequences (768 B) sent on beside the reward's scores as a list of
    # two 16 B tensors: one folded leaf of two storages
    import flowmap

    with flowmap.tracing(tmp_path / "run"):
        for step in range(2):
            flowmap.step(step)
            seqs = torch.zeros(8, 24)
            flowmap.hop("rollout", "reward", seqs, name="sequences")
            scores = [torch.ones(4), torch.ones(4)]
            flowmap.hop("reward", "driver", scores, name="scores")
            flowmap.hop("driver", "trainer", {"seqs": seqs, "scores": scores}, name="batch")
    into = {(e.src, e.nbytes) for e in flowmap.load(tmp_path / "run").view.flow.edges
            if e.dst == "trainer"}
    # THEN each producer's edge carries its own bytes (2 hops each)
    assert into == {("rollout", 2 * 768), ("reward", 2 * 32)}, into


def test_the_second_chunk_of_a_batch_sent_through_a_queue_is_its_producers(tmp_path, run_cli):
    # GIVEN the rollout's batch, cut by the driver into chunks it puts on two workers'
    # torch.multiprocessing queues: the first put moves the storage into shared memory, and
    # the second chunk starts inside it, at its new address
    script = tmp_path / "split.py"
    script.write_text(SPLIT_RANKS)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import flowmap

    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN both chunks are the rollout's; the driver only cut them
    assert {("rollout", "rank0"), ("rollout", "rank1")} <= edges, edges
    assert not {e for e in edges if e[0] == "driver" and e[1].startswith("rank")}, edges


SPLIT_RANKS = """
import torch, torch.multiprocessing as mp, flowmap

def rank(q, name):
    flowmap.set_owner(name)
    for _ in range(2):
        float(q.get().sum())

if __name__ == "__main__":
    qs = [mp.Queue() for _ in range(2)]
    ps = [mp.Process(target=rank, args=(q, f"rank{i}")) for i, q in enumerate(qs)]
    for p in ps:
        p.start()
    for step in range(2):
        flowmap.step(step)
        with flowmap.owner("rollout"):
            seqs = torch.randn(8, 64)
            flowmap.hop("rollout", "driver", seqs, name="sequences")
        with flowmap.owner("driver"):
            for q, chunk in zip(qs, seqs.chunk(2)):
                q.put(chunk)
    for p in ps:
        p.join()
"""


def test_an_executors_tasks_are_its_submitters_and_its_shutdown_is_no_edge(tmp_path, run_cli):
    # GIVEN scorer workers of a ProcessPoolExecutor, given the driver's sequences by `map`
    script = tmp_path / "ppe.py"
    script.write_text(EXECUTOR_MAP)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import flowmap

    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN the tasks are the driver's (its manager thread sent them), the results the
    # scorers'; the executor's own `None` at shutdown is no message of the program's
    assert edges == {("driver", "scorer"), ("scorer", "trainer")}, edges


EXECUTOR_MAP = """
import numpy as np, flowmap
from concurrent.futures import ProcessPoolExecutor

def init():
    flowmap.set_owner("scorer")

def score(seq):
    return np.tanh(seq.astype(np.float64)).sum(axis=-1)

if __name__ == "__main__":
    with ProcessPoolExecutor(2, initializer=init) as ex:
        for step in range(2):
            flowmap.step(step)
            with flowmap.owner("driver"):
                seqs = [np.arange(16).reshape(2, 8) * (i + step) for i in range(4)]
                flowmap.hop("driver", "trainer", {"rewards": list(ex.map(score, seqs))},
                            name="rewards")
"""


def test_text_across_processes_is_followed_by_the_strings_each_side_named(tmp_path, run_cli):
    # GIVEN prompts sent to a worker process through a queue, which writes completions of the
    # same count and lengths, and a relay process that hands the prompts on unchanged
    script = tmp_path / "text.py"
    script.write_text(TEXT_PROCESSES)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import flowmap

    flow = flowmap.load(tmp_path / "run").view.flow
    made = {(e.src, e.dst, e.names) for e in flow.edges}
    # THEN the completions are the worker's, the relayed prompts still the loader's
    assert ("worker", "trainer", ("completions",)) in made, made
    assert ("loader", "trainer", ("prompts",)) in made, made
    assert not {e for e in made if e[0] in ("driver", "relay")}, made


TEXT_PROCESSES = """
import multiprocessing as mp, flowmap

def worker(qin, qout):
    flowmap.set_owner("worker")
    for _ in range(3):
        qout.put(["".join(reversed(p)) for p in qin.get()])  # new strings, the same lengths

def relay(qin, qout):
    flowmap.set_owner("relay")
    for _ in range(3):
        qout.put(qin.get())  # handed on as they came

if __name__ == "__main__":
    flowmap.set_owner("driver")
    ctx = mp.get_context("fork")
    to_worker, from_worker, to_relay, from_relay = (ctx.Queue() for _ in range(4))
    procs = [ctx.Process(target=worker, args=(to_worker, from_worker)),
             ctx.Process(target=relay, args=(to_relay, from_relay))]
    for p in procs:
        p.start()
    for step in range(3):
        flowmap.step(step)
        with flowmap.owner("loader"):
            prompts = [f"prompt {step}.{i}: {'x' * i}" for i in range(6)]
        flowmap.hop("loader", "driver", prompts, name="prompts")
        to_worker.put(prompts)
        to_relay.put(prompts)
        flowmap.hop("driver", "trainer", from_worker.get(), name="completions")
        flowmap.hop("driver", "trainer", from_relay.get(), name="prompts")
    for p in procs:
        p.join()
"""


PIPE_RELAY = """
import multiprocessing as mp, torch, flowmap

def worker(conn):
    flowmap.set_owner("worker")
    for _ in range(3):
        prompts = conn.recv()
        conn.send(prompts * 2)
    conn.recv()  # alive until its last tensor was taken: torch passes its storage by fd

if __name__ == "__main__":
    flowmap.set_owner("driver")
    parent, child = mp.get_context("spawn").Pipe()
    w = mp.get_context("spawn").Process(target=worker, args=(child,))
    w.start()
    for step in range(3):
        flowmap.step(step)
        with flowmap.owner("loader"):
            prompts = torch.randint(0, 100, (4, 8))
        flowmap.hop("loader", "driver", prompts, name="prompts")
        parent.send(prompts)
        flowmap.hop("driver", "trainer", parent.recv(), name="sequences")
    parent.send(None)
    w.join()
"""


def test_numbers_alone_are_no_identity_for_the_flow():
    # advantages shaped as the rewards they came from are the controller's own
    hops = [Hop(k * 1000, 1, src, dst, name, 128,
                (Leaf("[*]", "float", (), "", "", 128, 16, None),), (), None, None, "ref", ())
            for k, (src, dst, name) in enumerate([("reward", "controller", "rewards"),
                                                   ("controller", "trainer", "advantages")])]
    edges = {(e.src, e.dst) for e in build_flow(hops).edges}
    assert edges == {("reward", "controller"), ("controller", "trainer")}


def test_text_the_driver_takes_in_does_not_place_it_before_the_stages():
    # GIVEN a DataLoader worker handing the driver its prompts as text (the rollout then
    # generates from what the driver tells it, its sequences go to the loss)
    s = Script()
    for k in range(2):
        base = 100 * k
        prompts = Leaf("[*]", "str", (), "str", "cpu", 400, 8, None)
        s.hops.append(Hop(len(s.hops) * 1000, 1, "Dataset/0", "main", "prompts", 400,
                          (prompts,), (), None, None, "pickle", ()))
        s.call("rollout", [], [base + 2])
        s.call("loss", [base + 2], [base + 3])
    flow = build_flow(s.hops)
    # THEN the driver is no stage ahead of the rollout: the stages follow their tensors
    stages = [st for st in flow.stages if not st.startswith("Dataset/")]
    assert stages[0] == "rollout", flow.stages
    assert ("Dataset/0", "main") in {(e.src, e.dst) for e in flow.edges}


def test_data_made_before_recording_comes_from_the_owner_that_made_it():
    # a replay buffer's `sample` returns experiences `rollout` made before recording opened
    # (the run says so: `o` lines); `sample` only hands them on, with the newer ones
    s = Script()
    s.call("rollout", [1], [2])  # recorded: rollout makes 2
    s.call("ReplayBuffer.push", [2], [])
    s.hop("ReplayBuffer.sample", "main", "ReplayBuffer.sample", [2, 7])  # 7: made before
    s.hop("main", "objective", "objective", [2, 7])
    flow = build_flow(s.hops, origins={(1, 7): "rollout"})
    into = {(e.src, e.hops, e.nbytes) for e in flow.edges if e.dst == "objective"}
    assert into == {("rollout", 1, 200)}  # one hop, both experiences
    assert not [e for e in flow.edges if e.src == "ReplayBuffer.sample"]
    # without the run's word, the first stage that carried it is all there is to go by
    unsaid = build_flow(s.hops)
    assert ("ReplayBuffer.sample", "objective") in {(e.src, e.dst) for e in unsaid.edges}


def test_an_origin_in_a_rank_is_named_as_that_ranks_hops_name_its_owner():
    # a torch.distributed rank's hops say `trainer/rank1`; its optimizer step, run by the
    # owner the program set, `trainer`, made the weights it sends back
    s = Script()
    s.hop("rollout/rank0", "trainer/rank1", "send", [1])
    s.hop("trainer/rank1", "rollout/rank0", "send", [7])
    flow = build_flow(s.hops, origins={(1, 7): "trainer"})
    assert {(e.src, e.dst) for e in flow.edges} == {("rollout/rank0", "trainer/rank1"),
                                                   ("trainer/rank1", "rollout/rank0")}


def test_a_broadcast_received_is_what_its_root_sent_and_a_barrier_is_no_data():
    # the root's side and the receiver's of two broadcasts a step (weights, then a version),
    # recorded by two processes whose clocks disagree: the receiver's first is read first
    def hop(t, pid, src, dst, name, storage, nbytes=64):
        leaves = (Leaf("", "tensor", (16,), "float32", "cpu", nbytes, 1, None),) if nbytes else ()
        return Hop(t, pid, src, dst, name, nbytes, leaves, (storage,) if nbytes else (), None,
                   None, "collective", ())

    hops = [hop(0, 1, "trainer/rank0", "main", "weights", 5)]  # made and sent by the trainer
    for k, t in enumerate((10, 20, 30, 40)):
        hops.append(hop(t + 5, 1, "trainer/rank0", "group[0,1]", "broadcast", 5 + k % 2))
        hops.append(hop(t - 8, 2, "group[0,1]", "rollout/rank1", "broadcast", k % 2))
    hops += [hop(50, 1, "trainer/rank0", "group[0,1]", "barrier", 0, 0),
             hop(51, 2, "rollout/rank1", "group[0,1]", "barrier", 0, 0)]
    flow = build_flow(hops)
    edges = {(e.src, e.dst): e.hops for e in flow.edges}
    # the group made nothing and a barrier moved nothing: no edge from or to it
    assert edges == {("trainer/rank0", "main"): 1, ("trainer/rank0", "rollout/rank1"): 4}


def test_a_scatter_received_before_its_batch_was_made_is_still_the_batch_makers():
    # rank0's dataset stage makes a batch and the driver scatters its chunks; rank1's and
    # rank2's receipts are read first (their calls began waiting before the batch was made)
    def hop(t, pid, src, dst, name, storages, transport="collective"):
        leaves = tuple(Leaf(f"x{k}", "tensor", (10,), "float32", "cpu", 40, 1, None)
                       for k in range(len(storages)))
        return Hop(t, pid, src, dst, name, 40 * len(storages), leaves, tuple(storages), None,
                   None, transport, ())

    hops = [hop(1, 2, "group[0-2]", "reward/rank1", "scatter", [0]),
            hop(2, 3, "group[0-2]", "reward/rank2", "scatter", [0]),
            hop(3, 1, "dataset", "driver/rank0", "responses", [0], "ref"),
            hop(4, 1, "driver/rank0", "group[0-2]", "scatter", [1, 2, 3])]
    flow = build_flow(hops, parts={(1, 1): 0, (1, 2): 0, (1, 3): 0})
    assert {(e.src, e.dst) for e in flow.edges} == {("dataset", "reward/rank1"),
                                                   ("dataset", "reward/rank2")}


def test_origins_written_by_the_tracer_are_read_back_per_storage(tmp_path):
    # GIVEN arrays made before recording opened, two of them views of one storage, and the
    # tracer told who made them (as a run with no seam map does when its recording opens)
    import torch

    import flowmap
    from flowmap.discover.auto import name_makers

    made = torch.randn(8, 16)
    other = torch.randn(4)
    with flowmap.tracing(tmp_path / "run"):
        name_makers([(made, "rollout"), (made[2:4], "learner"), (other, "reward")])
        flowmap.hop("buffer", "learner", {"batch": made}, name="sample")
        flowmap.hop("buffer", "scorer", {"r": other}, name="sample")
    run = flowmap.load(tmp_path / "run")
    # THEN each storage is named once, by the first owner said (a view at an offset is a
    # new storage id of its own: it is named too), and the flow draws them from their maker
    (shard,) = run.shards
    assert sorted(shard.origins.values()) == ["learner", "reward", "rollout"]
    edges = {(e.src, e.dst) for e in run.view.flow.edges}
    assert edges == {("rollout", "learner"), ("reward", "scorer")}


def test_a_stage_that_sends_its_input_on_beside_new_data_of_its_own_consumed_it():
    # GIVEN a scorer that gets the loader's sequences and sends them to the trainer beside
    # the scores it made from them (new data, first seen in that hop)
    s = Script()
    for k in range(2):
        s.hop("loader", "scorer", "x", [10 * k + 1])
        s.hop("scorer", "trainer", "scored", [10 * k + 1, 10 * k + 2])
    pairs = {(e.src, e.dst) for e in build_flow(s.hops).edges}
    # THEN the scorer consumed the sequences, and so does the trainer: no hand-off collapsed
    assert pairs == {("loader", "scorer"), ("loader", "trainer"), ("scorer", "trainer")}


def test_a_stage_that_sends_its_input_on_beside_data_it_had_sent_before_only_handed_it_on():
    # GIVEN a controller that had sent its own plan to the trainer before, then gets the
    # loader's batch and sends batch and plan together (nothing new of its own)
    s = Script()
    s.hop("controller", "trainer", "plan", [5])
    s.hop("loader", "controller", "batch", [1])
    s.hop("controller", "trainer", "step", [1, 5])
    flow = build_flow(s.hops)
    pairs = {(e.src, e.dst) for e in flow.edges}
    # THEN the batch goes from the loader to the trainer; the controller only handed it on
    assert pairs == {("controller", "trainer"), ("loader", "trainer")}
    assert flow.hand_offs == 1


def test_a_caller_comes_before_the_helper_it_calls_and_uses():
    # GIVEN rollout calling a mask helper with its sequences and using the mask it gets back
    # (sent on beside a new attention mask), at the same moment the helper is reached
    s = Script()
    s.hop("rollout", "masker", "call", [1])
    s.hop("masker", "rollout", "mask", [2])
    s.hop("rollout", "loss", "rollout_data", [1, 2, 3])
    flow = build_flow(s.hops)
    # THEN the two form a loop, and the caller, whose tensors reached the helper, comes first
    assert flow.stages[:2] == ("rollout", "masker")
    assert ("masker", "rollout") in {(e.src, e.dst) for e in flow.edges}


def _mixed(t: int, src: str, dst: str, name: str, storages: tuple[int, ...],
           texts: tuple[int, ...]) -> Hop:
    """A hop of one tensor per storage and one float per text object (named by the tracer)."""
    leaves = (Leaf("seqs", "tensor", (4, 16), "int64", "cpu", 512, 1, None),
              Leaf("scores[*]", "float", (len(texts),), "", "", 8 * len(texts), len(texts), None))
    return Hop(t, 1, src, dst, name, 512 + 8 * len(texts), leaves, storages, None, None, "ref",
               (), texts=texts)


def test_floats_beside_the_tensors_come_from_the_stage_that_made_them():
    # GIVEN a reward stage that sends the rollout's sequences on with new float scores, and a
    # controller that hands both on to the trainer unchanged
    hops = []
    for k in range(2):
        seqs, scores = (10 * k + 1,), (10 * k + 2, 10 * k + 3)
        hops += [_mixed(100 * k, "rollout", "reward", "traj", seqs, ()),
                 _mixed(100 * k + 1, "reward", "controller", "scored", seqs, scores),
                 _mixed(100 * k + 2, "controller", "trainer", "scored", seqs, scores)]
    flow = build_flow(hops)
    edges = {(e.src, e.dst): e for e in flow.edges}
    # THEN the scores are the reward stage's data, the sequences the rollout's, each reaching
    # the trainer past the controller; the scores' edge carries the floats' bytes; and the
    # reward stage, which sent new scores beside the sequences, used them
    assert set(edges) == {("rollout", "trainer"), ("reward", "trainer"), ("rollout", "reward")}
    assert edges[("reward", "trainer")].nbytes == 2 * 16


def _text(t: int, src: str, dst: str, name: str, texts: tuple[int, ...]) -> Hop:
    leaves = (Leaf("[*]", "str", (len(texts),), "", "", 40 * len(texts), len(texts), None),)
    return Hop(t, 1, src, dst, name, 40 * len(texts), leaves, (), None, None, "ref", (),
               texts=texts)


def test_a_stage_that_sends_the_prompts_on_with_its_completions_used_them():
    # GIVEN a generator that gets the loader's prompts and sends prompts and completions on
    # in one payload, and a controller that only hands the prompts on
    hops = [_text(0, "loader", "generator", "prompts", (1, 2)),
            _text(1, "generator", "trainer", "pairs", (1, 2, 3, 4)),
            _text(2, "loader", "controller", "prompts", (5, 6)),
            _text(3, "controller", "trainer", "prompts", (5, 6))]
    pairs = {(e.src, e.dst) for e in build_flow(hops).edges}
    # THEN the generator keeps its input edge, the controller does not
    assert pairs == {("loader", "generator"), ("loader", "trainer"), ("generator", "trainer")}


def test_a_text_sources_share_counts_each_leaf_of_the_payload_once():
    # GIVEN a payload of two string lists alike in figures, and one of another length,
    # whose first source came with the same list twice (it got two alike): only one of
    # the payload's lists can be its
    from flowmap.model import flow_text

    def leaf(path: str, nbytes: int) -> Leaf:
        return Leaf(path, "str", (8,), None, "cpu", nbytes, 8, None)

    h = Hop(0, 1, "gen", "trainer", "batch", 900, (leaf("a[*]", 400), leaf("b[*]", 500)), (),
            None, None, "ref", (), texts=tuple(range(1, 9)))
    shape = flow_text.figures(h)[0]
    alike = ("str", None, repr((8,)), 400, 8)
    got = flow_text.Text("loader", [], 1, frozenset({1, 2, 3, 4}), (alike, alike))
    found = [(got, frozenset({1, 2, 3, 4})), (None, frozenset({5, 6, 7, 8}))]
    # THEN the source has the 400 bytes of one list, the sender the rest
    (theirs, their_part), (mine, my_part) = flow_text.parts(h, found, shape)
    assert (theirs, mine) == (400 / 900, 500 / 900)
    assert their_part == (alike,) and my_part == (("str", None, repr((8,)), 500, 8),)
