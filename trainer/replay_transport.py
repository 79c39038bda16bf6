"""How MoE/DSA replay arrays get from the rollout engines to the DP ranks: payload or handle.

The arrays are big where it matters: DeepSeek-V3.2 keeps 2,048 positions per
token in each of 61 layers, about 16 GB of `indexer_topk` for one 32K-token
sample. Two ways to move them, one flag (`rollout.transport`, `--transport`):

- `payload` (the naive seam): each leaf trajectory carries its arrays, so they
  ride every hop of the control path — rollout -> ready_buffer -> batcher ->
  reward and the ranks — although only the ranks read them.
- `handle`: the engine side writes each leaf's arrays into a shared-memory
  `ReplayStore` (`rollout/i -> replay_store : replay`), the leaf carries a
  `ReplayHandle` of a few hundred bytes instead, and each rank reads the rows of
  its own micro-batches straight from the store (`replay_store -> trainer/rank<k>
  : replay`). An entry lives until the step that trained on it has been reported
  by every rank, or until its leaf is dropped as stale (`flowmap.drop` under the
  owner `replay_store`); whatever is left is freed at shutdown.

Both feed the ranks the same tensors, so training is identical (same seed, same
losses). A model without MoE/DSA records nothing and uses `Dense`, which
changes nothing on any hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import flowmap
from flowmap.trainer.replay import REPLAY_DIMS, Replay, ReplayHandle, ReplayStore
from flowmap.trainer.tree import LeafTrajectory

STORE = "replay_store"  # the owner name of the store in the trace
# Dimension names of the replay leaves of a trajectory hop (a list of leaves, folded as `[*]`).
LEAF_LIST_DIMS = {f"[*].{name}": dims for name, dims in REPLAY_DIMS.items()}


class Dense:
    """No replay (dense model, or replay off): leaves travel as they are."""

    kind = "dense"
    trajectory_dims: dict[str, tuple[str, ...]] | None = None  # for the `trajectory` hop

    def attach(self, engine: int, leaves: list[LeafTrajectory],
               replays: Sequence[Replay | None]) -> list[LeafTrajectory]:
        """The leaves as they travel the control path from now on."""
        return leaves

    def dropped(self, leaves: Sequence[LeafTrajectory], reason: str) -> None:
        """Leaves the ready buffer discarded (already recorded there with `flowmap.drop`)."""

    def submitted(self, batch_id: int, leaves: Sequence[LeafTrajectory]) -> None:
        """Leaves handed to the ranks as batch `batch_id`."""

    def step_done(self, batch_id: int) -> None:
        """Every rank has reported batch `batch_id`: nothing will read its rows again."""

    def close(self) -> None:
        """End of run: give back whatever is still held."""


class Payload(Dense):
    """The arrays ride with each leaf through every later hop."""

    kind = "payload"
    trajectory_dims = LEAF_LIST_DIMS

    def attach(self, engine: int, leaves: list[LeafTrajectory],
               replays: Sequence[Replay | None]) -> list[LeafTrajectory]:
        return [leaf if r is None else replace(leaf, replay=r)
                for leaf, r in zip(leaves, replays, strict=True)]


class Handle(Dense):
    """The arrays stay in a shared-memory store by the engines; leaves carry handles."""

    kind = "handle"

    def __init__(self) -> None:
        self.store = ReplayStore()
        self.training: dict[int, list[LeafTrajectory]] = {}  # batch id -> its leaves

    def attach(self, engine: int, leaves: list[LeafTrajectory],
               replays: Sequence[Replay | None]) -> list[LeafTrajectory]:
        out: list[LeafTrajectory] = []
        stored: list[Replay] = []
        with flowmap.owner(STORE):
            for leaf, r in zip(leaves, replays, strict=True):
                if r is None:
                    out.append(leaf)
                    continue
                out.append(replace(leaf, replay=self.store.put(leaf.leaf_id, r.arrays())))
                stored.append(r)
            self._count()
        if stored:
            # A copy into shared memory in the engine's own process (no pickling, no socket).
            flowmap.hop(f"rollout/{engine}", STORE, stored, name="replay", transport="copy",
                        items=[x.leaf_id for x in out if isinstance(x.replay, ReplayHandle)],
                        dims=LEAF_LIST_DIMS)
        return out

    def dropped(self, leaves: Sequence[LeafTrajectory], reason: str) -> None:
        self._free(leaves, reason)

    def submitted(self, batch_id: int, leaves: Sequence[LeafTrajectory]) -> None:
        self.training[batch_id] = [x for x in leaves if isinstance(x.replay, ReplayHandle)]

    def step_done(self, batch_id: int) -> None:
        self._free(self.training.pop(batch_id, []), None)

    def close(self) -> None:
        self.training.clear()
        with flowmap.owner(STORE):
            self.store.close()
            self._count()
            flowmap.counter("replay_store_bytes", self.store.live_bytes)  # `put`/`free` count it

    def _free(self, leaves: Sequence[LeafTrajectory], reason: str | None) -> None:
        held = [(x, x.replay) for x in leaves if isinstance(x.replay, ReplayHandle)]
        if not held:
            return
        with flowmap.owner(STORE):
            for _, handle in held:
                self.store.free(handle)
            if reason is not None:
                flowmap.drop([x.leaf_id for x, _ in held], reason=reason)
            self._count()

    def _count(self) -> None:
        flowmap.counter("replay_store_entries", len(self.store.live_entries))


def make_transport(kind: str, has_replay: bool) -> Dense:
    """The transport `rollout.transport` names; `Dense` when the model records nothing."""
    if not has_replay:
        return Dense()
    return Handle() if kind == "handle" else Payload()
