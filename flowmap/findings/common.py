"""What every detector shares: the `Finding` record, its kinds, and role-level seam keys.

Detectors that look at a pipeline stage work on roles (`rollout`, not
`rollout/0`) so eight engines give one finding, which lists every
owner-level seam involved.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from flowmap.model.format import fmt_per_step
from flowmap.model.types import SeamKey, SeamStats, role_of
from flowmap.trace_format import GROUP, PICKLE, RPC, SHM, ZMQ

if TYPE_CHECKING:
    from flowmap.model.view import RunView

HEAVIEST = "heaviest"
PASS_THROUGH = "pass_through"
DROPPED = "dropped"
PADDING = "padding"
DUPLICATE = "duplicate"
SERIALISATION = "serialisation"
VIEW = "view"
CHATTY = "chatty"
PREFIX_RESEND = "prefix_resend"
WIDE_IDS = "wide_ids"
DEVICE_BOUNCE = "device_bounce"
UNRECEIVED = "unreceived"
KINDS = (HEAVIEST, PASS_THROUGH, DROPPED, PADDING, DUPLICATE, SERIALISATION, VIEW, CHATTY,
         PREFIX_RESEND, WIDE_IDS, DEVICE_BOUNCE, UNRECEIVED)
# Transports that move a tensor's whole storage, not only its elements: torch pickles a
# view with its storage, and `share_memory_` moves the storage (pytorch/pytorch #182105).
# Not `cuda_ipc`: a handle maps the sender's memory, nothing of the storage is copied.
STORAGE_TRANSPORTS = (PICKLE, SHM, RPC, ZMQ)

RoleKey = tuple[str, str, str]  # (src role, dst role, payload name)
_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Finding:
    """One place where bytes could be saved.

    `seams` are owner-level seam labels (`"src -> dst : name"`) as in
    `RunView.seams`; `bytes_per_step` is what is at stake (an estimate for
    padding, see docs/findings.md); `message` is one sentence saying what to do.
    """

    kind: str
    seams: list[str]
    bytes_per_step: float
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "seams": list(self.seams),
                "bytes_per_step": round(self.bytes_per_step, 3), "message": self.message}


# Whether the run being examined has steps: without, a "per step" figure is the run's total and
# every message says so (set by `findings()` around the detectors).
STEPPED: ContextVar[bool] = ContextVar("flowmap_findings_stepped", default=True)


K = TypeVar("K")


def one_each(kind: str, view: RunView, at_stake: Mapping[K, float],
             labels: Mapping[K, Iterable[str]], say: Callable[[K, float], str]) -> list[Finding]:
    """A finding of `kind` for each key of `at_stake` (its bytes over the whole run): the
    bytes per step at stake, the seams `labels` gives it, and the sentence `say` words
    from the key and those bytes per step."""
    steps = view.detail.num_steps
    return [Finding(kind, sorted(labels[k]), n / steps, say(k, n / steps))
            for k, n in at_stake.items()]


def per_step(n: float) -> str:
    """`5.00 MiB/step`, or `5.00 MiB total` in a run without steps."""
    return fmt_per_step(n, STEPPED.get())


def role_key(key: SeamKey) -> RoleKey:
    """(src role, dst role, name); a socket's name (`PUSH ipc:///tmp/run/actor-1`, `PULL
    tcp://10.0.0.2:5556`) with its numbers as `*`: one socket per rank is one seam per role."""
    name = key[2]
    return (role_of(key[0]), role_of(key[1]), _NUMBERS.sub("*", name) if "://" in name else name)


def named_as_seams(f: Finding) -> Finding:
    """`f` with each socket name its message gives role-level (`PUSH tcp://*.*.*.*:*`) said
    as its seams name it (`PUSH tcp://127.0.0.1:*`), where they all name it so: the name a
    user finds in the seam table."""
    real: dict[str, set[str]] = defaultdict(set)
    for label in f.seams:
        name = label.partition(" : ")[2]
        if "://" in name:
            real[_NUMBERS.sub("*", name)].add(name)
    message = f.message
    for masked, names in real.items():
        if len(names) == 1 and masked not in names:
            message = message.replace(masked, next(iter(names)))
    return f if message == f.message else Finding(f.kind, f.seams, f.bytes_per_step, message)


def role_seams(view: RunView) -> dict[RoleKey, list[SeamStats]]:
    """Owner-level seams grouped by role-level key, in the view's seam order."""
    out: dict[RoleKey, list[SeamStats]] = defaultdict(list)
    for key, s in view.seams.items():
        out[role_key(key)].append(s)
    return dict(out)


def receipts(view: RunView) -> set[SeamKey]:
    """The seams on which ranks receive what a rooted collective's root sent its group
    (`group[0,1] -> trainer/rank1 : broadcast`), where the root's side is traced too: the
    same messages, priced once, at the root."""
    roots = {(k[1], k[2]) for k in view.seams if k[1].startswith(GROUP)}
    return {k for k in view.seams if k[0].startswith(GROUP) and (k[0], k[2]) in roots}


def norm_path(path: str) -> str:
    """`[*].batch.input_ids[*]` -> `batch.input_ids`: list folding ignored."""
    return ".".join(p for p in path.replace("[*]", ".").split(".") if p)


def leaf_name(path: str) -> str:
    """`[*].batch.input_ids[*]` -> `input_ids`: what a field is called whatever wraps it."""
    return norm_path(path).rsplit(".", 1)[-1]
