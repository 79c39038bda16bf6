"""Control: one batch in shared memory, read whole by three reward functions.
The policy moves each step's token ids into shared memory once (`share_memory_()`) and
hands them to three reward workers (correctness, format, length) through
`torch.multiprocessing` queues; each reads every row, and each maps the one copy. The
fix for `duplicate` is already applied: no `duplicate` finding.

    flowmap trace examples/field/shared_readonly_rewards_fixed.py && flowmap report
"""
import torch
import torch.multiprocessing as tmp

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, B, T, V = 5, 64, 256, 32000
REWARDS = ["format", "correct", "length"]


def reward_worker(name, in_q, out_q):
    with flowmap.owner(f"reward_{name}"):
        while True:
            msg = in_q.get()
            if msg is None:
                break
            step, tokens = msg
            flowmap.step(step)
            if name == "format":
                s = (tokens[:, :8] % 7 == 0).float().mean(1)
            elif name == "correct":
                s = (tokens[:, -16:].sum(1) % 2).float()
            else:
                s = -(tokens != 0).float().sum(1) / T
            out_q.put((name, step, s))


def main():
    tmp.set_sharing_strategy("file_descriptor")
    in_qs = {n: tmp.Queue() for n in REWARDS}
    out_q = tmp.Queue()
    ps = [tmp.Process(target=reward_worker, args=(n, in_qs[n], out_q), name=f"reward_{n}") for n in REWARDS]
    for p in ps:
        p.start()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(9)
    logits = torch.nn.Parameter(torch.zeros(B))
    opt = torch.optim.SGD([logits], lr=0.1)
    with flowmap.owner("policy"):
        for step in range(STEPS):
            flowmap.step(step)
            tokens = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
            tokens.share_memory_()                      # one copy into shm; workers map it
            for n in REWARDS:
                in_qs[n].put((step, tokens))
            scores = {}
            for _ in REWARDS:
                n, s_step, s = out_q.get()
                scores[n] = s
            r = sum(scores.values())
            loss = -((r - r.mean()) * torch.log_softmax(logits, 0)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        for n in REWARDS:
            in_qs[n].put(None)
    for p in ps:
        p.join()
    print("ok")


if __name__ == "__main__":
    main()
