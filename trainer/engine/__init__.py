"""A vLLM-style rollout engine in plain PyTorch (nano-vllm's shape, one concept per file).

sequence.py       one sequence's state and the RequestOutput handed back
block_manager.py  paged KV accounting: block tables, free list, prefix cache
scheduler.py      continuous batching: waiting/running queues, preemption by recompute
sampling.py       temperature, top-p, per-token log-probs
model_runner.py   sequences -> tensors -> one paged forward pass per step
replay_cache.py   per-slot record of MoE/DSA selections -> each sequence's replay rows
llm_engine.py     step() and the RL controls (pause, release, update, resume, continue)
"""

from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.llm_engine import LLMEngine, continuation
from flowmap.trainer.engine.model_runner import KVCacheReleasedError
from flowmap.trainer.engine.sampling import SamplingParams
from flowmap.trainer.engine.sequence import RequestOutput

__all__ = [
    "EngineConfig",
    "KVCacheReleasedError",
    "LLMEngine",
    "RequestOutput",
    "SamplingParams",
    "continuation",
]
