"""Chatty seams: one logical transfer sent as many small messages per step.

Weight sync as one message per parameter (allenai/open-instruct #1535: ~200 Ray
calls per sync, >120 s where NCCL itself took 0.5 s; huggingface/trl #5249)
pays a fixed cost per message — a call, a launch, a handshake — that bucketing
removes. The figure is messages per step on one seam; the ranking prices each
message the bucketed transfer would not need at `MESSAGE_COST_BYTES` (64 KiB),
the bytes one message's fixed cost could have moved (about 10 µs of a call or a
round trip at 6 GB/s; far more through Ray or HTTP), so a chatty seam sorts
among the byte findings.

A seam is chatty when, over the run's steps, its hops that moved bytes (not
`ref`) number at least `MIN_MESSAGES` a step, each smaller on average than
`BUCKET_BYTES`, and carry no item ids: messages that each carry an item
(trajectories streamed one by one) are the pipeline's own unit, not a transfer
cut into pieces. The bucketed transfer needs `ceil(bytes per step /
BUCKET_BYTES)` messages.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import CHATTY, Finding, RoleKey, role_key
from flowmap.model.format import fmt_bytes, role_label
from flowmap.model.types import SeamStats

if TYPE_CHECKING:
    from flowmap.model.view import RunView

MIN_MESSAGES = 16
BUCKET_BYTES = 512 << 20
MESSAGE_COST_BYTES = 64 << 10


def detect(view: RunView) -> list[Finding]:
    if not view.steps:  # without steps there is no "per step" to count messages in
        return []
    groups: dict[RoleKey, list[SeamStats]] = defaultdict(list)
    for key, s in view.seams.items():
        moved_hops = s.hops - s.transports.get("ref", 0)
        if moved_hops and not s.items and moved_hops / view.num_steps >= MIN_MESSAGES:
            groups[role_key(key)].append(s)
    out = []
    for rk, seams in groups.items():
        found = [_chatty(view, s) for s in seams]
        chatty = [(s, f) for s, f in zip(seams, found) if f is not None]
        if not chatty:
            continue
        messages = sum(f[0] for _, f in chatty) / len(chatty)
        needed = sum(f[1] for _, f in chatty) / len(chatty)
        mean_bytes = sum(f[2] for _, f in chatty) / len(chatty)
        spared = sum(f[0] - f[1] for _, f in chatty)
        out.append(Finding(
            CHATTY, sorted(s.label for s, _ in chatty), spared * MESSAGE_COST_BYTES,
            f"`{role_label(rk)}` sends {messages:,.0f} messages per step"
            f"{' on each seam' if len(chatty) > 1 else ''} (about {fmt_bytes(mean_bytes)} each): "
            f"bucket them into {needed:,.0f} per step (ranked at "
            f"{fmt_bytes(MESSAGE_COST_BYTES)} per message spared).",
        ))
    return out


def _chatty(view: RunView, s: SeamStats) -> tuple[float, int, float] | None:
    """(messages per step, messages the bucketed transfer needs, bytes per message) or None."""
    moved_hops = s.hops - s.transports.get("ref", 0)
    messages = moved_hops / view.num_steps
    bytes_per_step = s.moved_bytes_per_step
    mean_bytes = bytes_per_step / messages
    if mean_bytes >= BUCKET_BYTES:
        return None
    needed = max(1, math.ceil(bytes_per_step / BUCKET_BYTES))
    if messages - needed < MIN_MESSAGES / 2:
        return None
    return messages, needed, mean_bytes
