"""One prompt image shared by the 8 samples of a GRPO group, each sample sent as its own
ZMQ message (send_pyobj): every message pickles the image again (NeMo-RL #3818 shape).

Hand figure: pixel_values float32[3,112,112] = 150,528 B, carried by 8 messages a step
where 1 would do: 7 x 150,528 = 1,053,696 B/step extra.
Expected: duplicate on rollout -> trainer (PUSH), ~1.05 MB/step.
"""
import multiprocessing as mp

import torch
import zmq

import flowmap

STEPS = 3
N = 8
EXPECT = {"kind": "duplicate", "seam": "rollout -> trainer",
          "bytes_per_step": (N - 1) * 3 * 112 * 112 * 4}



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
            for i in range(N):
                push.send_pyobj({"step": s, "sample": i, "pixel_values": image,
                                 "tokens": torch.randint(0, 32000, (256,)),
                                 "reward": float(i % 2)})
        push.send_pyobj(None)
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
