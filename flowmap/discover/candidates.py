"""From what every process saw to the seams: merge, fold nested calls, rank.

A candidate is a function whose arguments or result carried a tensor. Most
are helpers and internal methods; folding keeps the hand-overs:

- a call with no candidate around it is kept (a top-level hand-over);
- a method of the same object as an enclosing candidate is kept: the payload
  moves between one object's methods (TRL's `GRPOTrainer`);
- a call that returns, unchanged, what its caller then returns is folded into
  the caller (`compute_loss` -> `_compute_loss`);
- inside a folded call, everything is folded;
- a call into another package than the enclosing candidate's is folded (a
  library working on the payload);
- a call that returns its own arguments' tensors (a pass-through) is folded;
- a call that carries part of the enclosing candidate's payload is folded when
  it lives in another module, or returns nothing new (`push` -> `load_weights`);
- a closure or lambda called inside a seam is part of it;
- a `torch.nn.Module` method inside another one is the model's own computing;
- a private method (`Engine._sample_tokens`) that only its own object's methods
  call, several times per call of the one that calls it, is that method's inner
  loop, not a hand-over between components: folded into it, and the table says
  why.

What is left is ranked by bytes per step, then by calls.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from flowmap.discover.naming import KERNEL
from flowmap.discover.record import NOTHING_NEW, PASS_THROUGH, SAME_SELF, SHARES, CodeStats


@dataclass(slots=True)
class Function:
    """One function, merged across processes."""

    key: str
    module: str
    qualname: str
    argnames: list[str]
    stats: CodeStats
    target: str | None = None
    why_not: str | None = None
    processes: int = 0
    bytes_per_step: float = 0.0
    kernel: bool = False  # an autograd kernel: dropped, with everything it calls
    nn_module: bool = False  # a method of a torch.nn.Module
    ignores_args: bool = False  # its body never reads its arguments
    ray: bool = False  # a Ray task or actor method (recorded by the Ray integration)

    @property
    def sink(self) -> str | None:
        """Why this function is where data ends rather than a hand-over; None when it is not.

        Two patterns, whatever the names: a body that never reads its arguments
        and returns nothing (a disabled tracker's `log`, a null writer), and a
        function given only scalar tensors that returns nothing (a metrics
        logger's `log({"loss": loss})`). Neither passes a payload on.
        """
        if self.stats.result_calls:
            return None
        if self.ignores_args:
            return "does nothing with its arguments"
        tensors = [shape for kind, _, shape in self.stats.leaves.values() if kind in ("tensor", "ndarray")]
        if tensors and all(_numel(shape) <= 1 for shape in tensors):
            return "takes only scalars and returns nothing: a logging or metrics sink"
        return None

    @property
    def named(self) -> bool:
        return self.target is not None

    @property
    def package(self) -> str:
        return self.module.split(".", 1)[0]


def _numel(shape: list[Any]) -> int:
    """Elements of a recorded shape; a dim that varied counts at its largest."""
    n = 1
    for d in shape:
        n *= max(d) if isinstance(d, list) else int(d)
    return n


@dataclass(slots=True)
class Candidate:
    """A kept seam candidate, ready for the table and the seam map."""

    fn: Function
    folded: Counter[str] = field(default_factory=Counter)  # folded key -> calls
    helpers: dict[str, str] = field(default_factory=dict)  # folded private helper -> why

    @property
    def calls(self) -> int:
        return self.fn.stats.calls

    @property
    def bytes_in_per_call(self) -> float:
        return self.fn.stats.call_bytes / max(1, self.calls)

    @property
    def bytes_out_per_call(self) -> float:
        return self.fn.stats.result_bytes / max(1, self.calls)

    @property
    def args(self) -> list[str]:
        """Arguments that carried data, in signature order."""
        seen = self.fn.stats.args
        return [a for a in self.fn.argnames if seen.get(a)] + \
            sorted(a for a in seen if a not in self.fn.argnames)

    @property
    def result(self) -> bool:
        return self.fn.stats.result_calls > 0

    @property
    def tensor_leaves(self) -> list[str]:
        return [p for p, (kind, _, _) in self.fn.stats.leaves.items()
                if kind in ("tensor", "ndarray")]


@dataclass(slots=True)
class Discovery:
    """The outcome: kept seams, the ones that cannot be targets, and the run's figures."""

    seams: list[Candidate]
    unnamed: list[Candidate]  # kept, but no seam map can name them (with the reason)
    sinks: list[Candidate]  # kept, but where data ends (`Function.sink`): ranked out of the map
    below_min_bytes: int
    functions: dict[str, Function]
    processes: int
    watched_calls: int
    steps: int
    stop_reasons: list[str]


def merge(records: list[dict[str, Any]]) -> dict[str, Function]:
    """One Function per `module:qualname`, over every process's record."""
    out: dict[str, Function] = {}
    for rec in records:
        nsteps = max(1, len(rec.get("steps", ())))
        for key, f in rec["functions"].items():
            stats = CodeStats.from_json(f["stats"])
            fn = out.get(key)
            if fn is None:
                fn = out[key] = Function(key, f["module"], f["qualname"], list(f["argnames"]),
                                         CodeStats())
            fn.stats.merge(stats)
            fn.processes += 1
            fn.bytes_per_step += (stats.call_bytes + stats.result_bytes) / nsteps
            fn.kernel = fn.kernel or f.get("why_not") == KERNEL
            fn.nn_module = fn.nn_module or bool(f.get("nn_module"))
            fn.ignores_args = fn.ignores_args or bool(f.get("ignores_args"))
            fn.ray = fn.ray or bool(f.get("ray"))
            if fn.target is None and f.get("target"):
                fn.target, fn.why_not = f["target"], None
            elif fn.target is None and fn.why_not is None:
                fn.why_not = f.get("why_not")
    return out


def analyse(records: list[dict[str, Any]], min_bytes: int = 0) -> Discovery:
    functions = merge(records)
    folding = _Folding(functions)
    kept: dict[str, Candidate] = {}
    for key in sorted(folding.cands):
        if folding.keeper(key) == key:
            kept[key] = Candidate(functions[key])
    for key in sorted(folding.cands):
        into = folding.keeper(key)
        if into != key and into in kept:
            kept[into].folded[key] += functions[key].stats.calls
            if key in folding.helpers:
                kept[into].helpers[key] = folding.helpers[key]
    ranked = sorted(kept.values(), key=lambda c: (-c.fn.bytes_per_step, -c.calls, c.fn.key))
    big = [c for c in ranked if c.fn.stats.max_bytes >= min_bytes]
    handovers = [c for c in big if c.fn.sink is None]
    return Discovery(
        seams=[c for c in handovers if c.fn.target],
        unnamed=[c for c in handovers if not c.fn.target],
        sinks=[c for c in big if c.fn.sink is not None],
        below_min_bytes=len(ranked) - len(big),
        functions=functions,
        processes=len(records),
        watched_calls=sum(r.get("calls", 0) for r in records),
        steps=max((len(r.get("steps", ())) for r in records), default=0),
        stop_reasons=sorted({r.get("stop_reason", "") for r in records} - {""}),
    )


DROPPED = ""  # the keeper of an autograd kernel and of everything it calls


class _Folding:
    """Decides, per candidate, whether it is kept or folded into an enclosing one.

    Functions no seam map can name (closures, lambdas, `__main__`) are
    transparent: a decorator's wrapper stands between a method and its
    caller, and the payload is followed through it; a wrapper that returns its
    inner call's result unchanged is folded into that call.
    """

    def __init__(self, functions: dict[str, Function]) -> None:
        self.functions = functions
        self.cands = {k for k, f in functions.items() if f.stats.candidate_calls > 0}
        self.solid = {k for k in self.cands if functions[k].named or functions[k].kernel}
        self.wraps: dict[str, Counter[str]] = {}  # caller -> nested calls whose result it returned
        for k in self.cands:
            for parent, n in functions[k].stats.delegated_to.items():
                self.wraps.setdefault(parent, Counter())[k] += n
        self.memo: dict[str, str] = {}  # key -> its keeper (itself when kept)
        self.busy: set[str] = set()
        self.helpers: dict[str, str] = {}  # private helpers folded into their caller: why

    def keeper(self, key: str) -> str:
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return key  # recursion through the call graph: take it as kept
        self.busy.add(key)
        try:
            into = self._decide(key)
        finally:
            self.busy.discard(key)
        self.memo[key] = into
        return into

    def _decide(self, key: str) -> str:
        fn = self.functions[key]
        if fn.kernel:
            return DROPPED
        half = fn.stats.candidate_calls / 2
        inner = self.wraps.get(key, Counter())
        inner.pop(key, None)
        if key not in self.solid and inner and sum(inner.values()) >= half:
            return self.keeper(inner.most_common(1)[0][0])
        for parent, n in fn.stats.delegated_to.most_common(1):
            if parent in self.solid and parent != key and n >= half:
                return self.keeper(parent)
        caller = self._private_helper_of(key)
        if caller is not None:
            return self.keeper(caller)
        votes: Counter[str] = Counter()
        for chain, n in fn.stats.contexts.items():
            votes[self._judge(key, chain)] += n
        if not votes or votes[key] * 2 >= sum(votes.values()):
            return key
        return max((k for k in votes if k != key), key=lambda k: (votes[k], k))

    def _private_helper_of(self, key: str) -> str | None:
        """The method whose inner loop `key` is, when `key` is a private method that only
        methods of its own object call, more often than the one that calls it does."""
        fn = self.functions[key]
        owner, _, name = fn.qualname.rpartition(".")
        if not owner or not name.startswith("_") or name.startswith("__"):
            return None
        callers: Counter[str] = Counter()
        for chain, n in fn.stats.contexts.items():
            if not chain or not chain[0][1] & SAME_SELF:
                return None  # called from outside its object, or from no watched code
            callers[chain[0][0]] += n
        if len(callers) != 1:
            return None
        caller = next(iter(callers))
        outer = self.functions.get(caller)
        if outer is None or caller not in self.solid or caller == key:
            return None
        if fn.stats.candidate_calls <= outer.stats.candidate_calls:
            return None  # once per call of its caller: a stage, as TRL's trainer has them
        per_call = fn.stats.candidate_calls / max(1, outer.stats.candidate_calls)
        self.helpers[key] = (f"a private method called only from inside {owner} "
                             f"({per_call:.3g} calls per call of {outer.qualname})")
        return caller

    def _judge(self, key: str, chain: tuple[tuple[str, int], ...]) -> str:
        """The keeper this call folds into, or `key` itself when the call is kept."""
        around = [(a, f) for a, f in chain if a in self.solid]
        if not around or around[0][0] == key:
            return key
        outer, flags = around[0]
        into = self.keeper(outer)
        if into == DROPPED:
            return DROPPED
        if key not in self.solid:
            return into  # a closure or lambda called inside a seam is part of it
        if self.functions[key].nn_module and any(self.functions[a].nn_module for a, _ in around):
            return into  # a layer of the model inside the model's call
        if any(f & SAME_SELF for _, f in around):
            return key
        if into != outer:
            return into
        me, them = self.functions[key], self.functions[outer]
        if me.package != them.package or flags & PASS_THROUGH:
            return outer
        if flags & SHARES and (me.module != them.module or flags & NOTHING_NEW):
            return outer
        return key
