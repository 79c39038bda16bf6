"""Control: a batch's chunks, one to each rank, through `torch.multiprocessing` queues.
The dispatcher puts `tokens.chunk(2)[r]` on rank r's queue: torch moves the batch's
storage into shared memory once and each rank maps it, so the bytes moved are the
batch once, as a `.clone()` of each chunk would move. No `view` finding (a view of a
storage whose views, sent that step, hold it is data that was sent).

    flowmap trace examples/field/view_chunks_shm_fixed.py && flowmap report
"""
import torch
import torch.multiprocessing as tmp

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, WORLD, B, T, V = 5, 2, 64, 512, 32000


def rank_worker(r, q, back):
    with flowmap.owner(f"trainer/rank{r}"):
        torch.manual_seed(0)
        emb = torch.nn.EmbeddingBag(V, 8, mode="mean")
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        while True:
            m = q.get()
            if m is None:
                break
            flowmap.step(m["step"])
            loss = -(m["advantages"] * emb(m["tokens"].long()).sum(1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            back.put((r, loss.item()))


def main():
    qs = [tmp.Queue() for _ in range(WORLD)]
    back = tmp.Queue()
    ps = [tmp.Process(target=rank_worker, args=(r, qs[r], back), name=f"rank{r}") for r in range(WORLD)]
    for p in ps:
        p.start()
    g = torch.Generator().manual_seed(0)
    with flowmap.owner("dispatcher"):
        for step in range(STEPS):
            flowmap.step(step)
            tokens = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
            adv = torch.randn(B, generator=g)
            for r, (tk, ad) in enumerate(zip(tokens.chunk(WORLD), adv.chunk(WORLD))):
                qs[r].put({"step": step, "tokens": tk, "advantages": ad})
            for _ in range(WORLD):
                back.get()
        for q in qs:
            q.put(None)
    for p in ps:
        p.join()
    print("ok")


if __name__ == "__main__":
    main()
