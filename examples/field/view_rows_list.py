"""Two sampled rows of a fresh logits table sent to an evaluator process over a Pipe
(torch's reducers: shared memory), as a list of dicts; each row is a view of the table.

Through shared memory the table's whole storage is moved (once a step, both rows are views
of it). Hand figure: logits float32[2048,2048] = 16,777,216 B for 2 rows of 8,192 B:
16,777,216 - 16,384 = 16,760,832 B/step for nothing.
Expected: view on actor -> evaluator, ~16.8 MB/step.
"""
import torch
import torch.multiprocessing as mp

import flowmap

STEPS = 3
EXPECT = {"kind": "view", "seam": "actor -> evaluator",
          "bytes_per_step": 2048 * 2048 * 4 - 2 * 2048 * 4}



def evaluator(conn):
    with flowmap.owner("evaluator"):
        while (m := conn.recv()) is not None:
            flowmap.step(m[0]["step"])
            assert m[0]["row"].shape == (1, 2048)


def main():
    a, b = mp.Pipe()
    p = mp.get_context("spawn").Process(target=evaluator, args=(b,))
    p.start()
    with flowmap.owner("actor"):
        for s in range(STEPS):
            flowmap.step(s)
            logits = torch.randn(2048, 2048)
            a.send([{"step": s, "row": logits[i:i + 1]} for i in (3, 700)])
        a.send(None)
    p.join()


if __name__ == "__main__":
    main()
