"""Write the discovered seams as a seam map `flowmap trace --seams` reads, with guesses.

Owners are guessed from the function's and class's names (`score` ->
`reward`, `RolloutWorker.generate` -> `rollout`), dimension names from leaf
names and shapes (`input_ids` (B, T) -> `[batch, tokens]`). They are
suggestions to edit; the targets, arguments and result flags are what
discovery saw. The text is checked with flowmap's own loader before it is
written, so a written map always loads.
"""

from __future__ import annotations

import json
import re

from flowmap.discover.candidates import Candidate, Discovery
from flowmap.seams.loader import parse_seam_map
from flowmap.units import fmt_bytes

# First match wins; matched against `Class.method` in lower case.
_OWNER_WORDS = (
    (("reward", "score", "judge", "verif"), "reward"),
    (("advantage",), "advantage"),
    (("loss",), "loss"),
    (("weight", "sync", "broadcast"), "weight_sync"),
    (("dataset", "dataloader", "prompt_source"), "dataset"),
    (("rollout", "generat", "sample_completion"), "rollout"),
    (("logp", "logprob", "entrop", "forward", "policy"), "policy"),
    (("prepare",), "ready_buffer"),  # not any buffer: a replay buffer is no ready buffer
    (("split", "collat", "batch", "shuffle", "pack"), "batch_assembly"),
    (("train", "learn", "optim", "update"), "trainer"),
)
_TOKEN_WORDS = ("ids", "mask", "token", "logp", "logprob", "labels", "entrop")
_SAMPLE_WORDS = ("reward", "advantage", "score", "return", "value", "uid", "label")
_PATH_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\.[0-9]+)*$")


# Method names that say nothing of the role: the class's name does (`PolicyLoss.forward`).
_GENERIC_METHODS = ("forward", "__call__", "call", "run", "apply", "compute")


def suggest_owner(c: Candidate) -> str:
    """The owner word found earliest in the method's name, else the last one in its class's
    name (its head noun: `PolicyLoss` is a loss, `RolloutWorker` a rollout worker)."""
    parts = c.fn.qualname.split(".")
    method, cls = parts[-1], parts[0] if len(parts) > 1 else ""
    names = [(cls, True), (method, False)] if cls and method in _GENERIC_METHODS else \
        [(method, False), (cls, True)]
    for name, is_class in names:
        low = name.lower().replace("_", "")
        hits = [(low.find(w.replace("_", "")), i, owner) for i, (words, owner)
                in enumerate(_OWNER_WORDS) for w in words if w.replace("_", "") in low]
        if hits:
            if is_class:
                return max(hits, key=lambda h: (h[0], -h[1]))[2]
            return min(hits)[2]
    if len(parts) > 1:
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", parts[0]).lower()
        return re.sub(r"_(worker|actor|manager|service)$", "", snake) or snake
    return c.fn.qualname  # its own name: never the module's (`replay_buffer`, `__main__`)


def guess_dims(c: Candidate) -> dict[str, list[str]]:
    """`batch`/`tokens` for leaves whose name and shape say so, consistently across leaves."""
    leaves = {p: v for p, v in c.fn.stats.leaves.items()
              if v[0] == "tensor" and p and _PATH_OK.match(p)}
    firsts = [v[2][0] for v in leaves.values() if v[2] and isinstance(v[2][0], int)]
    if not firsts:
        return {}
    batch = max(set(firsts), key=firsts.count)
    out: dict[str, list[str]] = {}
    for path, (_, _, shape) in leaves.items():
        if not shape or shape[0] != batch:
            continue
        last = path.rsplit(".", 1)[-1].lower()
        if len(shape) == 2 and any(w in last for w in _TOKEN_WORDS):
            out[path] = ["batch", "tokens"]
        elif len(shape) == 1 and (path == last or path == "result" or
                                  any(w in last for w in _SAMPLE_WORDS)):
            out[path] = ["batch"]
    return out


# Calls told apart by what they were given only when that is a few objects used again and
# again (a policy and a reference model), not a new object per call.
MAX_SPLIT = 4


