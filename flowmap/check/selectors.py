"""Seam addresses in budgets and pytest markers: `src -> dst : name`, with globs.

    rollout/0 -> ready_buffer : trajectory    one seam exactly
    rollout -> ready_buffer                   every payload name; `rollout` is a role,
                                              so it matches rollout/0, rollout/1, ...
    rollout/* -> ready_buffer : traj*         fnmatch globs in any part
    trainer/rank0 <- batcher : batch          the arrow may point either way

A part with no glob characters and no `/` names a role: it matches the owner
of that name and each of its instances. Everything else is an fnmatch pattern
over the whole owner (or payload) name, case-sensitive.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from flowmap.errors import UsageError

_GLOB_CHARS = set("*?[")


@dataclass(frozen=True, slots=True)
class SeamSelector:
    src: str
    dst: str
    name: str  # "*" when the address gave none
    text: str  # as the user wrote it, for messages

    def matches(self, src: str, dst: str, name: str) -> bool:
        return _owner_match(self.src, src) and _owner_match(self.dst, dst) and fnmatchcase(name, self.name)


def _owner_match(pattern: str, owner: str) -> bool:
    if not (_GLOB_CHARS & set(pattern)) and "/" not in pattern:
        return owner == pattern or owner.startswith(pattern + "/")
    return fnmatchcase(owner, pattern)


def parse_selector(text: str) -> SeamSelector:
    """Parse a seam address; raises UsageError naming the expected form."""
    raw = str(text).strip()
    body, sep, name = raw.partition(":")
    name = name.strip() if sep else "*"
    if "->" in body:
        src, _, dst = body.partition("->")
    elif "<-" in body:
        dst, _, src = body.partition("<-")
    else:
        raise UsageError(f"cannot read the seam {text!r}; write it as 'src -> dst' or 'src -> dst : name'")
    src, dst = src.strip(), dst.strip()
    if not src or not dst or not name or "->" in dst or "<-" in src:
        raise UsageError(f"cannot read the seam {text!r}; write it as 'src -> dst' or 'src -> dst : name'")
    return SeamSelector(src=src, dst=dst, name=name, text=raw)
