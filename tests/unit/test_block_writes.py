"""A storage written in place is its writer's, as the stages' own blocks saw it written."""

from __future__ import annotations

import torch

import flowmap


def _edges(path) -> set[tuple[str, str]]:
    return {(e.src, e.dst) for e in flowmap.load(path).view.flow.edges}


def test_a_batch_normalised_in_place_while_the_loader_prefetches_is_the_normalisers(tmp_path):
    # GIVEN a loader that makes batch i+1 after the normaliser rewrote batch i in place, and
    # before the normaliser hands batch i on: the loader (its maker) ran since its last hop
    def load(i: int) -> torch.Tensor:
        with flowmap.owner("loader"):
            x = torch.randn(8, 32) * 3 + i
            flowmap.hop("loader", "norm", x, name="raw")
            return x

    with flowmap.tracing(tmp_path / "run"):
        nxt = load(0)
        for i in range(4):
            flowmap.step(i)
            cur = nxt
            with flowmap.owner("norm"):
                cur.sub_(cur.mean(0, keepdim=True)).div_(cur.std(0, keepdim=True))
            nxt = load(i + 1)
            with flowmap.owner("norm"):
                flowmap.hop("norm", "trainer", cur, name="normed")
            with flowmap.owner("trainer"):
                cur.pow(2).mean()
    # THEN what the trainer gets is the normaliser's, though the loader made the storage
    assert _edges(tmp_path / "run") == {("loader", "norm"), ("norm", "trainer")}


def test_advantages_written_in_place_while_the_next_batch_is_scored_are_the_adv_stages(tmp_path):
    # GIVEN rewards the driver hands to `adv`, which rewrites them in place; the reward
    # stage scores the next batch before the driver sends these on (all inside its block)
    def score() -> torch.Tensor:
        with flowmap.owner("reward"):
            r = torch.rand(16)
        flowmap.hop("reward", "driver", r, name="rewards")
        return r

    with flowmap.tracing(tmp_path / "run"), flowmap.owner("driver"):
        nxt = score()
        for i in range(4):
            flowmap.step(i)
            r = nxt
            flowmap.hop("driver", "adv", r, name="rewards")
            with flowmap.owner("adv"):
                r.sub_(r.mean()).div_(r.std())
            nxt = score()
            flowmap.hop("driver", "trainer", r, name="advantages")
    edges = _edges(tmp_path / "run")
    # THEN the trainer's input is the advantage stage's; the reward stage's goes to `adv`
    assert ("adv", "trainer") in edges and ("reward", "trainer") not in edges, edges
    assert ("driver", "trainer") not in edges, edges


def test_one_buffer_two_producers_overwrite_in_turn_is_each_ones_in_its_turn(tmp_path):
    # GIVEN A and B writing one buffer on alternate steps, each hopping it as it wrote it;
    # the idle one reads it meanwhile, or does not run at all
    for reads in (True, False):
        run = tmp_path / f"run{reads}"
        buf = torch.zeros(16, 16)
        with flowmap.tracing(run):
            for i in range(6):
                flowmap.step(i)
                writer, reader = ("A", "B") if i % 2 == 0 else ("B", "A")
                if reads:
                    with flowmap.owner(reader):
                        buf.norm()
                with flowmap.owner(writer):
                    buf.copy_(torch.full((16, 16), float(i)))
                    flowmap.hop(writer, "consumer", buf, name="traj")
                with flowmap.owner("consumer"):
                    buf.sum()
        flow = flowmap.load(run).view.flow
        hops = {(e.src, e.dst): e.hops for e in flow.edges}
        # THEN each producer's three hops are its own: none the reader's, none the consumer's
        assert hops == {("A", "consumer"): 3, ("B", "consumer"): 3}, (reads, hops)


