"""Issue 41's Ray pipeline, as a job for `bench_against.py --job`: rollout actors and a trainer.

Per step one ObjectRef handed from a rollout to the trainer, and one batch (over Ray's
inline limit) the driver fetches with `ray.get` and passes on: the same job as
tests/integration/test_ray_pipeline_bytes.py. Ray's own start-up is most of a short run,
so the steps default to 100 to weigh the pipeline.

Run: python bench/ray_pipeline_job.py [--steps 100]
"""

from __future__ import annotations

import argparse
import tempfile

import ray
import torch

COLS, MASK, SMALL, LARGE = 384, (8, 128), 8, 256


@ray.remote(num_cpus=0)
class Rollout:
    def generate(self, step: int, rows: int) -> dict[str, torch.Tensor]:
        return {"obs": torch.full((rows, COLS), float(step)),
                "mask": torch.ones(MASK, dtype=torch.bool)}


@ray.remote(num_cpus=0)
class Trainer:
    def train(self, batch: dict[str, torch.Tensor]) -> float:
        return float(batch["obs"].sum())

    def learn(self, batch: dict[str, torch.Tensor]) -> float:
        return float(batch["obs"].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    steps = ap.parse_args().steps
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, _temp_dir=tempfile.mkdtemp(prefix="fmray", dir="/tmp"))
    a, b = Rollout.remote(), Rollout.remote()
    trainer = Trainer.remote()
    for step in range(steps):
        out = [trainer.train.remote(a.generate.remote(step, SMALL)),
               trainer.learn.remote(ray.get(b.generate.remote(step, LARGE)))]
        ray.get(out)
    ray.shutdown()


if __name__ == "__main__":
    main()
