"""SFT-style batch over PUSH/PULL with torch: input_ids, labels (-100 on prompt and pad),
attention (int64, unnamed `attn`), right-padded to 512. By hand: lengths 120 + 20 i
(i = 0..7) = 1,520 real of 4,096; 3 x 8 x 512 x 8 B = 98,304 B a message, 1 a step:
98,304 x 2,576 / 4,096 = 61,824 B/step.
An integer or float mask nobody named is read only under `flowmap trace --values`.
"""
import multiprocessing as mp
import tempfile

import torch
import zmq

import flowmap

STEPS = 4
B, T = 8, 512
EXPECT = {"kind": "padding", "seam": "loader -> trainer", "bytes_per_step": 61824,
          "values": True}


def batch() -> dict:
    ids = torch.zeros((B, T), dtype=torch.int64)
    labels = torch.full((B, T), -100)
    attn = torch.zeros((B, T), dtype=torch.int64)
    for i in range(B):
        n = 120 + 20 * i
        ids[i, :n] = torch.randint(5, 32000, (n,))
        labels[i, 40:n] = ids[i, 40:n]
        attn[i, :n] = 1
    return {"input_ids": ids, "labels": labels, "attn": attn}


def loader(addr: str) -> None:
    flowmap.set_owner("loader")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        s.send_pyobj(batch())
    s.close(linger=-1)


def main() -> None:
    flowmap.set_owner("trainer")
    addr = f"ipc://{tempfile.mkdtemp()}/loader"
    p = mp.get_context("fork").Process(target=loader, args=(addr,))
    p.start()
    s = zmq.Context().socket(zmq.PULL)
    s.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        s.recv_pyobj()
    p.join()


if __name__ == "__main__":
    main()
