"""The flow: which stage's output is which later stage's input, found from storage identity.

A traced script with a seam map records every hop as `main -> function` and
`function -> main`: drawn as it is, the graph is a star around the driver, and
the order of the pipeline never shows. But every tensor leaf of a hop carries
its storage's identity, so when a stage's result is later handed to another
stage, the two hops share a storage: that is a producer -> consumer edge.

- The **producer** of a storage is the source of the first hop that carried it, unless
  the run says who made it (an `o` line, `trace_format`: data a run with no seam map made
  in its watched first step, or a storage written in place by a stage other than the
  one that hops it next, `flowmap.writer.storage_table`).
- A hop that carries it into `X` makes an edge `producer -> X`, unless `X`
  later hands that same storage on: then `X` only passed it along (the
  driver's hand-off), and the edge goes to where it was consumed instead. A stage
  that hands it on beside data it made since (new storages first seen in that hop,
  or strings and floats it did not get: a scorer sending the sequences on with their
  scores, a generator the prompts with their completions) used it, and keeps its edge.
- A hop with no tensor leaf, or with leaves whose storage nobody produced
  before, is an edge of its own, `src -> dst`.

Storages are per process (one shard's ids, which a freed tensor's address never
carries over to new data: flowmap/writer/storage_table.py): a transport hop whose receiver
named the storages it unpickled (`Hop.arrived`) carries its producer over, so
data relayed through another process still comes from where it was made. Stages are
ordered along the data's path: each after the stages whose tensors it
received (by when data first reached it where that does not decide, counting data it
only handed on: `select_action`, which gives the state to `Policy`, comes before it, as
the script calls them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flowmap.model import flow_text
from flowmap.model.flow_groups import Roots
from flowmap.read.events import Hop
from flowmap.trace_format import GROUP, UNTRACED

_TENSORS = ("tensor", "ndarray")
# The owner of code nobody named (`flowmap.capture.state.default_owner`): a script's driver.
UNNAMED_DRIVER = "main"


@dataclass(frozen=True, slots=True)
class FlowEdge:
    """Data produced by `src` and consumed by `dst`, over the whole run."""

    src: str
    dst: str
    hops: int  # hops into `dst` that carried `src`'s data
    nbytes: int  # bytes of `src`'s data those hops carried
    names: tuple[str, ...]  # payload names of those hops, sorted
    #: What the consumer calls that data: its leaves' argument names (`sequences`), sorted
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Flow:
    """Stages in the order data reached them, and the producer -> consumer edges between them."""

    stages: tuple[str, ...]
    edges: tuple[FlowEdge, ...]  # by (position of src, position of dst)
    hand_offs: int  # hops that carried another stage's data on (collapsed into the edges)

    @property
    def found(self) -> bool:
        """Whether storage identity linked any two stages through a third (a hand-off)."""
        return self.hand_offs > 0

    def order_text(self, sep: str = " → ") -> str:
        """The stages in order; the unnamed driver (`main`, which hands data between them) is
        said apart, not drawn as a stage of the pipeline."""
        stages = [s for s in self.stages if s != UNNAMED_DRIVER]
        if len(stages) == len(self.stages) or not stages:
            return sep.join(self.stages)
        return f"{sep.join(stages)}  (driver: {UNNAMED_DRIVER})"


def _sender(h: Hop, roots: Roots, root_links: dict[int, list[int]],
            links: list[tuple[int, str, str, int]]) -> tuple[str, list[int]]:
    """Who made the new storages of `h`, and the links it hands on: `h.src`, none; for a
    receipt out of a group, the producer of what its root sent (`flow_groups`), and the
    root's hop's links into the group, which only handed it on."""
    root = roots.root.get(id(h))
    got = root_links.get(id(root)) if root is not None else None
    if not got:
        return h.src, []
    return links[got[0]][1], got


def _ranked(origins: Mapping[tuple[int, int], str], hops: Sequence[Hop]
            ) -> Mapping[tuple[int, int], str]:
    """`origins` with each owner named as that process's hops name it: a rank of
    torch.distributed sends as `trainer/rank1` what its optimizer step, run by `trainer`,
    made (`o` lines say the owner as the program set it)."""
    if not origins:
        return origins
    ranked: dict[tuple[int, str], str] = {}
    for h in hops:
        role, sep, rank = h.src.rpartition("/")
        if sep and rank.startswith("rank"):
            ranked.setdefault((h.pid, role), h.src)
    if not ranked:
        return origins
    return {key: ranked.get((key[0], owner), owner) for key, owner in origins.items()}


def build_flow(hops: Iterable[Hop], parts: Mapping[tuple[int, int], int] | None = None,
               origins: Mapping[tuple[int, int], str] | None = None) -> Flow:
    """The flow of `hops` (kept hops, any order); `parts` maps a view's storage to the storage
    it lies in, per process (`flowmap.read.events.storage_bases`): a slice is its base's data;
    `origins`, a storage to the owner that made what it holds (`o` lines)."""
    bases = parts or {}
    ordered = sorted(hops, key=lambda h: h.t_ns)
    made_before = _ranked(origins or {}, ordered)
    producer: dict[tuple[int, int], str] = {}
    # (pid, storage, holder) -> links that brought the storage to holder, not yet handed on
    waiting: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    links: list[tuple[int, str, str, int]] = []  # (hop index, producer, consumer, bytes)
    link_args: dict[int, str] = {}  # link -> the consumer's name for the data (its leaf's root)
    passed: set[int] = set()  # links whose consumer only handed the storage on
    first_seen: dict[str, int] = {}
    held: dict[str, list[flow_text.Text]] = defaultdict(list)  # holder -> texts it got
    makers: dict[tuple[int, int], str] = {}  # (pid, text id) -> the stage that first sent it
    texts: set[int] = set()  # links of text payloads: data, as tensors are
    roots = Roots(ordered)  # a rooted collective's receipts are what its root sent
    ordered = roots.ordered(ordered)
    root_links: dict[int, list[int]] = {}  # id(a root's hop into a group) -> its links
    hand_offs = 0
    for i, h in enumerate(ordered):
        if not h.nbytes and GROUP in (h.src[:6], h.dst[:6]):
            continue  # a barrier: it synchronises the ranks and moves no data
        first_seen.setdefault(h.src, h.t_ns)
        first_seen.setdefault(h.dst, h.t_ns)
        if not h.storages:  # no tensor to follow: one link, from its sender, unless text
            made_by = h.src
            text = flow_text.figures(h)
            if text is None:
                links.append((i, made_by, h.dst, h.nbytes))
            else:
                got_by, kept = held[h.dst], held[h.src]
                found = flow_text.sources(kept, h, *text, makers)
                to_receiver = flow_text.receiver(h)
                # text it got beside text it wrote (prompts with their completions): used
                used = len(found) > 1 and any(got is None for got, _ in found)
                for (got, keys), (share, part) in zip(found, flow_text.parts(h, found, text[0]),
                                                      strict=True):
                    made_by = got.made_by if got is not None else h.src
                    if made_by == h.dst:
                        continue  # back to its producer
                    if got is not None:
                        hand_offs += 1
                        if not used:
                            passed.update(got.links)  # h.src only handed it on
                            got.links.clear()
                    held_as = to_receiver(keys) if to_receiver is not None else (h.pid, keys)
                    got_by.append(flow_text.Text(made_by, [len(links)], *held_as, part))
                    flow_text.made(makers, h.pid, keys, made_by)  # where it was sent
                    flow_text.made(makers, *held_as, made_by)  # and where it arrived
                    texts.add(len(links))
                    links.append((i, made_by, h.dst, round(h.nbytes * share)))
                del got_by[:-flow_text.MAX_HELD]
            if h.arrived is not None:  # tensors its receiver loaded from raw frames
                pid, there = h.arrived
                for storage in there:
                    producer.setdefault((pid, storage), made_by)
                    waiting[(pid, storage, h.dst)].append(len(links) - 1)
            continue
        forwarded = own = False  # own: data h.src made, first seen in this hop
        handed_on: list[int] = []  # links that brought h.src data it hands on here
        args = _roots(h)
        carried = _storages(h)
        sender, root_link = _sender(h, roots, root_links, links)
        link_of: list[int | None] = []  # per storage, the link it made (None: back home)
        for view, nbytes in carried:
            storage = bases.get((h.pid, view), view)
            new = (h.pid, storage) not in producer
            made_by = producer.setdefault((h.pid, storage),
                                          made_before.get((h.pid, storage), sender))
            own = own or new and made_by == h.src
            if made_by == h.dst:
                link_of.append(None)
                continue  # back to its producer (a result that is the input): no new edge
            if made_by != h.src:
                forwarded = True  # someone else's data, handed on by h.src
                handed_on += waiting.pop((h.pid, storage, h.src), ())
                handed_on += root_link  # the group only handed on what the root sent
            waiting[(h.pid, storage, h.dst)].append(len(links))
            if storage in args:
                link_args[len(links)] = args[storage]
            link_of.append(len(links))
            links.append((i, made_by, h.dst, nbytes))
        if h.dst.startswith(GROUP) and any(k is not None for k in link_of):
            root_links[id(h)] = [k for k in link_of if k is not None]
        # strings or floats beside the tensors, followed by their objects; new ones (scores
        # as floats) are data h.src made, as new storages are
        beside = list(flow_text.beside(held[h.src], h, makers)) if h.texts else []
        own = own or any(got is None for got, *_ in beside)
        if not own:  # h.src only handed it on; with data it made since beside it (a scorer
            passed.update(handed_on)  # that sends new scores with the sequences) it used it
        if beside:
            for got, (pid, keys), made_by, nbytes in beside:
                if made_by == h.dst:
                    continue  # back to its producer
                if got is not None and not own:
                    passed.update(got.links)  # h.src only handed it on
                    got.links.clear()
                held[h.dst].append(flow_text.Text(made_by, [len(links)], pid, keys, ()))
                flow_text.made(makers, pid, keys, made_by)
                texts.add(len(links))
                links.append((i, made_by, h.dst, nbytes))
            del held[h.dst][:-flow_text.MAX_HELD]
        if h.arrived is not None and len(h.arrived[1]) == len(carried):
            # the same tensors under the receiver's ids: sent on from there, they are passed
            pid, there = h.arrived
            for storage, (here, _), link in zip(there, carried, link_of):
                producer.setdefault((pid, storage), producer[(h.pid, bases.get((h.pid, here), here))])
                if link is not None:
                    waiting[(pid, storage, h.dst)].append(link)
        hand_offs += forwarded
    return _assemble(ordered, links, passed, first_seen, hand_offs, link_args, texts)


def _assemble(ordered: Sequence[Hop], links: list[tuple[int, str, str, int]],
              passed: set[int], first_seen: dict[str, int], hand_offs: int,
              link_args: dict[int, str] | None = None, texts: set[int] | None = None) -> Flow:
    hops: dict[tuple[str, str], set[int]] = defaultdict(set)
    nbytes: dict[tuple[str, str], int] = defaultdict(int)
    names: dict[tuple[str, str], set[str]] = defaultdict(set)
    args: dict[tuple[str, str], set[str]] = defaultdict(set)
    reached: dict[str, int] = {}
    fed: dict[str, int] = {}  # when tensors first reached or left each stage
    data: set[tuple[str, str]] = set()  # edges that carried tensors, not only control values
    moved: dict[str, int] = {}  # when tensors first reached or left each stage, handed on or not
    sent: dict[str, int] = {}  # when tensors first left each stage
    for n, (i, src, dst, b) in enumerate(links):
        if ordered[i].storages or (texts and n in texts):
            t = ordered[i].t_ns
            sent[src] = min(sent.get(src, t), t)
            for end in (src, dst):
                if end != UNNAMED_DRIVER:
                    moved[end] = min(moved.get(end, t), t)
        if n in passed:
            continue
        if src == dst or UNTRACED in (src, dst):
            continue  # a send no traced process received (a DataLoader's last indices): no stage
        h = ordered[i]
        t = h.t_ns
        edge = (src, dst)
        if h.storages or (texts and n in texts):
            data.add(edge)
            for end in (src, dst):
                # text the driver takes in (a DataLoader's prompts, tokenized inline) does
                # not place it: it is drawn as the driver, and stages follow their tensors
                if h.storages or end != UNNAMED_DRIVER:
                    fed[end] = min(fed.get(end, t), t)
        hops[edge].add(i)
        nbytes[edge] += b
        names[edge].add(h.name)
        if link_args and n in link_args:
            args[edge].add(link_args[n])
        reached[dst] = min(reached.get(dst, t), t)
        reached.setdefault(src, first_seen.get(src, t))
        reached[src] = min(reached[src], first_seen.get(src, reached[src]))
    # a stage that handed its input on (`select_action` gives the state to `Policy`, and
    # gets the action back) is placed by when that input reached it: before the stage it
    # called; a producer whose data the driver handed on, by when its data left it
    fed.update({s: min(t, fed[s]) for s, t in moved.items() if s in fed})
    stages = _order({s: fed.get(s, t) for s, t in reached.items()}, data or set(hops), sent)
    pos = {s: k for k, s in enumerate(stages)}
    edges = tuple(sorted(
        (FlowEdge(s, d, len(hops[(s, d)]), nbytes[(s, d)], tuple(sorted(names[(s, d)])),
                  tuple(sorted(args[(s, d)])))
         for (s, d) in hops),
        key=lambda e: (pos[e.src], pos[e.dst])))
    return Flow(stages, edges, hand_offs)


def _order(reached: dict[str, int], edges: set[tuple[str, str]],
           sent: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """Along the data's path: a stage after every stage whose data it received, ties by
    when tensors first reached it, then by name. `reached` and `edges` are read from the
    hops that carried tensors where there are any: a Ray driver's calls feed every actor a
    step number, and create the trainer first, which says nothing of the path. An edge to
    a stage tensors reached before its source (weights sent back to the rollout) closes a
    loop: it does not order the stages, so a stage fed later only through the driver (a
    buffer's sample, the weight sync) stays where the data reached it. Of two stages
    reached at one moment (a caller's tensors reaching the helper it calls), the one whose
    tensors left it then (`sent`) comes first."""
    feeds: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        if reached.get(dst, 0) >= reached.get(src, 0):
            feeds[dst].add(src)
    cycle = _cycles(feeds)
    left_first = {s for s, t in (sent or {}).items() if t <= reached.get(s, t)}
    left, out = set(reached), []
    while left:
        # a stage is ready once every stage feeding its cycle is placed (a stage that calls
        # a helper and gets its result back, both reached at once: one cycle, placed
        # together), so a stage reached later never jumps ahead of a cycle reached first
        ready = [s for s in left
                 if all(feeds[m] & left <= cycle[s] for m in cycle[s] & left)] or list(left)
        first = min(ready, key=lambda s: (reached[s], s not in left_first, s))
        out.append(first)
        left.remove(first)
    return tuple(out)


def _cycles(feeds: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each stage's strongly connected set under `feeds` (itself alone, where it is in no
    cycle); a run has tens of stages, so a search from each is cheap enough."""
    stages = set(feeds) | {s for fs in feeds.values() for s in fs}
    upstream: dict[str, set[str]] = {}
    for s in stages:
        seen, todo = {s}, [s]
        while todo:
            for f in feeds.get(todo.pop(), ()):
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
        upstream[s] = seen
    out: dict[str, set[str]] = defaultdict(set)
    for s in stages:
        out[s] = {t for t in upstream[s] if s in upstream[t]}
    return out


def _roots(h: Hop) -> dict[int, str]:
    """storage -> the root of the first tensor leaf's path on it (`sequences` of
    `sequences`, `weights` of `weights.0.weight`), where leaves and storages line up."""
    if not h.storages:
        return {}
    tensors = [leaf.path for leaf in h.leaves if leaf.kind in _TENSORS]
    if len(tensors) != len(h.storages):
        return {}
    out: dict[int, str] = {}
    for s, path in zip(h.storages, tensors, strict=True):
        out.setdefault(s, path.split(".")[0].split("[")[0])
    return out


def _storages(h: Hop) -> list[tuple[int, int]]:
    """(storage, bytes) per tensor leaf: exact when the leaves and storages line up (one
    list of tensors folded into a leaf is its elements, each an equal share of it)."""
    if not h.storages:
        return []
    leaves = [leaf for leaf in h.leaves if leaf.kind in _TENSORS]
    tensors = [leaf.nbytes for leaf in leaves]
    folded = [leaf for leaf in leaves if leaf.count > 1]
    if len(folded) == 1 and sum(leaf.count for leaf in leaves) == len(h.storages):
        # one list of tensors beside single ones: its elements, in walk order, each its share
        tensors = [b for leaf in leaves
                   for b in ([leaf.nbytes // leaf.count] * leaf.count if leaf.count > 1
                             else [leaf.nbytes])]
    if len(tensors) == len(h.storages):
        merged: dict[int, int] = {}
        for s, b in zip(h.storages, tensors, strict=True):
            merged[s] = max(merged.get(s, 0), b)  # views of one storage: count it once
        return list(merged.items())
    share = h.nbytes // max(1, len(set(h.storages)))
    return [(s, share) for s in dict.fromkeys(h.storages)]


def star_center(seams: Iterable[tuple[str, str, str]]) -> str | None:
    """The owner three quarters of the seams start or end at (`main -> f -> main`), if any:
    the run is drawn as a star around it, and its flow tells the pipeline better."""
    keys = list(seams)
    if len(keys) < 3:
        return None
    touching: dict[str, int] = defaultdict(int)
    for src, dst, _ in keys:
        touching[src] += 1
        if dst != src:
            touching[dst] += 1
    owner, n = max(touching.items(), key=lambda kv: (kv[1], kv[0]))
    return owner if n * 4 >= len(keys) * 3 else None
