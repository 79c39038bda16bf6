"""Weight sync: trainer rank 0's new weights into every engine, in the essay's five steps.

For each engine, in order: `pause_generation` (stop scheduling; running and
waiting requests are withdrawn and handed back with their partial output),
`release_kv_cache` (free the cache memory, keep its layout), `update_weights`
(load the named tensors, bump the version), `resume_kv_cache`,
`continue_generation`; then the withdrawn requests are resubmitted, so nothing
is lost. The sync is retryable as a whole: the withdrawn requests are handed
to the rollout manager the moment they are withdrawn (`RolloutManager.hold`)
and leave it only when resubmitted, so a sync that fails half-way (after the
pause, say in `update_weights`) loses none of them, and running it again
resubmits them. Every engine call is idempotent, and an engine that already
has this version's weights takes the same weights again as a no-op (a
different tensor under the same version, or a lower version, is refused).

The weights arrive as views of the shared-memory slot rank 0 wrote: the
driver never copies them, each engine copies them once into its own model.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

import flowmap
from flowmap.trainer.engine.llm_engine import LLMEngine
from flowmap.trainer.engine.sequence import RequestOutput
from flowmap.trainer.replay_transport import LEAF_LIST_DIMS
from flowmap.trainer.rollout import RolloutManager


def sync_weights(
    engines: list[LLMEngine], rollout: RolloutManager, named: dict[str, torch.Tensor], version: int,
    attempts: int = 1,
) -> int:
    """Run the five steps on every engine, retrying the whole sync up to `attempts` times.

    Returns how many requests were resubmitted; the last failure is raised.
    """
    resubmitted = 0
    for attempt in range(attempts):
        try:
            return resubmitted + _sync_once(engines, rollout, named, version)
        except Exception:  # any failure mid-sync: the held requests survive it, so try again
            if attempt + 1 >= attempts:
                raise
            with flowmap.owner("weight_sync"):
                flowmap.mark("weight_sync.retry")
    return resubmitted


def _sync_once(
    engines: list[LLMEngine], rollout: RolloutManager, named: dict[str, torch.Tensor], version: int
) -> int:
    resubmitted = 0
    with flowmap.owner("weight_sync"):
        flowmap.mark("weight_sync.begin")
        for i, engine in enumerate(engines):
            engine_name = f"rollout/{i}"
            paused = engine.pause_generation()  # 1
            rollout.hold(i, paused)  # from here on a failure cannot lose them
            payload, dims = _paused(rollout, paused)
            flowmap.hop(engine_name, "weight_sync", payload, name="paused",
                        items=[rollout.branch_of(o.request_id) for o in paused], dims=dims)
            engine.release_kv_cache()  # 2
            flowmap.hop("weight_sync", engine_name, named, name="weights", version=version)
            engine.update_weights(named.items(), version)  # 3
            engine.resume_kv_cache()  # 4
            engine.continue_generation()  # 5
            resubmitted += rollout.resubmit_held(i)
        flowmap.mark("weight_sync.end")
    return resubmitted


def _paused(
    rollout: RolloutManager, paused: list[RequestOutput]
) -> tuple[list[RequestOutput], dict[str, Any] | None]:
    """What the withdrawn requests carry to the controller, and the dims of their replay rows.

    With the payload transport their partial replay rows go along (as the turn
    outputs do); otherwise the rows stay on the engine side (the rollout manager
    keeps them for the resubmitted request) and only the control message travels.
    """
    if rollout.turn_replay:
        return paused, LEAF_LIST_DIMS
    if all(o.routed_experts is None and o.indexer_topk is None for o in paused):
        return paused, None
    return [dataclasses.replace(o, routed_experts=None, indexer_topk=None) for o in paused], None
