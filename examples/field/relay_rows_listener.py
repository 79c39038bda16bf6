"""In-process relay over multiprocessing.connection Listener/Client, three threads.

sampler thread sends a batch dict of numpy arrays to the gateway thread; the gateway
splits it into a list of per-sample dicts (rows of the received arrays, unchanged) and
sends that list to the learner thread over a second connection. `Connection.send` pickles
numpy arrays into the message, so every row's bytes cross the gateway again (torch
tensors would go by shared memory, and their rows by handle: nothing to spare).
Hand figure: input_ids int64[32,256] (65,536 B) + logprobs float32[32,256] (32,768 B)
= 98,304 B/step pass through the gateway.
Expected: pass_through at gateway (sampler -> gateway -> learner), ~98 KB/step.
"""
import threading
from multiprocessing.connection import Client, Listener

import torch

import flowmap

STEPS = 4
EXPECT = {"kind": "pass_through", "seam": "sampler -> gateway",
          "bytes_per_step": 32 * 256 * 8 + 32 * 256 * 4}



def sampler(addr):
    with flowmap.owner("sampler"):
        conn = Client(addr)
        for s in range(STEPS):
            flowmap.step(s)
            conn.send({"input_ids": torch.randint(0, 5000, (32, 256)).numpy(),
                       "logprobs": torch.randn(32, 256).numpy()})
        conn.send(None)
        conn.close()


def gateway(lin, addr_out):
    with flowmap.owner("gateway"):
        cin = lin.accept()
        out = Client(addr_out)
        s = 0
        while (b := cin.recv()) is not None:
            flowmap.step(s)
            items = [{"input_ids": i, "logprobs": lp}
                     for i, lp in zip(b["input_ids"], b["logprobs"])]
            out.send(items)
            s += 1
        out.send(None)
        out.close()


def main():
    l1 = Listener(("127.0.0.1", 0))
    l2 = Listener(("127.0.0.1", 0))
    got = []

    def learner():
        with flowmap.owner("learner"):
            c = l2.accept()
            s = 0
            while (items := c.recv()) is not None:
                flowmap.step(s)
                got.append(len(items))
                s += 1

    ts = [threading.Thread(target=learner), threading.Thread(target=gateway, args=(l1, l2.address)),
          threading.Thread(target=sampler, args=(l1.address,))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [32] * STEPS, got


if __name__ == "__main__":
    main()
