"""A tensor copied device → host → device within one step: two trips over the bus for nothing.

The evidence is what every hop records of its leaves: device, shape and dtype,
and where known the storage of each. Within one step, in time order:

1. owner X holds a tensor on a device (a hop into or out of X carries it there);
2. X sends a host tensor of the same shape and dtype to Y (X copied it down);
3. Y sends a device tensor of that shape and dtype on (Y copied it back up).

Each hop's `src` is the owner that held what it carries, so the chain follows
the data from holder to holder; a same-shaped tensor that never passed
through X and Y cannot make one. The three must also go by one name (the
leaf's field, or the payload's name for a bare tensor): a copy keeps it, and a
new tensor of the same shape that Y computes (reference log-probs beside the
old ones) does not make a bounce. The device tensor Y sends must not be the
storage X held (Y forwarding the original is not a copy): where both hops
recorded their leaves' storages, identity decides. A `meta` tensor counts as
a device tensor (it has no host bytes either), which lets the CPU tests build
real traced bounces. The bytes at stake are the host copy's bytes twice (down,
and back up), per step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from flowmap.findings.common import DEVICE_BOUNCE, Finding, RoleKey, one_each, per_step
from flowmap.model.format import fmt_bytes, leaf_label, seam_label
from flowmap.model.types import role_of
from flowmap.read.events import Hop, Leaf

if TYPE_CHECKING:
    from flowmap.model.view import RunView

WINDOW_NS = 100_000_000  # hops without a step are grouped by 100 ms windows, as `duplicates` does
HOST = ("cpu", "")
When = int | tuple[str, int]
Facts = tuple[str, tuple[int, ...], str, str]  # (owner, shape, dtype, name)
Sighting = tuple[Hop, Any]  # the hop, and the leaf's storage id where known


def detect(view: RunView) -> list[Finding]:
    steps: dict[When, list[Hop]] = defaultdict(list)
    for h in view.events.hops:
        steps[h.step if h.step is not None else ("t", h.t_ns // WINDOW_NS)].append(h)
    bounced: dict[tuple[str, str, str], float] = defaultdict(float)
    seams: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    example: dict[tuple[str, str, str], tuple[Leaf, str]] = {}
    for hops in steps.values():
        for held, down, up, leaf in _bounces(sorted(hops, key=lambda h: h.t_ns)):
            key = (role_of(down.src), role_of(down.dst), down.name)
            bounced[key] += 2 * leaf.nbytes
            seams[key].update(seam_label(h.seam) for h in (held, down, up))
            example.setdefault(key, (leaf, _device_of(held, leaf)))

    def say(key: RoleKey, bps: float) -> str:
        leaf, device = example[key]
        shape = "×".join(map(str, leaf.shape)) or "scalar"
        return (f"`{leaf_label(key[2], leaf.path)}` ({shape} {leaf.dtype}, "
                f"{fmt_bytes(leaf.nbytes)}) leaves {key[0]} as a host copy of a {device} tensor "
                f"and {key[1]} copies it back to the device, {per_step(bps)} over the bus: hand "
                "it over on the device (CUDA IPC, a device collective) or keep it there.")

    return one_each(DEVICE_BOUNCE, view, bounced, seams, say)


def _bounces(hops: list[Hop]) -> list[tuple[Hop, Hop, Hop, Leaf]]:
    """(device sighting at X, host hop X -> Y, device hop out of Y, host leaf) of one step."""
    on_device: dict[Facts, Sighting] = {}  # first sighting of each (holder, shape, dtype)
    pending: dict[Facts, list[tuple[Sighting, Hop, Leaf]]] = defaultdict(list)
    found: list[tuple[Hop, Hop, Hop, Leaf]] = []
    for h in hops:
        for leaf, storage in _leaves(h):
            if not _plain_shape(leaf.shape):
                continue
            shape, dtype, name = leaf.shape, leaf.dtype, _name(h, leaf)
            if leaf.device in HOST:
                if leaf.kind in ("tensor", "ndarray"):
                    held = on_device.get((h.src, shape, dtype, name))
                    if held is not None:
                        pending[(h.dst, shape, dtype, name)].append((held, h, leaf))
                continue
            waiting = pending.pop((h.src, shape, dtype, name), None)
            for (first, first_storage), down, host_leaf in waiting or ():
                if storage is None or first_storage is None or storage != first_storage:
                    found.append((first, down, h, host_leaf))
            for owner in (h.src, h.dst):
                on_device.setdefault((owner, shape, dtype, name), (h, storage))
    return found


def _leaves(h: Hop) -> list[tuple[Leaf, Any]]:
    """Each leaf with its storage id, where the hop recorded one per array leaf (in leaf order)."""
    arrays = [leaf for leaf in h.leaves if leaf.device != "" and leaf.count == 1]
    if h.storages and len(h.storages) == len(arrays):
        ids = dict(zip(map(id, arrays), h.storages))
        return [(leaf, ids.get(id(leaf))) for leaf in h.leaves]
    return [(leaf, None) for leaf in h.leaves]


def _name(h: Hop, leaf: Leaf) -> str:
    """What the program calls the tensor: its field (the path's last part), else the payload's
    name. A copy keeps it; a new tensor of the same shape computed on the way mostly does not."""
    return leaf.path.rsplit(".", 1)[-1].split("[", 1)[0] or h.name


def _plain_shape(shape: tuple[Any, ...]) -> bool:
    return all(type(n) is int for n in shape)


def _device_of(h: Hop, like: Leaf) -> str:
    for leaf in h.leaves:
        if leaf.shape == like.shape and leaf.dtype == like.dtype and leaf.device not in HOST:
            return leaf.device
    return "device"
