"""Rollout: trajectories in flight across the engine instances, turn by turn.

The unit the driver dispatches is one trajectory. A trajectory becomes engine
requests one turn at a time: its first turn goes to the engine with the most
free capacity; each finished turn goes to the environment, whose reply (or
replies, when it forks) go back to the same engine as new requests (same
engine: its prefix cache already holds the context). A trajectory is
collected on its own the moment its last branch finishes; nobody waits for
the slowest trajectory of a batch.

Requests withdrawn by a weight sync come back here (`resubmit`): their partial
output is kept, with its behaviour log-probs, and the rest is requested from
the updated engine, so no request and no token is lost.

With MoE/DSA the engines return each request's replay rows (`routed_experts`,
`indexer_topk`, from position 0: a later turn's rows repeat its prefix). They
are folded per turn (a resubmitted request keeps the rows recorded before the
pause), kept on the tree's turn node, and folded again per leaf when the
trajectory is flattened (`tree.leaf_replays`). With `turn_replay` (the payload
transport) each `turn` hop to the environment carries the turn's rows too: the
resend cost of shipping the whole prefix's rows with every turn.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from torch import Tensor

import flowmap
from flowmap.trainer.engine.llm_engine import LLMEngine, continuation
from flowmap.trainer.engine.sampling import SamplingParams
from flowmap.trainer.engine.sequence import RequestOutput
from flowmap.trainer.env import CountingEnv, TurnRequest
from flowmap.trainer.replay import REPLAY_DIMS, Replay, concat_replay
from flowmap.trainer.replay_field import ReplayField
from flowmap.trainer.task import EnvGroup
from flowmap.trainer.tree import LeafTrajectory, TrajectoryTree, flatten, leaf_replays


@dataclass(slots=True)
class GenerationRequest:
    """driver -> rollout/i: one turn to generate (the payload of a `request` hop)."""

    request_id: str
    traj_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    temperature: float


@dataclass  # not slotted: see replay_field.py
class TurnOutput:
    """rollout/i -> env: one finished model turn."""

    request_id: str
    branch_id: str
    output_token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    weight_version: int
    # As a payload-transport engine returns the turn: the rows of its whole context,
    # (context + output - 1, L, k), prefix rows again. Never a handle.
    replay: ReplayField[None] = ReplayField("")


@dataclass(slots=True)
class _Pending:
    """A request the engine is working on, and what came before it if it was resubmitted."""

    turn: TurnRequest
    engine: int
    params: SamplingParams
    tokens: list[int] = field(default_factory=list)  # output withdrawn by earlier pauses
    logprobs: list[float] = field(default_factory=list)
    # Replay rows of the withdrawn requests, from position 0 (None without MoE/DSA).
    routed_experts: Tensor | None = None  # (rows, L, k)
    indexer_topk: Tensor | None = None  # (rows, L, K)

    def fold(self, out: RequestOutput) -> Replay:
        """This request's rows after the earlier ones (`concat_replay`): the turn's rows so far."""
        return Replay(concat_replay(self.routed_experts, out.routed_experts),
                      concat_replay(self.indexer_topk, out.indexer_topk))


@dataclass(slots=True)
class _InFlight:
    tree: TrajectoryTree
    open_branches: int  # branches still generating; the trajectory is done at 0


@dataclass(slots=True)
class Finished:
    """A trajectory whose every branch is done, flattened, with the engine that ran it."""

    traj_id: str
    uid: str
    engine: int
    leaves: list[LeafTrajectory]
    num_generated_tokens: int
    replays: list[Replay | None] = field(default_factory=list)  # per leaf; None without MoE/DSA


class RolloutManager:
    """Owns the in-flight trajectories; the driver decides how many, this decides where."""

    def __init__(
        self, engines: list[LLMEngine], env: CountingEnv, params: SamplingParams,
        *, turn_replay: bool = False,
    ) -> None:
        self.engines = engines
        self.env = env
        self.params = params
        self.turn_replay = turn_replay  # `turn` hops carry the turn's replay rows (payload)
        self.in_flight: dict[str, _InFlight] = {}
        self.pending: dict[str, _Pending] = {}
        # Requests a weight sync withdrew, by engine, until resubmitted (survives a failed sync).
        self.held: dict[int, list[RequestOutput]] = {}
        self._request_ids = itertools.count()
        self.num_generated_tokens = 0

    # -- dispatch -------------------------------------------------------------------

    @property
    def num_in_flight(self) -> int:
        return len(self.in_flight)

    def free_capacity(self) -> int:
        return sum(e.free_capacity() for e in self.engines)

    def dispatch(self, group: EnvGroup, sample_index: int) -> str:
        """Start one trajectory of `group` on the engine with the most room; returns its id."""
        engine = max(range(len(self.engines)), key=lambda i: (self.engines[i].free_capacity(), -i))
        tree, first = self.env.reset(group, sample_index)
        self.in_flight[tree.traj_id] = _InFlight(tree, 1)
        self._submit(first, engine, src="driver", name="request")
        return tree.traj_id

    def _submit(self, turn: TurnRequest, engine: int, *, src: str, name: str) -> None:
        request_id = f"{turn.branch_id}#{next(self._request_ids)}"
        request = GenerationRequest(
            request_id, turn.traj_id, turn.prompt_token_ids, self.params.max_tokens,
            self.params.temperature,
        )
        flowmap.hop(src, f"rollout/{engine}", request, name=name, items=[turn.branch_id])
        self.pending[request_id] = _Pending(turn, engine, self.params)
        self.engines[engine].add_request(request_id, turn.prompt_token_ids, self.params)

    # -- stepping -------------------------------------------------------------------

    def has_work(self) -> bool:
        return any(e.has_unfinished_requests() for e in self.engines)

    def step(self) -> list[Finished]:
        """One scheduler step on every busy engine; the trajectories that completed in it."""
        done: list[Finished] = []
        for i, engine in enumerate(self.engines):
            if not engine.has_unfinished_requests():
                continue
            with flowmap.owner(f"rollout/{i}"):
                for out in engine.step():
                    done += self._on_turn(out)
        return done

    def _on_turn(self, out: RequestOutput) -> list[Finished]:
        pending = self.pending.pop(out.request_id)
        turn = pending.turn
        tokens = pending.tokens + out.output_token_ids
        logprobs = pending.logprobs + out.logprobs
        self.num_generated_tokens += len(out.output_token_ids)
        src = f"rollout/{pending.engine}"
        replay = pending.fold(out)
        recorded = replay.routed_experts is not None or replay.indexer_topk is not None
        args = (out.request_id, turn.branch_id, tokens, logprobs, out.finish_reason,
                out.weight_version)
        if self.turn_replay and recorded:
            with_rows = TurnOutput(*args, replay=replay)
            flowmap.hop(src, "env", with_rows, name="turn", items=[turn.branch_id],
                        dims=REPLAY_DIMS)
        else:
            flowmap.hop(src, "env", TurnOutput(*args), name="turn", items=[turn.branch_id])
        state = self.in_flight[turn.traj_id]
        tree = state.tree
        node = tree.add(
            turn.parent, turn.branch_id, tokens, generated=True, logprobs=logprobs,
            expected=turn.expected, weight_version=out.weight_version,
            replay=replay if recorded else None,
        )
        with flowmap.owner("env"):
            replies = self.env.step(tree, node)
            for reply in replies:
                self._submit(reply, pending.engine, src="env", name="env_reply")
        state.open_branches += len(replies) - 1
        if state.open_branches:
            return []
        del self.in_flight[turn.traj_id]
        leaves = flatten(tree)
        generated = sum(len(n.tokens) for n in tree.nodes if n.generated)
        return [Finished(tree.traj_id, tree.uid, pending.engine, leaves, generated,
                         leaf_replays(tree))]

    # -- weight sync support -----------------------------------------------------------

    def branch_of(self, request_id: str) -> str:
        return self.pending[request_id].turn.branch_id

    def hold(self, engine: int, paused: list[RequestOutput]) -> None:
        """Keep requests a weight sync withdrew from `engine` until `resubmit_held`."""
        self.held.setdefault(engine, []).extend(paused)

    def resubmit_held(self, engine: int) -> int:
        """Resubmit what `engine` had withdrawn (held across failed syncs); returns how many."""
        paused = self.held.pop(engine, [])
        self.resubmit(engine, paused)
        return len(paused)

    def resubmit(self, engine: int, paused: list[RequestOutput]) -> None:
        """Hand withdrawn requests back to `engine`: their output so far becomes prompt."""
        for out in paused:
            pending = self.pending.pop(out.request_id)
            prompt, params = continuation(out, pending.params)
            request_id = f"{pending.turn.branch_id}#{next(self._request_ids)}"
            request = GenerationRequest(
                request_id, pending.turn.traj_id, prompt, params.max_tokens, params.temperature
            )
            flowmap.hop(
                "weight_sync", f"rollout/{engine}", request, name="resubmit",
                items=[pending.turn.branch_id],
            )
            replay = pending.fold(out)
            self.pending[request_id] = _Pending(
                pending.turn, engine, params,
                pending.tokens + out.output_token_ids, pending.logprobs + out.logprobs,
                replay.routed_experts, replay.indexer_topk,
            )
            self.engines[engine].add_request(request_id, prompt, params)
