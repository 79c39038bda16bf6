"""`flowmap trace --preset trl`: a real TRL GRPOTrainer run on CPU, seen through the preset.

The model is a tiny randomly initialised Qwen2 built from a config, the
tokenizer is trained here on a toy corpus, the dataset is in memory: nothing
is downloaded. Two optimizer steps take a few seconds; importing TRL takes
most of the time.
"""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

import flowmap

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("trl", "transformers", "datasets")),
    reason="TRL preset test needs trl, transformers and datasets: pip install -e '.[integrations]'",
)

TINY_GRPO = '''
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

torch.manual_seed(0)
words = "add one two three four five six seven eight nine ten plus minus equals".split()
corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8)) for i in range(64)]
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["<pad>", "<eos>", "<unk>"]))
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                    unk_token="<unk>")
config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
                     eos_token_id=tokenizer.eos_token_id)
model = Qwen2ForCausalLM(config)
dataset = Dataset.from_dict({"prompt": [" ".join(words[i:i + 3]) for i in range(8)]})


def reward_len(completions, **kwargs):
    return [float(len(c.split())) for c in completions]


args = GRPOConfig(
    output_dir=sys.argv[1], per_device_train_batch_size=4, num_generations=2,
    max_completion_length=8, max_steps=2, logging_steps=1, report_to="none", bf16=False,
    use_cpu=True, save_strategy="no", gradient_checkpointing=False, learning_rate=1e-3,
    seed=0, disable_tqdm=True,
)
GRPOTrainer(model=model, reward_funcs=reward_len, args=args, train_dataset=dataset,
            processing_class=tokenizer).train()
'''


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    from flowmap_cli import run_cli

    tmp = tmp_path_factory.mktemp("trl")
    (tmp / "tiny_grpo.py").write_text(textwrap.dedent(TINY_GRPO))
    r = run_cli(["trace", "-o", str(tmp / "run"), "--preset", "trl", "tiny_grpo.py",
                 str(tmp / "out")], cwd=tmp, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, flowmap.load(str(tmp / "run"))


def leaves(run, key):
    return {leaf.path: leaf for leaf in run.seams[key].leaves}


def test_every_preset_target_exists_in_this_trl(trl_run):
    r, run = trl_run
    assert "never appeared" not in r.stderr
    assert run.health.tracer_errors == 0
    assert run.steps == [0, 1]


def test_generation_and_scoring_carry_the_rollout_tensors(trl_run):
    _, run = trl_run
    scored = leaves(run, ("rollout", "ready_buffer", "scored_batch"))
    assert run.seams[("ready_buffer", "rollout", "prompts")].hops == 2
    for path in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"):
        assert scored[f"result.{path}"].kind == "tensor", path
    # per_device_train_batch_size 4, max_completion_length 8; leaves named as `dims` keys them
    assert scored["result.completion_ids"].shape[0] == 4
    assert scored["result.completion_ids"].dims == ("samples", "completion_tokens")
    assert scored["result.completion_ids"].dtypes == ("int64",)
    assert ("rollout", "engine", "prompt_ids") in run.seams


def test_reward_and_advantage_seams(trl_run):
    _, run = trl_run
    assert ("rollout", "reward", "completions") in run.seams
    rewards = leaves(run, ("reward", "rollout", "rewards"))["result"]
    assert (rewards.kind, rewards.shape, rewards.dtypes) == ("tensor", (4, 1), ("float32",))
    assert rewards.dims == ("samples", "reward_funcs")
    adv = leaves(run, ("advantage", "ready_buffer", "advantages"))["advantages"]  # named by its field
    assert (adv.kind, adv.shape) == ("tensor", (4,))


def test_loss_seams_carry_the_micro_batch(trl_run):
    _, run = trl_run
    batch = leaves(run, ("trainer", "loss", "micro_batch"))
    assert batch["inputs.completion_ids"].kind == "tensor"
    assert batch["inputs.advantages"].dims == ("batch",)
    loss = leaves(run, ("loss", "trainer", "loss"))["result"]
    assert (loss.kind, loss.shape) == ("tensor", ())
    assert run.seams[("loss", "policy", "sequences")].hops == 2
    assert run.seams[("dataset", "trainer", "prompts")].hops == 2
