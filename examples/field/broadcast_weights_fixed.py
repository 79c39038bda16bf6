"""Control: a broadcast every rank uses whole (the policy's weights), then a part of its own data.

The legitimate broadcast: after each update, rank 0 flattens the policy's
weights into one buffer and `dist.broadcast`s it; every rank loads all of it,
generates for its own prompts (made on that rank) and gathers its rollouts
back to rank 0. Each rank needs the whole buffer, so nothing is duplicated.
Two processes, a gloo group over loopback, annotated with `flowmap.owner` and
`flowmap.step` only. No `duplicate` is due.

    flowmap trace examples/field/broadcast_weights_fixed.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, VOCAB, HIDDEN, PROMPTS, TOKENS, STEPS = 2, 4096, 64, 8, 64, 3
EXPECT = None


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"policy/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    embed, head = torch.randn(VOCAB, HIDDEN), torch.randn(HIDDEN, VOCAB)
    flat = torch.empty(embed.numel() + head.numel())
    for step in range(STEPS):
        flowmap.step(step)
        if rank == 0:  # the trainer's update, flattened into one buffer
            embed += 0.01 * torch.randn_like(embed)
            flat = torch.cat([embed.flatten(), head.flatten()])
        dist.broadcast(flat, src=0)  # every rank needs all of it
        embed = flat[:embed.numel()].view(VOCAB, HIDDEN)
        head = flat[embed.numel():].view(HIDDEN, VOCAB)
        tokens = torch.randint(0, VOCAB, (PROMPTS, TOKENS))  # this rank's own prompts
        rollouts = (embed[tokens] @ head).argmax(-1)
        gathered = [torch.empty_like(rollouts) for _ in range(WORLD)] if rank == 0 else None
        dist.gather(rollouts, gathered, dst=0)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
