"""Control for `padding`: a packed batch (`[1, N]`, `cu_seqlens`) with a loss mask over prompts.

The fix applied, as verl and slime pack: the samples concatenated into one row,
`cu_seqlens` marking where each starts, and a `loss_mask` that is 0 on each
sample's prompt tokens and 1 on its response. Those zeros are not padding.
Through a `multiprocessing` queue (torch: shared memory).

    flowmap trace examples/field/padding_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

PROMPTS = (60, 120, 45, 200)
RESPONSES = (300, 80, 410, 150)
STEPS = 3
EXPECT = None


def rollout(q: mp.Queue, ack: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        lengths = [p + r for p, r in zip(PROMPTS, RESPONSES)]
        n = sum(lengths)
        mask = torch.cat([torch.cat([torch.zeros(p), torch.ones(r)])
                          for p, r in zip(PROMPTS, RESPONSES)]).to(torch.int64)[None]
        q.put({"input_ids": torch.randint(0, 151_000, (1, n)),
               "position_ids": torch.cat([torch.arange(k) for k in lengths])[None],
               "loss_mask": mask,
               "cu_seqlens": torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()],
                                          dtype=torch.int32)})
        ack.get()  # acknowledged: torch passes the tensors' fds while this process lives


def main() -> None:
    ctx = mp.get_context("fork")
    q, ack = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=rollout, args=(q, ack))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
        ack.put(True)
    p.join()


if __name__ == "__main__":
    main()
