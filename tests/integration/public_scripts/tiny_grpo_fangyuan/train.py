# Adapted for flowmap's tests from fangyuan-ksgk/Tiny-GRPO train.py (MIT, see LICENSE and
# SOURCE.md): the model is a tiny randomly initialised Qwen2 built from a config, the tokenizer
# is trained here, the data are generated arithmetic problems, and the evaluation, torch.compile
# and checkpoint saving are left out. The training call is the original's.
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from grpo import setup_training_environment, train_with_grpo

env = setup_training_environment("cpu", dtype="float32")


def build_tokenizer():
    words = [str(i) for i in range(20)] + ["+", "=", "<answer>", "</answer>", "what", "is"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([" ".join(words)] * 4,
                            trainers.WordLevelTrainer(special_tokens=["<pad>", "<eos>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")


def prepare_dataset(n=16, seed=0):
    rng = random.Random(seed)
    data = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        data.append({"prompt": f"what is {a} + {b} =", "answer": str(a + b)})
    return data


def reward_fn(completions, answers):
    return [1.0 if c[0]["content"].strip().startswith(a) else 0.0
            for c, a in zip(completions, answers)]


def main(args):
    torch.manual_seed(0)
    random.seed(0)
    tokenizer = build_tokenizer()
    tokenizer.padding_side = "left"
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    train_data = prepare_dataset()
    model = train_with_grpo(
        model=model,
        tokenizer=tokenizer,
        train_data=train_data,
        reward_function=reward_fn,
        num_iterations=args.num_iterations,
        num_steps=args.num_steps,
        batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        beta=args.beta,
        learning_rate=args.learning_rate,
        mu=args.mu,
        epsilon=args.epsilon,
        env=env,
    )
    print("Training completed.")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Train with GRPO on generated arithmetic")
    parser.add_argument("--num_iterations", type=int, default=1)
    parser.add_argument("--num_steps", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--num_generations", type=int, default=2)
    parser.add_argument("--max_completion_length", type=int, default=6)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--mu", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=0.1)
    args = parser.parse_args()
    main(args)
