"""Build what the upstream script would download, small and random, in the working directory.

- `tiny-qwen/`: a randomly initialised Qwen2 and a word-level tokenizer trained here, with a
  chat template, loadable with `from_pretrained("tiny-qwen")`;
- `grpo_config.yml`: the upstream config with tiny sizes, the local model and LoRA off;
- `datasets/gsm8k_data/{train,test}.jsonl`: generated sums in the GSM8K format.
Written for flowmap's tests (not part of the upstream repository).
"""

import json
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = random.Random(0)
torch.manual_seed(0)

words = ("<think> </think> <answer> </answer> what is plus the sum of system user assistant : "
         + " ".join(str(i) for i in range(40))).split()
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.train_from_iterator([" ".join(words)] * 4,
                        trainers.WordLevelTrainer(special_tokens=["<pad>", "<eos>", "<unk>"]))
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                    unk_token="<unk>")
tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                           "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}")
config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
                     eos_token_id=tokenizer.eos_token_id)
model_dir = os.path.join(out, "tiny-qwen")
Qwen2ForCausalLM(config).save_pretrained(model_dir)
tokenizer.save_pretrained(model_dir)

data_dir = os.path.join(here, "datasets", "gsm8k_data")
os.makedirs(data_dir, exist_ok=True)
for split, n in (("train", 4), ("test", 2)):
    with open(os.path.join(data_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
        for _ in range(n):
            a, b = rng.randint(0, 19), rng.randint(0, 19)
            f.write(json.dumps({"question": f"what is {a} plus {b}",
                                "answer": f"the sum of {a} plus {b} #### {a + b}"}) + "\n")

with open(os.path.join(out, "grpo_config.yml"), "w", encoding="utf-8") as f:
    f.write(f"""model_identifier: "{model_dir}"
cache_dir: null
batch_size: 1
group_size: 2
rollouts_per_step: 2
updates_per_step: 1
kl_weight: 0.05
learning_rate: 1e-3
max_completion_len: 140
checkpoint_dir: "{os.path.join(out, 'grpo_checkpoints')}"
log_dir: "{os.path.join(out, 'grpo_logs')}"
use_lora: false
""")