def test_rows_a_stage_wrote_stay_its_when_the_maker_hands_on_other_rows_between(tmp_path):
    # GIVEN `mask` zeroing rows 0-3 of the loader's batch in place, then the loader handing
    # rows 4-7 to a logger, then `mask` handing rows 0-3 to the trainer
    with flowmap.tracing(tmp_path / "run"):
        for i in range(3):
            flowmap.step(i)
            with flowmap.owner("loader"):
                x = torch.full((8, 6), float(i + 1))
                flowmap.hop("loader", "mask", x, name="batch")
            with flowmap.owner("mask"):
                x[:4].mul_(0.5)
            with flowmap.owner("loader"):
                flowmap.hop("loader", "logger", x[4:], name="sample")
            with flowmap.owner("mask"):
                flowmap.hop("mask", "trainer", x[:4], name="masked")
            del x
    # THEN the trainer's rows are the mask's, the logger's the loader's
    assert _edges(tmp_path / "run") == {("loader", "mask"), ("loader", "logger"),
                                        ("mask", "trainer")}


def test_a_block_another_ran_inside_is_no_evidence_of_its_own_write(tmp_path):
    # GIVEN scores handed to `adv` and to `scaler`; `adv`'s block holds a `scaler` block that
    # rescales them in place; then the driver sends them on
    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("reward"):
            scores = torch.rand(8)
            flowmap.hop("reward", "adv", scores, name="scores")
            flowmap.hop("reward", "scaler", scores, name="scores")
        with flowmap.owner("adv"):
            scores.sum()
            with flowmap.owner("scaler"):
                scores.mul_(2.0)
        flowmap.hop("driver", "trainer", scores, name="advantages")
    # THEN the write is the inner block's, which saw it alone; the outer one saw the counter
    # move around another block and says nothing
    assert _edges(tmp_path / "run") == {("reward", "adv"), ("reward", "scaler"),
                                        ("scaler", "trainer")}


def test_a_tensor_a_coroutine_rewrites_before_putting_it_on_is_that_coroutines(tmp_path):
    # GIVEN asyncio tasks gen -> filter -> trainer over queues: filter scales what it gets in
    # place and puts it on; each task's block is open the whole run, the others' inside it
    import asyncio

    @flowmap.owner("gen")
    async def gen(q: asyncio.Queue) -> None:
        for i in range(4):
            await q.put(torch.randn(4, 8) + i)
            await asyncio.sleep(0)
        await q.put(None)

    @flowmap.owner("filter")
    async def scale(qi: asyncio.Queue, qo: asyncio.Queue) -> None:
        while (x := await qi.get()) is not None:
            x.mul_(0.5)
            await asyncio.sleep(0)
            await qo.put(x)
        await qo.put(None)

    @flowmap.owner("trainer")
    async def train(q: asyncio.Queue) -> None:
        while (x := await q.get()) is not None:
            x.sum()

    async def main() -> None:
        a: asyncio.Queue = asyncio.Queue()
        b: asyncio.Queue = asyncio.Queue()
        await asyncio.gather(gen(a), scale(a, b), train(b))

    with flowmap.tracing(tmp_path / "run"):
        asyncio.run(main())
    edges = {(e.src, e.dst) for e in flowmap.load(tmp_path / "run").view.flow.edges}
    # THEN no block saw the write alone: the sender, which was handed it, wrote it, not its
    # maker, though that ran too
    assert ("filter", "trainer") in edges and ("gen", "trainer") not in edges, edges


