"""Control: a stage that computes something new of the same shape is no relay.

scorer process gets bare numpy rewards float32[4096] from rollout over a Pipe and sends
normalised advantages (new array, same shape and dtype) to the trainer over another Pipe.
Expected: no finding.
"""
import multiprocessing as mp

import numpy as np

import flowmap

STEPS = 4
EXPECT = None


def rollout(out):
    with flowmap.owner("rollout"):
        for s in range(STEPS):
            flowmap.step(s)
            out.send(np.random.rand(4096).astype(np.float32))
        out.send(None)


def normaliser(inp, out):
    with flowmap.owner("normaliser"):
        s = 0
        while (r := inp.recv()) is not None:
            flowmap.step(s)
            out.send(((r - r.mean()) / (r.std() + 1e-6)).astype(np.float32))
            s += 1
        out.send(None)


def main():
    ctx = mp.get_context("spawn")
    a_r, a_w = ctx.Pipe(duplex=False)
    b_r, b_w = ctx.Pipe(duplex=False)
    ps = [ctx.Process(target=rollout, args=(a_w,)), ctx.Process(target=normaliser, args=(a_r, b_w))]
    for p in ps:
        p.start()
    with flowmap.owner("trainer"):
        s = 0
        while (adv := b_r.recv()) is not None:
            flowmap.step(s)
            assert adv.shape == (4096,)
            s += 1
    for p in ps:
        p.join()


if __name__ == "__main__":
    main()
