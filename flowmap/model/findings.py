"""Findings: where bytes could be saved, ranked by the bytes at stake per step.

Each detector reads the run (aggregates, and hops where identity matters) and
returns findings with a one-sentence suggestion. flowmap sees metadata only —
shapes, dtypes, sizes, storage addresses, item ids — never tensor values, so
every figure here is either counted from the trace or an estimate whose method
is written in docs/findings.md. Detectors that look at a pipeline stage work
on roles (`rollout`, not `rollout/0`) so eight engines give one finding, which
lists every owner-level seam involved.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from flowmap.model.aggregate import LeafStats, SeamKey, SeamStats, role_of, seam_label
from flowmap.model.run import paused_gc
from flowmap.units import fmt_bytes

if TYPE_CHECKING:
    from flowmap.model.reader import Hop, Leaf
    from flowmap.model.run import Run

HEAVIEST = "heaviest"
PASS_THROUGH = "pass_through"
DROPPED = "dropped"
PADDING = "padding"
DUPLICATE = "duplicate"
SERIALISATION = "serialisation"
KINDS = (HEAVIEST, PASS_THROUGH, DROPPED, PADDING, DUPLICATE, SERIALISATION)

NUM_HEAVIEST = 3
# Detectors that can fire once per seam keep their heaviest few: a findings
# list is a to-do list, not a second copy of the seam table.
MAX_PER_KIND = 5
SERIALISED = ("pickle", "rpc", "shm", "collective")
ARRAY_KINDS = ("tensor", "ndarray")
# Bytes per element, for turning a leaf's bytes back into elements (tokens).
ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "half": 2,
    "int32": 4, "uint32": 4, "float32": 4, "float": 4,
    "int64": 8, "uint64": 8, "float64": 8, "double": 8, "long": 8, "complex64": 8,
    "complex128": 16,
}
RoleKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Finding:
    """One place where bytes could be saved.

    `seams` are owner-level seam labels (`"src -> dst : name"`) as in
    `Run.seams`; `bytes_per_step` is what is at stake (an estimate for
    padding, see docs/findings.md); `message` is one sentence saying what to do.
    """

    kind: str
    seams: list[str]
    bytes_per_step: float
    message: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bytes_per_step"] = round(self.bytes_per_step, 3)
        return d


def findings(run: Run) -> list[Finding]:
    """Every finding of the run, most bytes per step first (ties by kind, then seams)."""
    out: list[Finding] = []
    with paused_gc():  # the detectors build many small records that hold no cycles
        for detect in (_heaviest, _pass_through, _dropped, _padding, _duplicates, _serialisation):
            found = sorted(detect(run), key=_rank)
            out.extend(f for f in found[:MAX_PER_KIND] if f.bytes_per_step > 0)
    return sorted(out, key=_rank)


def _rank(f: Finding) -> tuple[float, str, list[str]]:
    return (-f.bytes_per_step, f.kind, f.seams)


def _per(n: float) -> str:
    return f"{fmt_bytes(n)}/step"


def _role_key(key: SeamKey) -> RoleKey:
    return (role_of(key[0]), role_of(key[1]), key[2])


def _role_label(key: RoleKey) -> str:
    return f"{key[0]} -> {key[1]} : {key[2]}"


def _role_seams(run: Run) -> dict[RoleKey, list[SeamStats]]:
    out: dict[RoleKey, list[SeamStats]] = defaultdict(list)
    for key, s in run.seams.items():
        out[_role_key(key)].append(s)
    return dict(out)


# -- heaviest ------------------------------------------------------------------


def _heaviest(run: Run) -> list[Finding]:
    total = sum(s.total_bytes for s in run.seams.values())
    out = []
    for s in list(run.seams.values())[:NUM_HEAVIEST]:
        if not s.total_bytes:
            continue
        share = 100 * s.total_bytes / total
        leaf = s.leaves[0] if s.leaves else None
        where = (f"its largest leaf `{leaf.path}` ({_leaf_text(leaf)}) is where a handle, a "
                 "narrower dtype or sending only the rows the receiver reads would pay most"
                 if leaf else "check that the receiver needs all of it")
        out.append(Finding(
            HEAVIEST, [s.label], s.bytes_per_step_mean,
            f"`{s.label}` carries {_per(s.bytes_per_step_mean)} ({share:.0f}% of all bytes "
            f"moved); {where}.",
        ))
    return out


def _leaf_text(leaf: LeafStats) -> str:
    dims = "×".join(f"{d[0]}..{d[1]}" if isinstance(d, list) else str(d) for d in leaf.shape)
    dtype = "|".join(leaf.dtypes) or leaf.kind
    return f"{dtype}[{dims}]" if leaf.shape else dtype


# -- pass-through ----------------------------------------------------------------


def _pass_through(run: Run) -> list[Finding]:
    """A payload that enters a middle role and leaves it unchanged.

    Evidence, strongest first: the leaving hop's storages all arrived at that
    role earlier in the same process (the very same tensors travel on); or the
    leaf schema in and out is the same once list folding (`[*]`) is ignored,
    and there were enough arrivals to feed the departures.
    """
    groups = _role_seams(run)
    matched = _storage_matches(run)
    signature = {k: _signature(v) for k, v in groups.items()}
    out = []
    middles: set[str] = set()
    for a, in_seams in groups.items():
        for b, out_seams in groups.items():
            middle = a[1]
            if b[0] != middle or a[0] == middle or b[1] == middle or a[0] == b[1]:
                continue
            if matched.get((a, b)):
                evidence, bps = "same storage", matched[(a, b)] / run.num_steps
            elif signature[a] and signature[a] == signature[b] and _fed_by(in_seams, out_seams):
                evidence = "same leaf schema"
                bps = min(_bps(in_seams), _bps(out_seams))
            else:
                continue
            labels = sorted(s.label for s in in_seams + out_seams)
            middles.add(middle)
            out.append(Finding(
                PASS_THROUGH, labels, bps,
                f"`{a[2]}` passes through {middle} unchanged ({evidence}) on its way from "
                f"{a[0]} to {b[1]}: send it {a[0]} -> {b[1]} directly, or hand {middle} a "
                f"handle instead of {_per(bps)}.",
            ))
    return out + _leaf_chains(run, middles)


# A leaf collated into a batch gains a leading `batch` dim; it is still the same array.
COLLATED_DIMS = ("batch",)
LeafKey = tuple[str, str, tuple[str, ...]]  # (leaf name, dtype, dims without `batch`)


def _leaf_chains(run: Run, covered: set[str]) -> list[Finding]:
    """An array leaf with declared dims carried unchanged through a chain of middle roles.

    The whole-payload pairs above miss a leaf that is repacked on the way (a
    list of trajectories collated into a batch, a batch cut into micro-batches):
    the payload changes, the array does not. Leaves whose hops named their dims
    are matched across seams by name (`[*].indexer_topk` is `indexer_topk`),
    dtype and dim names (a leading `batch` ignored); a role that receives such a
    leaf from one role and sends it to another is a middle. One finding per
    leaf, unless every middle is already a whole-payload pass-through. At
    stake: the leaf's bytes per step on the seams into the middles, which a
    handle would keep off them; the final consumers still read theirs.
    """
    edges: dict[LeafKey, dict[tuple[str, str], list[tuple[str, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for key, s in run.seams.items():
        for leaf in s.leaves:
            if not leaf.dims or leaf.kind not in ARRAY_KINDS or not leaf.total_bytes:
                continue
            dims = tuple(d for i, d in enumerate(leaf.dims) if i or d not in COLLATED_DIMS)
            lk = (_leaf_name(leaf.path), "|".join(leaf.dtypes), dims)
            edges[lk][(role_of(key[0]), role_of(key[1]))].append(
                (s.label, leaf.total_bytes / run.num_steps))
    out = []
    for (name, _, dims), by_role in sorted(edges.items()):
        middles = _middles(set(by_role))
        if not middles or middles <= covered:
            continue
        into = {e: v for e, v in by_role.items() if e[1] in middles}
        onward = {e: v for e, v in by_role.items() if e[0] in middles}
        bps = sum(b for v in into.values() for _, b in v)
        labels = sorted({label for v in (*into.values(), *onward.values()) for label, _ in v})
        route, ordered = _route(set(into) | set(onward), middles)
        out.append(Finding(
            PASS_THROUGH, labels, bps,
            f"`{name}` ({', '.join(dims)}) rides {' -> '.join(route)} unchanged (same leaf, "
            f"dtype and dims on every hop, only repacked): keep it in a store where it is made "
            f"and pass {' and '.join(ordered)} a handle instead, so the last hop reads just the "
            f"rows it needs and {_per(bps)} stay off the middle roles.",
        ))
    return out


def _middles(role_edges: set[tuple[str, str]]) -> set[str]:
    """Roles that receive the leaf from one role and send it on to another."""
    out = set()
    for src, mid in role_edges:
        if src == mid:
            continue
        if any(a == mid and b not in (mid, src) for a, b in role_edges):
            out.add(mid)
    return out


def _route(role_edges: set[tuple[str, str]], middles: set[str]) -> tuple[list[str], list[str]]:
    """(["rollout", "ready_buffer", "batcher", "reward, trainer"], the middles in that order)."""
    sources = sorted({a for a, b in role_edges if a not in middles})
    sinks = sorted({b for a, b in role_edges if b not in middles})
    order, frontier, seen = [], set(sources), set(sources)
    while frontier:
        nxt = sorted({b for a, b in role_edges if a in frontier and b in middles and b not in seen})
        order += nxt
        seen.update(nxt)
        frontier = set(nxt)
    order += sorted(middles - set(order))
    return [", ".join(sources), *order, ", ".join(sinks)], order


def _fed_by(in_seams: list[SeamStats], out_seams: list[SeamStats]) -> bool:
    """Could every departure be an arrival sent on (fan-out allowed)?

    Weights that arrive once and then leave every step, updated in place, have
    the same schema in and out but are state, not a payload passing through.
    """
    hops_in = sum(s.hops for s in in_seams)
    hops_out = sum(s.hops for s in out_seams)
    return hops_out <= hops_in * len({s.dst for s in out_seams})


def _bps(seams: list[SeamStats]) -> float:
    return sum(s.bytes_per_step_mean for s in seams)


def _norm_path(path: str) -> str:
    return ".".join(p for p in path.replace("[*]", ".").split(".") if p)


def _signature(seams: list[SeamStats]) -> frozenset[tuple[str, str, str]]:
    """What a payload is made of, ignoring sizes and list folding; empty if it holds no bytes."""
    sig = frozenset(
        (_norm_path(leaf.path), leaf.kind, "|".join(leaf.dtypes))
        for s in seams for leaf in s.leaves if leaf.total_bytes
    )
    return sig if any(k in ARRAY_KINDS or k in ("bytes", "str") for _, k, _ in sig) else frozenset()


def _storage_matches(run: Run) -> dict[tuple[RoleKey, RoleKey], int]:
    """Bytes of hops leaving a role whose storages all arrived at that role, by seam pair.

    An arrival is matched once per outgoing owner-level seam: a buffer that
    arrives once and then leaves every step (weights updated in place, keeping
    their address) is state, not a payload passing through — and a pair
    counts only when most hops of the outgoing seams match. Storage ids are
    per process, so only hops recorded by one pid are compared.
    """
    # (pid, role) -> storage id -> its arrival: [role-level seam it came by, seams it left by]
    arrived: dict[tuple[int, str], dict[int, list[Any]]] = defaultdict(dict)
    nbytes: dict[tuple[RoleKey, RoleKey], int] = defaultdict(int)
    nhops: dict[tuple[RoleKey, RoleKey], int] = defaultdict(int)
    role_keys = {k: _role_key(k) for k in run.seams}
    for h in run.hops:
        if not h.storages:
            continue
        seam = (h.src, h.dst, h.name)
        key = role_keys[seam]
        here = arrived.get((h.pid, key[0]))
        if here and h.storages[0] in here:
            records = [here.get(sid) for sid in h.storages]
            if all(r is not None and (r[1] is None or seam not in r[1]) for r in records):
                pair = (records[0][0], key)  # type: ignore[index]
                nbytes[pair] += h.nbytes
                nhops[pair] += 1
                for r in records:
                    if r[1] is None:  # type: ignore[index]
                        r[1] = set()  # type: ignore[index]
                    r[1].add(seam)  # type: ignore[index]
        arrival = [key, None]  # shared by the hop's storages: one record per arrival
        arrived[(h.pid, key[1])].update(dict.fromkeys(h.storages, arrival))
    hops_out: dict[RoleKey, int] = defaultdict(int)
    for k, st in run.seams.items():
        hops_out[role_keys[k]] += st.hops
    return {pair: n for pair, n in nbytes.items() if 2 * nhops[pair] >= hops_out[pair[1]]}


# -- dropped -------------------------------------------------------------------


def _dropped(run: Run) -> list[Finding]:
    """Bytes spent carrying items that were later discarded, by drop reason and role.

    A hop's bytes are shared evenly among the items it carried; only hops up to
    the drop count.
    """
    first_drop: dict[Any, tuple[int, str, str]] = {}
    for d in run.drops:
        for item in d.items:
            first_drop.setdefault(item, (d.t_ns, role_of(d.owner), d.reason))
    if not first_drop:
        return []
    spent: dict[tuple[str, str], float] = defaultdict(float)
    seams: dict[tuple[str, str], set[SeamKey]] = defaultdict(set)
    for h in run.hops:
        for item in h.items:
            drop = first_drop.get(item)
            if drop is not None and h.t_ns <= drop[0]:
                spent[(drop[2], drop[1])] += h.nbytes / len(h.items)
                seams[(drop[2], drop[1])].add(h.seam)
    items: defaultdict[tuple[str, str], int] = defaultdict(int)
    for _, owner, reason in first_drop.values():
        items[(reason, owner)] += 1
    out = []
    for (reason, owner), n in sorted(items.items()):
        bps = spent.get((reason, owner), 0.0) / run.num_steps
        share = 100 * n / max(1, run.items.total)
        out.append(Finding(
            DROPPED, sorted(seam_label(k) for k in seams.get((reason, owner), ())), bps,
            f"{n} items ({share:.0f}% of all) were dropped as `{reason}` at {owner} after "
            f"{_per(bps)} had carried them there: {_drop_advice(reason)}.",
        ))
    return out


def _drop_advice(reason: str) -> str:
    if "stale" in reason.lower() or "off" in reason.lower():
        return ("keep fewer in flight (a lower watermark) or accept more staleness, so less is "
                "generated only to be thrown away")
    return "filter them before the heaviest hop they ride, or produce fewer"


# -- padding -------------------------------------------------------------------


def _padding(run: Run) -> list[Finding]:
    """Bytes spent on padding in leaves that ride with a mask of the same leading shape.

    The padded fraction comes from a counter the pipeline reports
    (`padding/<payload>` or `padding/<payload>/<mask path>`, 0..1), else it is
    estimated from the unpadded leaves that carried the same items earlier
    (see `_UnpaddedLengths`).
    """
    masked = {key: groups for key, s in run.seams.items() if (groups := _mask_groups(s))}
    if not masked:
        return []
    lengths = _UnpaddedLengths(run, set(masked))
    found: dict[RoleKey, list[Any]] = {}
    for key, groups in masked.items():
        s = run.seams[key]
        for mask, leaves in groups:
            fraction, method = _counter_fraction(run, s.name, mask.path), "counter"
            if fraction is None:
                fraction, method = lengths.padded_fraction(s, leaves), "estimate"
            if fraction is None:
                continue
            masked_bps = sum(leaf.total_bytes for leaf in leaves) / run.num_steps
            entry = found.setdefault(_role_key(key), [0.0, set(), 0.0, set()])
            entry[0] += masked_bps * fraction
            entry[1].add(s.label)
            entry[2] += masked_bps
            entry[3].add(method)
    out = []
    for rk, (bps, labels, masked_bps, methods) in found.items():
        how = "reported" if methods == {"counter"} else "estimated"
        pct = 100 * bps / masked_bps if masked_bps else 0.0
        out.append(Finding(
            PADDING, sorted(labels), bps,
            f"`{_role_label(rk)}` spends about {_per(bps)} on padding ({pct:.0f}% of its masked "
            f"leaves, {how}): pack sequences (cu_seqlens) or pad to the batch's longest, not "
            "a fixed length.",
        ))
    return out


def _is_mask(leaf: LeafStats) -> bool:
    name = _norm_path(leaf.path).rsplit(".", 1)[-1].lower()
    return "mask" in name and leaf.kind in ARRAY_KINDS and len(leaf.shape) >= 2


def _mask_groups(s: SeamStats) -> list[tuple[LeafStats, list[LeafStats]]]:
    """(mask, the array leaves whose shape starts with the mask's, itself included) per mask."""
    out = []
    taken: set[str] = set()
    for mask in sorted((leaf for leaf in s.leaves if _is_mask(leaf)), key=lambda m: m.path):
        prefix = mask.shape
        leaves = [leaf for leaf in s.leaves if leaf.path not in taken and leaf.kind in ARRAY_KINDS
                  and leaf.shape[: len(prefix)] == prefix]
        taken.update(leaf.path for leaf in leaves)
        out.append((mask, leaves))
    return out


def _counter_fraction(run: Run, name: str, mask_path: str) -> float | None:
    for counter in (f"padding/{name}/{mask_path}", f"padding/{name}"):
        c = run.counters.get(counter)
        if c is not None:
            return min(1.0, max(0.0, c.mean))
    return None


SCALAR_KINDS = ("int", "float", "bool")


def _leaf_name(path: str) -> str:
    """`[*].batch.input_ids[*]` -> `input_ids`: what a field is called whatever wraps it."""
    return _norm_path(path).rsplit(".", 1)[-1]


def _sequences(leaves: tuple[Leaf, ...]) -> list[tuple[str, float]]:
    """(name, elements) of the leaves that hold sequences unpadded.

    A 1-D tensor or array (`input_ids [L]`), or a folded list of numbers
    (`[*].response_token_ids[*]`, whose count is its number of elements).
    """
    out = []
    for leaf in leaves:
        if leaf.kind in ARRAY_KINDS and len(leaf.shape) == 1 and leaf.dtype in ITEMSIZE:
            out.append((_leaf_name(leaf.path), leaf.nbytes / ITEMSIZE[leaf.dtype]))
        elif leaf.kind in SCALAR_KINDS and leaf.path.endswith("[*]"):
            out.append((_leaf_name(leaf.path), float(leaf.count)))
    return out


class _UnpaddedLengths:
    """Real (unpadded) elements of the items each padded seam carries, read on other seams.

    A padded leaf `input_ids [B, T]` is matched by name with the unpadded
    sequences of the same items elsewhere (`input_ids [L]` of each
    trajectory, or a list `[*].input_ids[*]`); a hop's elements are shared
    evenly among its items, and the seam that saw the most of them is the
    evidence. A padded seam without item ids falls back to the seams into its
    sender. One pass over the hops, whatever the number of padded seams.
    """

    def __init__(self, run: Run, padded: set[SeamKey]) -> None:
        where: dict[Any, list[SeamKey]] = defaultdict(list)  # item -> padded seams carrying it
        self.has_items: set[SeamKey] = set()
        for h in run.hops:
            if h.items and (seam := (h.src, h.dst, h.name)) in padded:
                self.has_items.add(seam)
                for item in h.items:
                    where[item].append(seam)
        for item, seams in where.items():
            where[item] = sorted(set(seams))
        # padded seam -> (source seam, leaf name) -> real elements of its items
        self.real: dict[SeamKey, dict[tuple[SeamKey, str], float]] = defaultdict(
            lambda: defaultdict(float))
        self.totals: dict[tuple[SeamKey, str], float] = defaultdict(float)
        by_schema: dict[int, list[tuple[str, float]]] = {}  # schemas are shared tuples
        for h in run.hops:
            seqs = by_schema.get(id(h.leaves))
            if seqs is None:
                seqs = by_schema[id(h.leaves)] = _sequences(h.leaves)
            if not seqs:
                continue
            seam = (h.src, h.dst, h.name)
            for name, n in seqs:
                self.totals[(seam, name)] += n
            for item in h.items:
                for target in where.get(item, ()):
                    acc = self.real[target]
                    for name, n in seqs:
                        acc[(seam, name)] += n / len(h.items)

    def padded_fraction(self, s: SeamStats, leaves: list[LeafStats]) -> float | None:
        """1 - real/padded elements of the heaviest leaf with evidence; None without any."""
        evidence = self._evidence(s)
        for leaf in sorted(leaves, key=lambda x: (-x.total_bytes, x.path)):
            dtype = leaf.dtypes[0] if len(leaf.dtypes) == 1 else ""
            name = _leaf_name(leaf.path)
            real = max((n for (src, nm), n in evidence.items() if nm == name and src != s.key),
                       default=0.0)
            if dtype in ITEMSIZE and real > 0:
                padded = leaf.total_bytes / ITEMSIZE[dtype]
                return 1 - real / padded if real < padded else None
        return None

    def _evidence(self, s: SeamStats) -> dict[tuple[SeamKey, str], float]:
        if s.key in self.has_items:
            return self.real.get(s.key, {})
        return {k: n for k, n in self.totals.items() if k[0][1] == s.src and k[0][0] != s.src}


# -- duplicate copies ------------------------------------------------------------


def _duplicates(run: Run) -> list[Finding]:
    """One storage copied to several destinations at once (same process, same step).

    Storage ids are addresses: two hops from one sender in one step carrying
    the same ids carry the same bytes. Hops by reference (`ref`) copy nothing.
    """
    first: dict[tuple, Hop] = {}
    groups: dict[tuple, list[Hop]] = {}  # only keys seen more than once
    for h in run.hops:
        if h.storages and h.transport != "ref":
            when = h.step if h.step is not None else ("t", h.t_ns // 100_000_000)
            key = (h.pid, h.src, when, h.storages)
            seen = first.setdefault(key, h)
            if seen is not h:
                groups.setdefault(key, [seen]).append(h)
    extra: dict[RoleKey, float] = defaultdict(float)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    dests: dict[RoleKey, set[str]] = defaultdict(set)
    for group in groups.values():
        targets = {(h.dst, h.name) for h in group}
        if len(targets) < 2:
            continue
        rk = (role_of(group[0].src), "*", group[0].name)
        extra[rk] += sum(h.nbytes for h in group) - max(h.nbytes for h in group)
        labels[rk].update(seam_label(h.seam) for h in group)
        dests[rk].update(h.dst for h in group)
    out = []
    for rk, nbytes in extra.items():
        bps = nbytes / run.num_steps
        to = ", ".join(sorted(dests[rk]))
        out.append(Finding(
            DUPLICATE, sorted(labels[rk]), bps,
            f"The same `{rk[2]}` storage leaves {rk[0]} for {len(dests[rk])} destinations "
            f"({to}), {_per(bps)} in extra copies: slice it per destination if each reads a "
            "part, else share it once (shared memory, a broadcast) and pass handles.",
        ))
    return out


# -- serialisation ---------------------------------------------------------------


def _serialisation(run: Run) -> list[Finding]:
    """Bytes moved across processes, by role-level seam and transport."""
    moved: dict[tuple[SeamKey, str], int] = defaultdict(int)
    for h in run.hops:
        if h.transport in SERIALISED:
            moved[((h.src, h.dst, h.name), h.transport)] += h.nbytes
    by_role: dict[tuple[RoleKey, str], int] = defaultdict(int)
    labels: dict[tuple[RoleKey, str], set[str]] = defaultdict(set)
    for (key, transport), nbytes in moved.items():
        by_role[(_role_key(key), transport)] += nbytes
        labels[(_role_key(key), transport)].add(seam_label(key))
    out = []
    for (rk, transport), nbytes in by_role.items():
        bps = nbytes / run.num_steps
        out.append(Finding(SERIALISATION, sorted(labels[(rk, transport)]), bps,
                           _serialisation_message(rk, transport, bps)))
    return out


def _serialisation_message(rk: RoleKey, transport: str, bps: float) -> str:
    src, dst, name = rk
    route = f"between {src} instances" if src == dst else f"from {src} to {dst}"
    if transport in ("pickle", "rpc"):
        return (f"`{name}` is serialised ({transport}) {route}, {_per(bps)}: move its tensors "
                "through shared memory or a handle and pickle only the metadata.")
    if transport == "shm":
        return (f"`{name}` crosses processes through shared memory {route}, {_per(bps)}: cheap "
                f"per byte, so make sure only the leaves and rows {dst} reads are written.")
    return (f"`{name}` moves by collective {route}, {_per(bps)}: bucket and overlap it with "
            "compute, or send only what changed.")
