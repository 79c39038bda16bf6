"""Typed configuration of the GRPO trainer, overridable from a YAML file and from flags.

One `@dataclass(slots=True)` per concern, validated once in `__post_init__`, so a
bad value fails at start-up with one sentence instead of deep inside a rank
process. Precedence, lowest first: the defaults below, `--config FILE` (YAML,
sections named like the fields of `Config`), then flags (`--steps 20`, or any
field as `--set train.lr=3e-4`).

The defaults are the demo: they learn the counting task in well under two
minutes on 2 CPU cores (see docs/trainer.md for the measured figures).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import yaml

TRANSPORTS = ("payload", "handle")  # how replay arrays travel; see RolloutConfig.transport
DEVICES = ("cpu", "cuda", "auto")  # where engines, ranks and the reference model run


class ConfigError(ValueError):
    """A configuration value or file the trainer cannot use; the message says which."""


@dataclass(slots=True)
class TaskConfig:
    """The counting game: say the digit after the one shown, over several turns."""

    num_turns: int = 2  # model turns per trajectory; the environment answers between them
    fork_prob: float = 0.5  # chance that the environment forks a trajectory at a turn boundary
    fork_width: int = 2  # branches of one fork; each becomes its own leaf trajectory
    max_tokens_per_turn: int = 3  # a digit and <eos>, with one token of slack

    def __post_init__(self) -> None:
        _positive(self, "num_turns", "fork_width", "max_tokens_per_turn")
        _fraction(self, "fork_prob")


@dataclass(slots=True)
class ModelSection:
    """TinyLM sizes (see trainer/model.py for why these are enough)."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    max_seq_len: int = 64  # prompt + all turns: about 25 tokens for the default task
    # Off by default (the dense demo). MoE feed-forward: experts and top-k per token.
    moe_experts: int = 0
    moe_top_k: int = 2
    # DSA sparse attention: positions each query keeps (0 = dense), indexer width and heads.
    dsa_index_topk: int = 0
    dsa_index_dim: int = 16
    dsa_index_heads: int = 2
    # Train-mode noise on router logits / indexer scores: stands in for train/inference drift.
    router_noise: float = 0.0

    def __post_init__(self) -> None:
        _positive(self, "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len")
        _positive(self, "moe_top_k", "dsa_index_dim", "dsa_index_heads")
        for name in ("moe_experts", "dsa_index_topk"):
            if getattr(self, name) < 0:
                raise ConfigError(f"model.{name} must be >= 0 (0 turns the option off)")
        if self.moe_experts and self.moe_top_k > self.moe_experts:
            raise ConfigError(
                f"model.moe_top_k ({self.moe_top_k}) must be at most model.moe_experts "
                f"({self.moe_experts})"
            )
        if self.router_noise < 0:
            raise ConfigError("model.router_noise must be >= 0")

    @property
    def has_replay(self) -> bool:
        """MoE or DSA on: rollout records selections and training replays them."""
        return self.moe_experts > 0 or self.dsa_index_topk > 0


@dataclass(slots=True)
class RolloutConfig:
    """The rollout engines and how they sample."""

    engines: int = 2  # engine instances (rollout/0, rollout/1, ...)
    n: int = 8  # trajectories per env group (the GRPO group size before forks)
    temperature: float = 1.0  # 1.0: rollout log-probs are the policy's own, the PPO ratio is exact
    top_p: float = 1.0
    max_num_seqs: int = 32  # per engine
    num_kv_blocks: int = 128  # per engine, of block_size tokens
    block_size: int = 16
    # How MoE/DSA replay arrays reach the trainer (only used with MoE or DSA on):
    # "payload" rides them with the trajectory through every hop of the control path;
    # "handle" keeps them in a shared-memory store by the engines, only a handle travels,
    # and each DP rank fetches its own rows (see trainer/replay_transport.py).
    transport: str = "payload"
    # Dynamic sampling (verl/DAPO filter_groups): drop groups whose leaves all scored alike
    # and keep generating until the batch is full. Off by default.
    filter_zero_variance: bool = False
    # Mask out of the loss every leaf with a turn that hit max_tokens_per_turn without <eos>
    # (TRL's mask_truncated_completions). Off by default.
    mask_truncated: bool = False

    def __post_init__(self) -> None:
        _positive(self, "engines", "n", "max_num_seqs", "num_kv_blocks", "block_size")
        if self.transport not in TRANSPORTS:
            raise ConfigError(
                f"rollout.transport must be one of {', '.join(TRANSPORTS)}, not {self.transport!r}"
            )
        if self.temperature <= 0:
            raise ConfigError("rollout.temperature must be > 0: GRPO needs sampled, varied groups")


