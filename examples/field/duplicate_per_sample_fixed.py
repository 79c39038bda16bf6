"""Control for duplicate_per_sample.py: one message per group, the image once and
the 8 samples' tokens beside it."""
import multiprocessing as mp

import torch
import zmq

import flowmap

STEPS = 3
N = 8
EXPECT = None



def trainer(port):
    with flowmap.owner("trainer"):
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        pull.connect(f"tcp://127.0.0.1:{port}")
        while (m := pull.recv_pyobj()) is not None:
            flowmap.step(m["step"])
        pull.close()
        ctx.term()


def main():
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=trainer, args=(port,))
    p.start()
    with flowmap.owner("rollout"):
        for s in range(STEPS):
            flowmap.step(s)
            image = torch.randn(3, 112, 112)
            push.send_pyobj({"step": s, "pixel_values": image,
                             "tokens": [torch.randint(0, 32000, (256,)) for _ in range(N)],
                             "rewards": [float(i % 2) for i in range(N)]})
        push.send_pyobj(None)
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
