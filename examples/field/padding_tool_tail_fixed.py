"""Control: multi-turn samples that fill their budget, some ending on a tool's output.
verl's layout (`prompts`, `responses`, `input_ids`, `attention_mask`, `response_mask`),
every response exactly 256 tokens: `response_mask` is 0 on tool-output tokens, and a
quarter of the samples end on one, so their response mask ends in zeros over real
tokens that `attention_mask` (all ones) marks real. Nothing is padding: no `padding`.

    flowmap trace examples/field/padding_tool_tail_fixed.py && flowmap report
"""
import multiprocessing as mp

import torch

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, B, P, R, V = 5, 32, 64, 256, 32000


def make_response_mask(g):
    m = torch.ones(B, R, dtype=torch.bool)
    for i in range(B):
        pos = int(torch.randint(30, 60, (1,), generator=g))
        while pos < R:
            tool = int(torch.randint(20, 40, (1,), generator=g))
            m[i, pos:pos + tool] = False                 # tool output: real tokens, not trained on
            pos += tool + int(torch.randint(30, 70, (1,), generator=g))
        if i % 4 == 0:
            m[i, R - 32:] = False                        # ended on a tool output at max turns
    return m


def rollout(conn):
    with flowmap.owner("rollout"):
        g = torch.Generator().manual_seed(0)
        for step in range(STEPS):
            flowmap.step(step)
            conn.send({"step": step,
                       "prompts": torch.randint(0, V, (B, P), generator=g, dtype=torch.int32),
                       "responses": torch.randint(0, V, (B, R), generator=g, dtype=torch.int32),
                       "input_ids": torch.randint(0, V, (B, P + R), generator=g, dtype=torch.int32),
                       "attention_mask": torch.ones(B, P + R, dtype=torch.bool),
                       "position_ids": torch.arange(P + R, dtype=torch.int32).expand(B, -1).contiguous(),
                       "response_mask": make_response_mask(g),
                       "rollout_log_probs": -torch.rand(B, R, generator=g)})
            assert conn.recv() == step
        conn.send(None)


def main():
    a, b = mp.Pipe()
    p = mp.Process(target=rollout, args=(b,), name="rollout")
    p.start()
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=0.1)
    with flowmap.owner("actor"):
        while True:
            batch = a.recv()
            if batch is None:
                break
            flowmap.step(batch["step"])
            m = batch["response_mask"].float()
            loss = ((w + batch["rollout_log_probs"]) * m).sum() / m.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            a.send(batch["step"])
    p.join()
    print("ok")


if __name__ == "__main__":
    main()