def test_a_buffer_an_engine_thread_fills_while_the_driver_waits_is_the_engines(tmp_path):
    # GIVEN a loader's output buffer put on a queue.Queue to an engine thread named by
    # `set_owner` (no block of its own), which fills it in place while the driver's block
    # waits; the driver then hands the buffer to the trainer, inside the block or after it
    import queue
    import threading

    for after in (False, True):
        run = tmp_path / f"run{after}"
        req: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()

        def engine(req: queue.Queue, done: queue.Queue) -> None:
            flowmap.set_owner("engine")
            while (m := req.get()) is not None:
                m["out"].copy_(torch.tanh(m["prompts"]) * 3)
                done.put(1)

        with flowmap.tracing(run):
            t = threading.Thread(target=engine, args=(req, done))
            t.start()
            for step in range(3):
                flowmap.step(step)
                with flowmap.owner("loader"):
                    prompts, out = torch.randn(4, 8), torch.empty(4, 8)
                    flowmap.hop("loader", "driver", {"prompts": prompts, "out": out}, name="req")
                with flowmap.owner("driver"):
                    req.put({"prompts": prompts, "out": out})  # a new dict, at the old one's address
                    done.get()
                    if not after:
                        flowmap.hop("driver", "trainer", {"completions": out}, name="completions")
                if after:
                    with flowmap.owner("driver"):
                        flowmap.hop("driver", "trainer", {"completions": out}, name="completions")
            req.put(None)
            t.join()
        edges = _edges(run)
        # THEN the trainer's completions are the engine's, and the put to it is a hop
        assert ("engine", "trainer") in edges and ("driver", "trainer") not in edges, (after, edges)
        assert ("loader", "engine") in edges, (after, edges)


def test_weights_an_optimizer_steps_are_its_stages_though_another_stage_hands_them_on(tmp_path):
    # GIVEN one module: `init` hands its weights to the rollout, the trainer (never handed
    # them) steps them with its optimizer, and the rollout hands them on to an evaluator
    torch.manual_seed(0)
    with flowmap.tracing(tmp_path / "run"):
        with flowmap.owner("init"):
            model = torch.nn.Linear(8, 4)
            flowmap.hop("init", "rollout", {"w": model.weight}, name="init_weights")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            flowmap.step(step)
            with flowmap.owner("rollout"), torch.no_grad():
                x = torch.randn(16, 8)
                y = model(x)
            with flowmap.owner("trainer"):
                loss = (model(x) - y.roll(1, 0)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            with flowmap.owner("rollout"):
                flowmap.hop("rollout", "evaluator", {"w": model.weight}, name="snapshot")
    # THEN the evaluator's weights are the trainer's: its optimizer wrote them
    assert _edges(tmp_path / "run") == {("init", "rollout"), ("trainer", "evaluator")}


def test_an_optimizer_step_in_a_script_of_hops_only_names_no_stage(tmp_path):
    # GIVEN a loop recorded with `flowmap.hop` alone: no owner block, the optimizer's step
    # runs as the unnamed `main`
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with flowmap.tracing(tmp_path / "run"):
        for step in range(3):
            flowmap.step(step)
            x = torch.randn(4, 8)
            flowmap.hop("rollout", "trainer", x, name="batch")
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            flowmap.hop("trainer", "rollout", dict(model.state_dict()), name="weights")
    # THEN the weights are the trainer's, who sent them: `main` is no stage
    assert _edges(tmp_path / "run") == {("rollout", "trainer"), ("trainer", "rollout")}


def test_a_buffer_put_again_each_step_for_an_engine_thread_to_fill_is_the_engines(tmp_path):
    # GIVEN one buffer the driver puts on an engine thread's queue every step (after handing
    # the last step's to the trainer with `flowmap.hop`), filled in place by the engine
    import queue
    import threading

    req: queue.Queue = queue.Queue()
    resp: queue.Queue = queue.Queue()

    def engine(req: queue.Queue, resp: queue.Queue) -> None:
        flowmap.set_owner("engine")
        while (buf := req.get()) is not None:
            buf.normal_()
            resp.put(buf)

    with flowmap.tracing(tmp_path / "run"):
        t = threading.Thread(target=engine, args=(req, resp))
        t.start()
        buf = torch.empty(32, 64)
        with flowmap.owner("driver"):
            for step in range(3):
                flowmap.step(step)
                req.put(buf)  # the same object as the last hop's: a hand-off all the same
                flowmap.hop("driver", "trainer", resp.get(), name="outputs")
            req.put(None)
        t.join()
    edges = _edges(tmp_path / "run")
    # THEN every step's outputs are the engine's
    assert ("engine", "trainer") in edges and ("driver", "trainer") not in edges, edges