@dataclass(slots=True)
class DispatchConfig:
    """The adaptive watermark of in-flight trajectories (0 = derive from the batch size)."""

    initial_watermark: int = 0  # 0: one batch of trajectories
    min_watermark: int = 0  # 0: one env group
    max_watermark: int = 0  # 0: what the engines can run at once
    raise_step: int = 0  # 0: one env group per time the trainer starves

    def __post_init__(self) -> None:
        for name in ("initial_watermark", "min_watermark", "max_watermark", "raise_step"):
            if getattr(self, name) < 0:
                raise ConfigError(f"dispatch.{name} must be >= 0 (0 means derived)")


@dataclass(slots=True)
class TrainConfig:
    """Training: batch, data parallelism, PPO loss, optimiser."""

    steps: int = 60  # optimiser steps = weight versions produced
    groups_per_batch: int = 4  # complete env groups per training batch
    dp: int = 2  # data-parallel rank processes
    micro_batches: int = 2  # per rank per step
    max_staleness: int = 1  # largest version gap (batch_id - version_tag) allowed into a batch
    # Batches submitted to the ranks and not yet finished; 2 needs max_staleness >= 2 to
    # overlap rollout with training (the staleness budget counts queued batches).
    queue_depth: int = 1
    # Wait for each step before rolling out further: no overlap, so a run is a function of
    # its seed alone (A/B comparisons of the plumbing, e.g. replay transports). Slower.
    synchronous: bool = False
    lr: float = 4e-4  # low enough that the reward climbs over the run, not in its first steps
    clip_eps: float = 0.2  # PPO clip of the importance ratio against the rollout log-probs
    grad_clip: float = 1.0
    # > 0: a frozen reference model (the warmed-up policy, owner `ref`) and verl's k3
    # ("low_var_kl") KL term in the loss, weighted by this. 0: no reference model.
    kl_coef: float = 0.0
    # PPO epochs over each batch and optimiser steps (mini-batches) per epoch; either > 1
    # makes the actor recompute the old log-probs first (verl's compute_log_prob).
    ppo_epochs: int = 1
    mini_batches: int = 1
    sync_attempts: int = 2  # a weight sync that raises is run again, up to this many times
    dtype: str = "float32"  # float64 for exactness tests
    shm_slot_bytes: int = 4 << 20  # one shared-memory slot: a rank's micro-batches of one step
    # How the ranks sum their gradients: "c10d" (`dist.all_reduce`, from Python) or
    # "functional" (torch's functional collectives, issued from C++ as compiled code and
    # DTensor issue them). Same sums; flowmap sees the second only through the Flight Recorder.
    grad_reduce: str = "c10d"

    def __post_init__(self) -> None:
        _positive(self, "steps", "groups_per_batch", "dp", "micro_batches", "queue_depth")
        _positive(self, "shm_slot_bytes", "ppo_epochs", "mini_batches", "sync_attempts")
        if self.micro_batches % self.mini_batches:
            raise ConfigError(
                f"train.micro_batches ({self.micro_batches}) must be a multiple of "
                f"train.mini_batches ({self.mini_batches}): a mini-batch is whole micro-batches"
            )
        if self.kl_coef < 0:
            raise ConfigError("train.kl_coef must be >= 0 (0 turns the reference model off)")
        if self.max_staleness < 0:
            raise ConfigError("train.max_staleness must be >= 0")
        if self.queue_depth > 2:
            raise ConfigError("train.queue_depth must be 1 or 2 (weights are double-buffered)")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"train.dtype must be float32 or float64, not {self.dtype!r}")
        if self.grad_reduce not in ("c10d", "functional"):
            raise ConfigError(
                f"train.grad_reduce must be c10d or functional, not {self.grad_reduce!r}")
        if self.lr <= 0 or self.clip_eps <= 0:
            raise ConfigError("train.lr and train.clip_eps must be > 0")

    @property
    def recomputes_old_log_probs(self) -> bool:
        """More than one update per batch: the ratio needs the actor's own log-probs at its start."""
        return self.ppo_epochs > 1 or self.mini_batches > 1


@dataclass(slots=True)
class WarmupConfig:
    """Supervised warm-up: clean demonstrations, then noisy ones (see trainer/warmup.py)."""

    clean_steps: int = 40  # learn the format and the skill
    noisy_steps: int = 40  # then unlearn the confidence: the policy starts weak but able
    batch_size: int = 64
    lr: float = 3e-3
    correct_frac: float = 0.25  # noisy phase: share of answers that are right; the rest are random

    def __post_init__(self) -> None:
        if self.clean_steps < 0 or self.noisy_steps < 0:
            raise ConfigError("warmup.clean_steps and warmup.noisy_steps must be >= 0")
        _positive(self, "batch_size")
        _fraction(self, "correct_frac")


