"""GRPO on verl's single controller, on CPU, in well under a minute (verl 0.9.1).

    python examples/verl_grpo.py                 # split: one worker group per role
    python examples/verl_grpo.py --colocated     # one group, roles fused per process
    flowmap trace examples/verl_grpo.py          # the same run, every dispatch recorded

A real, if tiny, pipeline built only from verl's own pieces: `RayResourcePool`
(`use_gpu=False`), `RayWorkerGroup`, workers whose methods carry `@register`
dispatch modes, `DataProto` batches, `create_colocated_worker_cls` + `spawn`
(what `RayPPOTrainer` does) in colocated mode, `core_algos`' GRPO advantage,
and an actor update whose gradients are averaged with a gloo all-reduce
inside the workers (verl sets WORLD_SIZE/RANK/MASTER_ADDR/MASTER_PORT).

The task: a prompt `a+b=` is answered well when the response's first token
is the last digit of a+b, scored by verl's own GSM8K rule
(`verl.utils.reward_score.gsm8k`, flexible extraction). The policy is a random-weight GRU over a character
vocabulary: nothing is downloaded. The script never imports flowmap.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid

import numpy as np
import ray
import torch
import torch.distributed as dist
from verl import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl.single_controller.ray.base import create_colocated_worker_cls
from verl.trainer.ppo import core_algos
from verl.utils.reward_score import gsm8k

VOCAB = list("0123456789+=") + ["<pad>", "<eos>"]
PAD, EOS = VOCAB.index("<pad>"), VOCAB.index("<eos>")
PROMPT_LEN, RESPONSE_LEN = 4, 6


def encode(text: str) -> list[int]:
    return [VOCAB.index(c) for c in text]


def decode(ids: torch.Tensor) -> str:
    return "".join(VOCAB[i] for i in ids.tolist() if i < PAD)


class TinyPolicy(torch.nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(len(VOCAB), dim)
        self.rnn = torch.nn.GRU(dim, dim, batch_first=True)
        self.head = torch.nn.Linear(dim, len(VOCAB))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.emb(ids))
        return self.head(hidden)


def response_log_probs(model: TinyPolicy, input_ids: torch.Tensor, responses: torch.Tensor
                       ) -> torch.Tensor:
    """Log-probs of the response tokens: logits sliced `[:, -R-1:-1]`, as verl does."""
    logits = model(input_ids)[:, -RESPONSE_LEN - 1:-1]
    return torch.log_softmax(logits, -1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)


class ActorRolloutWorker(Worker):
    """Generates responses and trains on them: rollout and actor in one role, as verl's hybrid engine."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.lr = lr
        self.model: TinyPolicy | None = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self, seed: int) -> None:
        torch.manual_seed(seed)  # same weights on every rank; the all-reduce keeps them equal
        self.model = TinyPolicy()
        self.optim = torch.optim.SGD(self.model.parameters(), lr=self.lr)
        if not dist.is_initialized():
            dist.init_process_group("gloo", rank=self.rank, world_size=self.world_size)

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        assert self.model is not None
        ids = prompts.batch["prompts"]
        temperature = float(prompts.meta_info.get("temperature", 1.0))
        gen = torch.Generator().manual_seed(1000 * self.rank + prompts.meta_info["global_steps"])
        out = ids
        with torch.no_grad():
            for _ in range(RESPONSE_LEN):
                logits = self.model(out)[:, -1] / temperature
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
                out = torch.cat([out, nxt], dim=1)
        responses = out[:, PROMPT_LEN:]
        ended = (responses == EOS).cumsum(-1)
        response_mask = ((ended == 0) | ((ended == 1) & (responses == EOS))).long()
        attention_mask = torch.cat([torch.ones_like(ids), response_mask], dim=1)
        with torch.no_grad():
            old = response_log_probs(self.model, out, responses)
        return DataProto.from_dict(tensors={
            "responses": responses, "response_mask": response_mask, "input_ids": out,
            "attention_mask": attention_mask,
            "position_ids": torch.arange(out.shape[1]).expand(out.shape[0], -1).clone(),
            "old_log_probs": old,
        })

    @register(dispatch_mode=Dispatch.DP_COMPUTE_METRIC)
    def update_actor(self, data: DataProto) -> dict[str, float]:
        assert self.model is not None
        b = data.batch
        logp = response_log_probs(self.model, b["input_ids"], b["responses"])
        ratio = torch.exp(logp - b["old_log_probs"])
        pg = -(ratio * b["advantages"]) * b["response_mask"]
        loss = core_algos.agg_loss(pg, b["response_mask"], loss_agg_mode="token-mean")
        self.optim.zero_grad()
        loss.backward()
        for p in self.model.parameters():  # data parallel: average the gradients over ranks
            assert p.grad is not None
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= self.world_size
        self.optim.step()
        return {"loss": float(loss.detach())}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    def evaluate(self, data: DataProto) -> float:
        """Greedy accuracy on the held-out prompts; every rank scores the whole set.

        Non-blocking: the group returns one object ref per rank at once."""
        assert self.model is not None
        with torch.no_grad():
            first = self.model(data.batch["prompts"])[:, -1].argmax(-1)
        return float((first == data.batch["answers"]).float().mean())


