"""Micro-batches cut with torch.chunk and sent one message each over ZMQ (send_pyobj):
each chunk is a view, and pickling a view writes its whole storage.

Hand figure: hidden float32[4096,256] = 4 MiB per step cut in 4 chunks of 1 MiB; each of
the 4 messages carries the 4 MiB storage: 4 x (4 MiB - 1 MiB) = 12 MiB = 12,582,912 B/step
for nothing.
Expected: view on learner -> critic (PUSH), ~12.6 MB/step.
"""
import multiprocessing as mp

import torch
import zmq

import flowmap

STEPS = 3
EXPECT = {"kind": "view", "seam": "learner -> critic",
          "bytes_per_step": 4 * (4096 * 256 * 4 - 1024 * 256 * 4)}



def critic(port):
    with flowmap.owner("critic"):
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        pull.connect(f"tcp://127.0.0.1:{port}")
        while (m := pull.recv_pyobj()) is not None:
            flowmap.step(m[0])
            assert m[1].shape == (1024, 256)
        pull.close()
        ctx.term()


def main():
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=critic, args=(port,))
    p.start()
    with flowmap.owner("learner"):
        for s in range(STEPS):
            flowmap.step(s)
            hidden = torch.randn(4096, 256)
            for mb in torch.chunk(hidden, 4):
                push.send_pyobj((s, mb))
        push.send_pyobj(None)
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
