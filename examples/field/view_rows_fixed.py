"""Control for view_rows_list.py: the rows cloned before sending."""
import torch
import torch.multiprocessing as mp

import flowmap

STEPS = 3
EXPECT = None



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
            a.send([{"step": s, "row": logits[i:i + 1].clone()} for i in (3, 700)])
        a.send(None)
    p.join()


if __name__ == "__main__":
    main()
