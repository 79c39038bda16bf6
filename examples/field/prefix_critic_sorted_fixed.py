"""Control: length-sorted micro-batches to a critic that answers each with its values.
The actor sorts a step's samples by length (long-tailed reasoning lengths) and sends 4
packed micro-batches of 8 samples ([1, N] int32 `input_ids`, float32 `old_logprobs`,
`cu_seqlens`), shortest first, each more than twice the last; the critic answers each
with per-token values ([1, N] float32) for that micro-batch only. Nothing is resent:
no `prefix_resend` (an answer as long as the message is its output, not a turn).

    flowmap trace examples/field/prefix_critic_sorted_fixed.py && flowmap report
"""
import multiprocessing as mp

import numpy as np
import torch

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, N, MB, V = 5, 32, 8, 32000


def critic(conn):
    with flowmap.owner("critic"):
        torch.manual_seed(1)
        emb = torch.nn.Embedding(V, 8)
        head = torch.nn.Linear(8, 1)
        while True:
            mb = conn.recv()
            if mb is None:
                break
            flowmap.step(mb["step"])
            with torch.no_grad():
                v = head(emb(mb["input_ids"].long())).squeeze(-1)
            conn.send(v)


def main():
    a, b = mp.Pipe()
    p = mp.Process(target=critic, args=(b,), name="critic")
    p.start()
    rng = np.random.default_rng(2)
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=0.1)
    with flowmap.owner("actor"):
        for step in range(STEPS):
            flowmap.step(step)
            lens = np.sort(np.exp(rng.uniform(np.log(24), np.log(3000), N)).astype(np.int64))
            losses = []
            for k in range(N // MB):
                ls = lens[k * MB:(k + 1) * MB]
                n = int(ls.sum())
                a.send({"step": step,
                        "input_ids": torch.randint(0, V, (1, n), dtype=torch.int32),
                        "old_logprobs": -torch.rand(1, n),
                        "cu_seqlens": torch.from_numpy(np.concatenate([[0], np.cumsum(ls)]).astype(np.int32))})
                v = a.recv()
                losses.append((w - v.mean()).pow(2))
            loss = torch.stack(losses).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        a.send(None)
    p.join()
    print("ok")


if __name__ == "__main__":
    main()
