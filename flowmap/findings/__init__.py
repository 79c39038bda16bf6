"""Findings: where bytes could be saved, ranked by the bytes at stake per step.

One detector per module, each a function of the `RunView` (its seams, and
its events where identity matters: storages, items). flowmap sees metadata
only — shapes, dtypes, sizes, storage addresses, item ids, and checksums of small
windows of bytes a transport already serialised — never tensor values (but what
`--values` samples), so every figure here is either counted from the trace or an
estimate whose method is written in docs/findings.md. They read the view and nothing else:
`findings(run.view)` lists them; the reporters call it for the view they show.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from flowmap.findings import (
    broadcast_parts,
    chatty,
    device_bounce,
    driver_funnel,
    dropped,
    duplicates,
    heaviest,
    padding,
    pass_through,
    prefix_resend,
    serialisation,
    unreceived,
    views,
    wide_ids,
)
from flowmap.findings.common import (
    CHATTY,
    DEVICE_BOUNCE,
    DROPPED,
    DUPLICATE,
    HEAVIEST,
    KINDS,
    PADDING,
    PASS_THROUGH,
    PREFIX_RESEND,
    SERIALISATION,
    STEPPED,
    UNRECEIVED,
    VIEW,
    WIDE_IDS,
    Finding,
    named_as_seams,
)
from flowmap.gc_pause import paused_gc

if TYPE_CHECKING:
    from flowmap.model.view import RunView

__all__ = ["CHATTY", "DEVICE_BOUNCE", "DROPPED", "DUPLICATE", "HEAVIEST", "KINDS", "MAX_PER_KIND",
           "PADDING", "PASS_THROUGH", "PREFIX_RESEND", "SERIALISATION", "UNRECEIVED", "VIEW",
           "WIDE_IDS", "Finding", "findings"]

# Detectors that can fire once per seam keep their heaviest few: a findings
# list is a to-do list, not a second copy of the seam table.
MAX_PER_KIND = 5
DETECTORS: tuple[Callable[[RunView], list[Finding]], ...] = (
    heaviest.detect, pass_through.detect, dropped.detect, padding.detect, duplicates.detect,
    broadcast_parts.detect, serialisation.detect, views.detect, chatty.detect,
    prefix_resend.detect, wide_ids.detect, device_bounce.detect, driver_funnel.detect,
    unreceived.detect,
)


# A finding must be worth reading: less at stake than this share of the run's payload
# per step (219 B of a 78 KiB step) is a true line nobody should act on; nor, whatever the
# run, less than a pickled handle's bytes (a shared-memory slot's name, shape and dtype):
# control messages, in a run whose data moves where no hop sees it.
MIN_SHARE_OF_STEP = 0.01
MIN_BYTES_PER_STEP = 256


def findings(view: RunView) -> list[Finding]:
    """Every finding of the run, most bytes per step first (ties by kind, then seams)."""
    out: list[Finding] = []
    floor = max(MIN_BYTES_PER_STEP, MIN_SHARE_OF_STEP * view.totals.bytes_per_step_mean)
    token = STEPPED.set(view.has_steps)
    try:
        with paused_gc():  # the detectors build many small records that hold no cycles
            for detect in DETECTORS:
                found = sorted(_run(detect, view), key=_rank)
                out.extend(f for f in found[:MAX_PER_KIND] if f.bytes_per_step > max(0, floor)
                           and not _said(f, out))
    finally:
        STEPPED.reset(token)
    return sorted(map(named_as_seams, out), key=_rank)


def _run(detect: Callable[[RunView], list[Finding]], view: RunView) -> list[Finding]:
    """A detector's findings; none, said in one line on stderr, where it fails on a trace
    it was not written for (the report, the page and the gate go on with the others)."""
    try:
        return detect(view)
    except Exception as exc:  # a detector's defect must not cost the user the whole report
        name = detect.__module__.rsplit(".", 1)[-1]
        sys.stderr.write(f"flowmap: the `{name}` findings were skipped: an internal error "
                         f"({type(exc).__name__}: {exc}); please report it\n")
        return []


def _said(f: Finding, earlier: list[Finding]) -> bool:
    """Whether an earlier detector made the same claim about these seams (`pass_through` and
    `driver_funnel` both see a payload sent on through a middle, by different evidence)."""
    return any(g.kind == f.kind and set(f.seams) <= set(g.seams) for g in earlier)


def _rank(f: Finding) -> tuple[float, str, list[str]]:
    return (-f.bytes_per_step, f.kind, f.seams)
