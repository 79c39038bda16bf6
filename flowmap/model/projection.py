"""Project a run to production scale: recompute leaf bytes with a model preset's sizes.

A toy trainer carries `routed_experts` of shape (tokens=40, layers=2, topk=2);
DeepSeek-V3.2 at 32K tokens carries (32768, 61, 8). When hops declare their
dimension names (`flowmap.hop(..., dims={"routed_experts": ("tokens", "layers",
"topk")})`), every named dimension a preset knows is replaced by the preset's
size — `tokens` by the context length — and the leaf's bytes scale by the same
factor. Dimensions the preset does not name (`batch`) keep their traced size.

The projected run is an ordinary `Run` (so report, render and diff work on it
unchanged) whose `projection` (a `Projection`) says what was projected; every
output labels such figures as projections.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any

import yaml

from flowmap.errors import UsageError
from flowmap.model.run import Run
from flowmap.model.types import Dim, Projection
from flowmap.read.events import Hop, Leaf, SeamStep

PRESET_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets")
_PRESET_KEYS = {"name", "description", "dims", "contexts", "default_context"}
TOKENS = "tokens"


@dataclasses.dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    dims: dict[str, int]
    contexts: dict[str, int]
    default_context: str | None


def builtin_presets() -> list[str]:
    return sorted(n[: -len(".yaml")] for n in os.listdir(PRESET_DIR) if n.endswith(".yaml"))


def load_preset(name_or_path: str) -> Preset:
    """A shipped preset by name (`deepseek-v3.2`), or a user preset from a YAML file."""
    path = os.path.join(PRESET_DIR, f"{name_or_path}.yaml")
    if not os.path.isfile(path):
        path = name_or_path
    if not os.path.isfile(path):
        raise UsageError(
            f"no preset {name_or_path!r}; use one of {', '.join(builtin_presets())} "
            "or the path of a preset YAML file"
        )
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read preset {path}: {exc}") from None
    return _validate(raw, path)


def _validate(raw: Any, path: str) -> Preset:
    if not isinstance(raw, dict):
        raise UsageError(f"preset {path} must be a mapping with a `dims:` table")
    unknown = set(raw) - _PRESET_KEYS
    if unknown:
        raise UsageError(f"preset {path}: unknown key {sorted(unknown)[0]!r} "
                         f"(known: {', '.join(sorted(_PRESET_KEYS))})")
    dims = raw.get("dims")
    contexts = raw.get("contexts") or {}
    for table, what in ((dims, "dims"), (contexts, "contexts")):
        if not isinstance(table, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in table.values()
        ):
            raise UsageError(f"preset {path}: `{what}` must map names to positive integers")
    assert isinstance(dims, dict) and isinstance(contexts, dict)  # validated just above
    return Preset(
        name=str(raw.get("name") or os.path.splitext(os.path.basename(path))[0]),
        description=str(raw.get("description") or ""),
        dims={str(k): int(v) for k, v in dims.items()},
        contexts={str(k).lower(): int(v) for k, v in contexts.items()},
        default_context=str(raw["default_context"]).lower() if raw.get("default_context") else None,
    )


def parse_spec(spec: str) -> tuple[Preset, int | None, str | None]:
    """`deepseek-v3.2@32k` -> (preset, 32768, "32k"); the context is optional."""
    name, _, ctx = spec.partition("@")
    preset = load_preset(name)
    ctx = ctx.strip().lower() or (preset.default_context or "")
    if not ctx:
        return preset, None, None
    if ctx in preset.contexts:
        return preset, preset.contexts[ctx], ctx
    m = re.fullmatch(r"(\d+)(k?)", ctx)
    if not m:
        raise UsageError(f"cannot read context {ctx!r}; write it like 32k or 32768")
    return preset, int(m.group(1)) * (1024 if m.group(2) else 1), ctx


def project(run: Run, spec: str) -> Run:
    """A copy of `run` whose hops carry the bytes they would at the preset's scale."""
    preset, context, ctx_label = parse_spec(spec)
    sizes = dict(preset.dims)
    if context is not None:
        sizes[TOKENS] = context
    cache: dict[int, tuple[tuple[Leaf, ...], int]] = {}
    shards = []
    for shard in run.shards:
        hops = [_project_hop(h, sizes, cache) for h in shard.hops]
        folded = [_project_seam_step(st, sizes, cache) for st in shard.seam_steps]
        shards.append(dataclasses.replace(shard, hops=hops, seam_steps=folded))
    projected = Run(run.path, shards, run.meta)
    projected.projection = Projection(
        preset=preset.name,
        context=context,
        context_label=ctx_label,
        sizes=dict(sorted(sizes.items())),
        note=f"projected to {preset.name}"
        + (f" at {ctx_label} tokens" if ctx_label else "")
        + ": bytes of leaves with named dims are scaled to the preset's sizes",
    )
    return projected


def _projected(leaves: tuple[Leaf, ...], sizes: dict[str, int],
               cache: dict[int, tuple[tuple[Leaf, ...], int]]) -> tuple[tuple[Leaf, ...], int]:
    """(projected leaves, bytes delta) of a schema; schemas are shared between hops: project each once."""
    hit = cache.get(id(leaves))
    if hit is None:
        hit = cache[id(leaves)] = _project_leaves(leaves, sizes)
    return hit


def _project_hop(h: Hop, sizes: dict[str, int],
                 cache: dict[int, tuple[tuple[Leaf, ...], int]]) -> Hop:
    leaves, delta = _projected(h.leaves, sizes, cache)
    if delta == 0 and leaves is h.leaves:
        return h
    return dataclasses.replace(h, leaves=leaves, nbytes=h.nbytes + delta)


def _project_seam_step(st: SeamStep, sizes: dict[str, int],
                       cache: dict[int, tuple[tuple[Leaf, ...], int]]) -> SeamStep:
    """As `_project_hop`, each folded hop changed by its merged schema's delta."""
    leaves, delta = _projected(st.leaves, sizes, cache)
    if delta == 0 and leaves is st.leaves:
        return st
    return dataclasses.replace(st, leaves=leaves, nbytes_sum=st.nbytes_sum + delta * st.hops,
                               nbytes_min=st.nbytes_min + delta, nbytes_max=st.nbytes_max + delta)


def _project_leaves(leaves: tuple[Leaf, ...], sizes: dict[str, int]) -> tuple[tuple[Leaf, ...], int]:
    out: list[Leaf] = []
    delta = 0
    changed = False
    for leaf in leaves:
        if not leaf.dims or len(leaf.dims) != len(leaf.shape):
            out.append(leaf)
            continue
        factor = 1.0
        shape: list[Dim] = []
        for name, dim in zip(leaf.dims, leaf.shape):
            actual = (dim[0] + dim[1]) / 2 if isinstance(dim, tuple) else dim
            target = sizes.get(name)
            if target is None or actual <= 0:
                shape.append(dim)
                continue
            factor *= target / actual
            shape.append(target)
        nbytes = int(round(leaf.nbytes * factor))
        delta += nbytes - leaf.nbytes
        changed = changed or not math.isclose(factor, 1.0)
        out.append(dataclasses.replace(leaf, shape=tuple(shape), nbytes=nbytes))
    return (tuple(out) if changed else leaves), delta
