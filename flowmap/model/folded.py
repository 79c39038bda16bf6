"""Build `SeamStep`s from `a` events: the hops a process folded under `trace --aggregate`.

Kept out of `reader` so that the per-event decoding there stays about hops;
the event's fields are checked against the format before this runs.
"""

from __future__ import annotations

from typing import Any

from flowmap.model.events import SeamStep


def build(decoder: Any, ev: list[Any]) -> None:
    """Append the `SeamStep` of the `a` event `ev` to the shard `decoder` reads."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    sh.seam_steps.append(SeamStep(
        t0 + ev[1] * 1000, t0 + ev[16] * 1000, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], ev[6],
        s[ev[7]], ev[8], ev[9], ev[10], ev[11], ev[12], ev[13], ev[14], ev[15],
        decoder.schemas[ev[5]],
    ))
    sh.num_events += 1