@dataclass(slots=True)
class Config:
    seed: int = 0
    progress: bool = True  # rich live display; off prints one line per step block
    device: str = "cpu"  # or "cuda" (refused where torch sees none), "auto": trainer/device.py
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelSection = field(default_factory=ModelSection)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        # The counting game's longest trajectory: <bos>"+1:d", then per turn the answer and,
        # between turns, the environment's "y;+1:d".
        t = self.task
        longest = 5 + t.num_turns * t.max_tokens_per_turn + (t.num_turns - 1) * 6
        if longest > self.model.max_seq_len:
            raise ConfigError(
                f"model.max_seq_len ({self.model.max_seq_len}) is too small for "
                f"{t.num_turns} turns; raise it to at least {longest}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- overrides ------------------------------------------------------------------------

FLAGS = {  # flag -> dotted field
    "steps": "train.steps",
    "dp": "train.dp",
    "micro_batches": "train.micro_batches",
    "engines": "rollout.engines",
    "max_staleness": "train.max_staleness",
    "groups_per_batch": "train.groups_per_batch",
    "n": "rollout.n",
    "seed": "seed",
    "lr": "train.lr",
    "transport": "rollout.transport",
    "device": "device",
}


def parse_args(
    argv: Sequence[str] | None = None,
    prog: str = "grpo_tiny",
    defaults: dict[str, Any] | None = None,
    description: str = "Asynchronous GRPO on a toy task.",
) -> Config:
    """The config from defaults, `--config FILE` and flags (see FLAGS and `--set`).

    `defaults` (dotted keys) replace the dataclass defaults for one program, e.g.
    an example that turns MoE and DSA on; the file and the flags still win.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", metavar="FILE", help="YAML file with config sections")
    for flag, dotted in FLAGS.items():
        kind = _field_type(dotted)
        choices = TRANSPORTS if flag == "transport" else DEVICES if flag == "device" else None
        parser.add_argument(f"--{flag.replace('_', '-')}", dest=flag, type=kind, help=dotted,
                            choices=choices)
    parser.add_argument("--no-progress", action="store_true", help="plain log lines, no live view")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="any field, e.g. --set train.clip_eps=0.1 (repeatable)",
    )
    ns = parser.parse_args(argv)
    values: dict[str, Any] = dict(defaults or {})
    if ns.config:
        values.update(_flatten(_read_yaml(ns.config)))
    for item in ns.set:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set needs KEY=VALUE, got {item!r}")
        values[key.strip()] = yaml.safe_load(raw)
    for flag, dotted in FLAGS.items():
        if getattr(ns, flag) is not None:
            values[dotted] = getattr(ns, flag)
    if ns.no_progress:
        values["progress"] = False
    cfg = build(values)
    from flowmap.trainer.device import DeviceError, check_device  # torch once the config is read
    try:  # a GPU that is not there: one sentence here, not inside a spawned rank
        check_device(cfg.device, cfg.model.has_replay)
    except DeviceError as exc:
        raise ConfigError(str(exc)) from None
    return cfg


def build(values: dict[str, Any] | None = None) -> Config:
    """A validated Config from dotted overrides (`{"train.steps": 5}`) or nested sections."""
    flat = _flatten(values or {})
    sections: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, value in flat.items():
        section, _, name = key.rpartition(".")
        _check_key(key)
        value = _coerce(key, value)
        if section:
            sections.setdefault(section, {})[name] = value
        else:
            top[name] = value
    try:
        for f in dataclasses.fields(Config):
            if f.name in sections:
                section_type = cast(Callable[..., object], f.default_factory)
                top[f.name] = section_type(**sections[f.name])
        return Config(**top)
    except TypeError as exc:
        raise ConfigError(f"bad configuration: {exc}") from None


def _check_key(key: str) -> None:
    section, _, name = key.rpartition(".")
    names = {f.name: f for f in dataclasses.fields(Config)}
    if not section:
        if name not in names or dataclasses.is_dataclass(names[name].default_factory):
            raise ConfigError(f"unknown setting {key!r}; top-level keys: seed, progress, device")
        return
    if section not in names or "." in section:
        raise ConfigError(f"unknown section {section!r} in {key!r}")
    cls = names[section].default_factory
    if name not in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
        raise ConfigError(f"unknown setting {key!r}; see trainer/config.py for the fields")


def _coerce(key: str, value: Any) -> Any:
    """The value as its field's type (YAML reads `1e-3` as a string; flags arrive as text)."""
    kind = _field_type(key)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    try:
        if kind is bool:
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                return value.lower() in ("true", "yes", "1")
            raise ValueError
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a {kind.__name__}, got {value!r}") from None


def _field_type(dotted: str) -> type:
    section, _, name = dotted.rpartition(".")
    owner = Config if not section else {f.name: f for f in dataclasses.fields(Config)}[
        section
    ].default_factory
    default = {f.name: f for f in dataclasses.fields(owner)}[name].default  # type: ignore[arg-type]
    return type(default)


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections")
    return data


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{type(obj).__name__}.{name} must be a positive int, got {value!r}")


def _fraction(obj: object, name: str) -> None:
    value = getattr(obj, name)
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{type(obj).__name__}.{name} must be in [0, 1], got {value!r}")
