"""Control for view_chunks_zmq.py: each chunk cloned before sending (1 MiB a message)."""
import multiprocessing as mp

import torch
import zmq

import flowmap

STEPS = 3
EXPECT = None



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
                mb = mb.clone()
                push.send_pyobj((s, mb))
        push.send_pyobj(None)
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