def split_by(c: Candidate) -> list[str]:
    """Arguments (or `self`) whose identity differed between calls, and `grad` when torch's
    grad mode did: one function computing the policy's, the reference's and the training
    log-probs becomes three owners' instances."""
    stats = c.fn.stats
    out = [name for name, n in sorted(stats.distinct_given().items(), key=lambda kv: (
        kv[0] == "self", kv[0])) if 2 <= n <= MAX_SPLIT and c.calls >= 2 * n and name not in c.args]
    if len(stats.grad_modes) > 1:
        out.append("grad")
    return out


def seam_names(c: Candidate) -> tuple[str, str]:
    """(call payload name, result payload name)."""
    fname = c.fn.qualname.rsplit(".", 1)[-1].lstrip("_") or "call"
    args = c.args
    if not args:
        return fname, fname
    name = args[0] if len(args) == 1 else fname
    return name, fname if name != fname else f"{fname}_result"


def honest_owner(c: Candidate) -> str:
    """The function's own name (`ReplayBuffer.append`, `zero_pad_sequences`), or its class's
    for a method whose name says nothing of the role (`GRPOLoss.forward` -> `GRPOLoss`):
    what the reader finds in the script, never a role word it was not given."""
    parts = c.fn.qualname.split(".")
    if len(parts) > 1 and parts[-1] in _GENERIC_METHODS:
        return ".".join(parts[:-1])
    return c.fn.qualname


def render(d: Discovery, command: str, *, honest: bool = False) -> str:
    """The seam map's YAML text (JSON-quoted strings, which YAML reads as they are).

    `honest`: owners are the functions' own names and a `torch.nn.Module`'s calls are not
    told apart by `self` (its caller is torch's own `__call__`, which holds every model as
    `self`)."""
    q = json.dumps
    lines = [
        "# Seam map written by `flowmap discover` from what the program moved:",
        f"#   {command}",
        "# Owners and dims are guesses: rename them to your pipeline's words.",
        "# Use it with: flowmap trace --seams THIS_FILE ...   (see docs/seam-maps.md)",
        "version: 1",
        "seams:",
    ]
    for c in d.seams:
        name, result_name = seam_names(c)
        lines.append(f"  # discovered: {c.calls} calls; bytes per call {c.bytes_in_per_call:.1f} in, "
                     f"{c.bytes_out_per_call:.1f} out ({fmt_bytes(c.bytes_in_per_call)} / "
                     f"{fmt_bytes(c.bytes_out_per_call)}); {len(c.tensor_leaves)} tensor leaves; "
                     f"{c.fn.processes} process(es)")
        if c.folded:
            lines.append("  # folded into it: " + ", ".join(k for k, _ in c.folded.most_common(4)))
        if c.fn.ray:
            lines.append("  # a Ray task or actor method: not wrapped; flowmap's Ray integration "
                         "records its calls as the map says (split_by does not apply: its "
                         "arguments reach the worker as fresh copies at every call)")
        lines.append(f"  - target: {q(c.fn.target)}")
        lines.append(f"    owner: {q(honest_owner(c) if honest else suggest_owner(c))}")
        if c.args:
            lines.append(f"    args: [{', '.join(q(a) for a in c.args)}]")
            lines.append(f"    name: {q(name)}")
        else:
            lines.append("    call: false")
        if c.result:
            lines.append(f"    result_name: {q(result_name)}")
        else:
            lines.append("    result: false")
        split = split_by(c) if not c.fn.ray else []
        if honest and c.fn.nn_module:
            split = [a for a in split if a != "self"]
        if split:
            lines.append(f"    split_by: [{', '.join(q(a) for a in split)}]")
        dims = guess_dims(c)
        if dims:
            lines.append("    dims:")
            for path, names in sorted(dims.items()):
                lines.append(f"      {q(path)}: [{', '.join(q(n) for n in names)}]")
    text = "\n".join(lines) + "\n"
    parse_seam_map(text, "<discovered seam map>")  # a map we write must load
    return text