class RewardWorker(Worker):
    """Rule-based reward at the last valid response token, as verl's reward managers place it."""

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def compute_reward(self, data: DataProto) -> DataProto:
        responses, mask = data.batch["responses"], data.batch["response_mask"]
        scores = torch.tensor([
            float(gsm8k.compute_score(decode(r[:1]), answer, method="flexible"))
            for r, answer in zip(responses, data.non_tensor_batch["answer"])])
        token_level = torch.zeros(responses.shape, dtype=torch.float32)
        last = mask.sum(-1).clamp(min=1) - 1
        token_level[torch.arange(len(scores)), last] = scores
        return DataProto.from_dict(tensors={"token_level_scores": token_level})


def make_prompts(rng: np.random.Generator, n: int) -> tuple[DataProto, np.ndarray]:
    a, b = rng.integers(0, 10, n), rng.integers(0, 10, n)
    questions = [f"{x}+{y}=" for x, y in zip(a, b)]
    answers = np.array([str((x + y) % 10) for x, y in zip(a, b)], dtype=object)
    prompts = torch.tensor([encode(q) for q in questions])
    batch = DataProto.from_dict(
        tensors={"prompts": prompts},
        non_tensors={"answer": answers, "question": np.array(questions, dtype=object),
                     "uid": np.array([str(uuid.uuid4()) for _ in questions], dtype=object)},
    )
    return batch, (a + b) % 10


def build_groups(colocated: bool) -> tuple[RayWorkerGroup, RayWorkerGroup]:
    actor_cls = RayClassWithInitArgs(cls=ray.remote(ActorRolloutWorker), lr=0.05)
    reward_cls = RayClassWithInitArgs(cls=ray.remote(RewardWorker))
    if colocated:  # what RayPPOTrainer does: one process per rank hosts every role
        pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1)
        class_dict = {"actor_rollout": actor_cls, "reward": reward_cls}
        fused = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=create_colocated_worker_cls(class_dict),
                               device_name="cpu")
        groups = fused.spawn(prefix_set=class_dict.keys())
        return groups["actor_rollout"], groups["reward"]
    actor_pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1)
    reward_pool = RayResourcePool([1], use_gpu=False, max_colocate_count=1)
    return (RayWorkerGroup(resource_pool=actor_pool, ray_cls_with_init=actor_cls, device_name="cpu"),
            RayWorkerGroup(resource_pool=reward_pool, ray_cls_with_init=reward_cls, device_name="cpu"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--colocated", action="store_true", help="fuse the roles into one group")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("-n", type=int, default=4, help="responses per prompt (the GRPO group)")
    args = p.parse_args(argv)
    # Ray's socket paths must stay short; a private temp dir keeps runs apart.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1", _temp_dir=os.environ.get("RAY_TMPDIR") or tempfile.mkdtemp(
                 prefix="verl", dir="/tmp"))
    try:
        actor_rollout, reward = build_groups(args.colocated)
        actor_rollout.init_model(seed=0)
        rng = np.random.default_rng(0)
        for step in range(1, args.steps + 1):
            batch, _ = make_prompts(rng, args.prompts)
            batch = batch.repeat(repeat_times=args.n, interleave=True)
            batch.meta_info.update({"global_steps": step, "temperature": 1.0})
            batch = batch.union(actor_rollout.generate_sequences(batch))
            batch = batch.union(reward.compute_reward(batch))
            scores = batch.batch["token_level_scores"]
            advantages, returns = core_algos.compute_grpo_outcome_advantage(
                token_level_rewards=scores, response_mask=batch.batch["response_mask"],
                index=batch.non_tensor_batch["uid"])
            batch.batch["advantages"], batch.batch["returns"] = advantages, returns
            metrics = actor_rollout.update_actor(batch)
            print(f"step {step}: reward {float(scores.sum(-1).mean()):.3f} "
                  f"loss {np.mean([m['loss'] for m in metrics]):.4f}")
        held_out, answers = make_prompts(np.random.default_rng(1), 8)
        held_out.batch["answers"] = torch.as_tensor(answers)
        held_out.meta_info["global_steps"] = args.steps
        pending = actor_rollout.evaluate(held_out)
        print(f"held-out accuracy {np.mean(ray.get(pending)):.3f}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
