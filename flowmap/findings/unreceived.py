"""Transport messages sent and never received.

A queue message or socket message is written as two halves, one by each side
(`flowmap.read.halves`); a send half that no receive half claimed ends as a hop
to the sender's fallback destination, `(untraced)`. That is a message nobody
received when:

- it went through a `multiprocessing` pipe or queue (`pickle`, `shm`): both ends
  are processes of the traced program, so no untraced reader could have taken it
  (a queue nobody drains, a consumer that stopped early); or
- the same sender's messages of that seam reached a traced receiver otherwise
  (`zmq`: a PUB/SUB subscriber with `CONFLATE` keeping only the last, a high-water
  mark dropping the rest): the receiver is traced, and it did not get these.

A ZMQ message with no traced receiver at all may have gone to another program:
it is not claimed. *At stake*: the bytes of the messages never received.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import UNRECEIVED, Finding, per_step
from flowmap.model.format import seam_label
from flowmap.model.types import role_of
from flowmap.trace_format import PICKLE, SHM, UNTRACED

if TYPE_CHECKING:
    from flowmap.model.view import RunView

LOCAL = (PICKLE, SHM)  # multiprocessing pipes and queues: both ends in the program


def detect(view: RunView) -> list[Finding]:
    delivered: set[tuple[int, str, str]] = set()  # (pid, src, name) that reached a receiver
    lost: dict[tuple[int, str, str], list[int]] = defaultdict(list)
    how: dict[tuple[int, str, str], str] = {}
    for h in view.events.hops:
        if h.transport not in LOCAL and h.transport != "zmq":
            continue
        key = (h.pid, h.src, h.name)
        how.setdefault(key, h.transport)
        if h.dst == UNTRACED:
            lost[key].append(h.nbytes)
        elif h.src != UNTRACED:
            delivered.add(key)
    by_role: dict[tuple[str, str], list[int]] = defaultdict(list)
    transports: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (pid, src, name), sizes in lost.items():
        if (pid, src, name) not in delivered and how[(pid, src, name)] not in LOCAL:
            continue
        rk = (role_of(src), name)
        by_role[rk] += sizes
        transports[rk].add(how[(pid, src, name)])
    out = []
    for (src, name), sizes in by_role.items():
        bps = sum(sizes) / view.detail.num_steps
        by = "/".join(sorted(transports[(src, name)]))
        out.append(Finding(
            UNRECEIVED, [seam_label((src, UNTRACED, name))], bps,
            f"{len(sizes)} `{name}` messages {src} sent ({by}) were never received, "
            f"{per_step(bps)}: drain the queue or stop sending what is dropped (a conflated "
            "or high-water-marked socket keeps only some).",
        ))
    return out

