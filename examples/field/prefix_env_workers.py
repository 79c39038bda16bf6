"""Environment workers, one conversation each, resend the whole conversation every turn.

The shape of OpenRLHF's and TRL's environment workers: each worker process runs one
environment, so one conversation at a time, and talks to a shared generation engine
through one `multiprocessing` queue; the engine answers on the worker's own queue. Each
turn the worker puts the conversation's token ids so far, the engine's last answer and
the environment's observation appended: 512, 1,024, ... 3,072 tokens over six turns. Each
worker is alone on its seam, so the conversation is not told from others interleaved; it
is told from the turns: each message comes after the engine's answer and holds it.
Written by an independent tester, annotated only with owners and steps. The fix: send the
new tokens only, and keep the conversation at the engine (`prefix_delta_fixed.py`).

    flowmap trace examples/field/prefix_env_workers.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

STEPS, WORKERS, TURNS, PROMPT, GROW, ANSWER = 4, 2, 6, 512, 512, 384
# each turn after the first resends the one before: 512 + 1,024 + ... + 2,560 int64 ids, a worker
EXPECT = {"kind": "prefix_resend", "seam": "env_worker -> engine",
          "bytes_per_step": WORKERS * sum(PROMPT + GROW * t for t in range(TURNS - 1)) * 8}


def env_worker(w: int, requests: mp.Queue, answers: mp.Queue, go: mp.Queue) -> None:
    flowmap.set_owner(f"env_worker/{w}")
    g = torch.Generator().manual_seed(10 + w)
    for step in range(STEPS):
        go.get()
        flowmap.step(step)
        conversation = torch.randint(1, 32000, (PROMPT,), generator=g)
        for _ in range(TURNS):
            requests.put({"worker": w, "input_ids": conversation})
            answer = answers.get()
            observation = torch.randint(1, 32000, (GROW - answer.numel(),), generator=g)
            conversation = torch.cat([conversation, answer, observation])
        requests.put({"worker": w, "done": True})


def main() -> None:
    ctx = mp.get_context("spawn")
    requests = ctx.Queue()
    answers = [ctx.Queue() for _ in range(WORKERS)]
    go = [ctx.Queue() for _ in range(WORKERS)]
    procs = [ctx.Process(target=env_worker, args=(w, requests, answers[w], go[w]))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    flowmap.set_owner("engine")
    for step in range(STEPS):
        flowmap.step(step)
        for q in go:
            q.put(step)
        done = 0
        while done < WORKERS:
            request = requests.get()
            if request.get("done"):
                done += 1
                continue
            answers[request["worker"]].put(torch.randint(1, 32000, (ANSWER,)))
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
