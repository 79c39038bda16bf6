"""Control for relay_rows_listener.py: the sampler sends the batch to the learner
directly; the gateway only forwards the step's sample count."""
import threading
from multiprocessing.connection import Client, Listener

import torch

import flowmap

STEPS = 4
EXPECT = None



def sampler(addr_gw, addr_learner):
    with flowmap.owner("sampler"):
        gw = Client(addr_gw)
        ln = Client(addr_learner)
        for s in range(STEPS):
            flowmap.step(s)
            ln.send({"input_ids": torch.randint(0, 5000, (32, 256)),
                     "logprobs": torch.randn(32, 256)})
            gw.send({"n": 32, "step": s})
        gw.send(None)
        ln.send(None)


def gateway(lin, addr_out):
    with flowmap.owner("gateway"):
        cin = lin.accept()
        out = Client(addr_out)
        s = 0
        while (b := cin.recv()) is not None:
            flowmap.step(s)
            out.send(("count", b["n"]))
            s += 1
        out.send(None)


def main():
    l1, l2, l3 = (Listener(("127.0.0.1", 0)) for _ in range(3))
    got = []

    def learner():
        with flowmap.owner("learner"):
            data = l3.accept()
            ctl = l2.accept()
            s = 0
            while (m := ctl.recv()) is not None:
                flowmap.step(s)
                b = data.recv()
                got.append(b["input_ids"].shape[0] == m[1])
                s += 1

    ts = [threading.Thread(target=learner), threading.Thread(target=gateway, args=(l1, l2.address)),
          threading.Thread(target=sampler, args=(l1.address, l3.address))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [True] * STEPS, got


if __name__ == "__main__":
    main()
