"""Mutation check of the trainer's loss path: each mutant must make a fast test fail.

Run: python scripts/mutants.py [-k NAME]   (exit 1 if any mutant survives)

Each mutant is one textual edit of a trainer module (the bugs an audit found
the suite blind to, and their neighbours). The script applies it, runs the
fast trainer tests that defend that code, restores the file whatever
happens, and prints one row per mutant: killed (a test failed) or SURVIVED.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST_TESTS = [
    "tests/trainer/test_loss.py",
    "tests/trainer/test_reward_advantage.py",
    "tests/trainer/test_tree_and_env.py",
]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str


MUTANTS = [
    Mutant("response slice shifted to [:, -R:]", "trainer/train/loss.py",
           "logits = logits[:, -R - 1 : -1] / temperature", "logits = logits[:, -R:] / temperature"),
    Mutant("clipping dropped", "trainer/train/loss.py",
           "per_token = torch.maximum(unclipped, clipped)", "per_token = unclipped"),
    Mutant("advantage sign flipped", "trainer/train/loss.py",
           "advantages = mb.advantages.to(dtype)", "advantages = -mb.advantages.to(dtype)"),
    Mutant("ratio inverted", "trainer/train/loss.py",
           "ratio = torch.exp(log_p - behaviour.to(dtype))",
           "ratio = torch.exp(behaviour.to(dtype) - log_p)"),
    Mutant("temperature ignored", "trainer/train/loss.py",
           "logits = logits[:, -R - 1 : -1] / temperature", "logits = logits[:, -R - 1 : -1]"),
    Mutant("old log-probs ignored", "trainer/train/loss.py",
           "behaviour = mb.rollout_log_probs if old_log_probs is None else old_log_probs",
           "behaviour = mb.rollout_log_probs"),
    Mutant("k3 KL sign flipped", "trainer/train/loss.py",
           "kl = ref_log_p - log_p", "kl = log_p - ref_log_p"),
    Mutant("reward at the last column, not the last valid token", "trainer/reward.py",
           "rewards[rows, valid_response_length - 1] = scores.float()",
           "rewards[rows, -1] = scores.float()"),
    Mutant("reward at the first token", "trainer/reward.py",
           "rewards[rows, valid_response_length - 1] = scores.float()",
           "rewards[rows, 0] = scores.float()"),
    Mutant("advantages normalised over the batch, not within the uid", "trainer/advantage.py",
           "rows[u].append(i)", 'rows["batch"].append(i)'),
    Mutant("advantages not normalised by the std", "trainer/advantage.py",
           "normalised[idx] = (group - mean) / (std + eps)", "normalised[idx] = group - mean"),
    Mutant("shared-prefix node not masked in later leaves", "trainer/tree.py",
           "trained = node.generated and node.node_id not in claimed",
           "trained = node.generated"),
]


def run_mutant(m: Mutant) -> tuple[bool, float, str]:
    """(killed, seconds, first failing test) for one mutant; the file is always restored."""
    path = ROOT / m.path
    original = path.read_text()
    if original.count(m.old) != 1:
        raise SystemExit(f"mutants: {m.path} no longer holds {m.old!r} exactly once; update the script")
    t0 = time.monotonic()
    try:
        path.write_text(original.replace(m.old, m.new))
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *FAST_TESTS],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )
    finally:
        path.write_text(original)
    failed = next((line.split(" ", 2)[1] for line in proc.stdout.splitlines()
                   if line.startswith("FAILED ")), "")
    return proc.returncode == 1, time.monotonic() - t0, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only mutants whose name contains this")
    ns = parser.parse_args()
    survivors = 0
    print(f"{'mutant':58} {'result':9} {'s':>5}  first failing test")
    for m in MUTANTS:
        if ns.k not in m.name:
            continue
        killed, seconds, failed = run_mutant(m)
        survivors += not killed
        print(f"{m.name:58} {'killed' if killed else 'SURVIVED':9} {seconds:5.1f}  {failed}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
