"""Storage ids: one per storage a shard's hops carried, never given to two storages.

A hop line names each tensor's storage by an id (`flowmap.trace_format`), so later
analysis tells a reference (the same storage) from a copy, and follows data through
stages. A key is an address, and a freed storage's address is handed to the next one,
so an id is kept only while what holds the storage lives (`flowmap.writer.storage_refs`).
"""

from __future__ import annotations

import weakref
from _thread import get_ident
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from flowmap import environment
from flowmap import trace_format as tf
from flowmap.writer import storage_refs
from flowmap.writer.block_writes import WROTE, BlockToken, BlockWrites, writer_of
from flowmap.writer.moved_storages import MovedStorages
from flowmap.writer.storage_refs import array_root, base_getter, start_span, storage_of, versions_of

# Storage ids are kept per shard so cross-hop identity can be analysed; the table is
# cleared past this many, trading a little identity resolution for bounded memory.
MAX_STORAGE_IDS = 100_000
MAX_REGIONS = 64  # views of one storage whose keys are kept, the first named
RUNNING = 1 << 62  # the end of a stage's code that has not ended yet (`ran`)
MAX_HELD = 8  # stages a storage was handed to that are kept: who may have written it since

# The C twin of `storage_ids`' common case (`cids.c`), where it was built (as the describers'
# C loops: compiled at install when a compiler is there, off under FLOWMAP_PURE_PYTHON=1).
known_ids: Callable[[dict[Any, Any], list[Any]], str | None] | None = None
if not environment.pure_python():
    try:
        from flowmap.writer.cids import known_ids
    except ImportError:
        pass


class StorageTable:
    """A shard's storage ids, and the `b` lines that say a view lies in a storage named before."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        # key -> (its id as JSON text, a weak reference to what holds the storage)
        self.storages: dict[Hashable, tuple[str, weakref.ref[Any]]] = {}
        self.next_storage = 0
        self.spans: dict[Hashable, int | None] = {}  # a storage's start -> what was named there reaches
        # a storage's start -> (the id it had, what it reached, the counter that gave it a new
        # id, what held it) before a view at its start was written and named anew (`part_of`)
        self.former: dict[Hashable, tuple[str, int | None, int, weakref.ref[Any]]] = {}
        self.objects: dict[int, tuple[str, weakref.ref[Any]]] = {}  # id(torch storage) -> entry
        # key -> [its tensor's version at its last hop, that hop's number (`hops_seen`), the
        # stages it was handed to, the stage that made what it holds, the latest write a
        # stage's block saw since, the stages whose blocks saw none] (`block_writes.writer_of`)
        self.versions: dict[Hashable, list[Any]] = {}
        self.writes = BlockWrites()  # what the stages' blocks saw of their storages' counters
        self.hops_seen = 0
        self.hop_ends: tuple[str | None, str | None] = (None, None)  # this hop's src and dst
        # stage -> the numbers of the next hop as its code last started and ended (an owner
        # block, a seam's body): who may have written a storage in place between two hops
        self.ran: dict[str, tuple[int, int]] = {}
        self.blockless: set[str] = set()  # stages whose code ran, in no block (`acted`)
        # id(torch storage) -> (a weak reference to it, the keys of its views named so far)
        self.regions: dict[int, tuple[weakref.ref[Any], list[Hashable]]] = {}
        self.moved = MovedStorages()  # storages torch moved into shared memory (`left`)

    def storage_ids(self, keys: Sequence[Hashable], holders: Sequence[Any] | None = None,
                    src: str | None = None, dst: str | None = None,
                    described_before: bool = False, content: bool = False) -> str:
        """The `storages` list of a hop line, without its brackets: one id per key. A key
        is an address, and a freed storage's address is handed to the next one: an id is
        kept only while the object that first showed it (`holders`, in step with `keys`; a
        view's base in its place) lives, which a weak reference tells when the key is met
        again (no callback: a free costs the program nothing). A key met with no holder, or
        one not weakly referable, gets an id of its own. `src` and `dst` are the hop's ends;
        `described_before`: keys read before a send that may have moved them (`left`);
        `content`: its transport serialised the arrays (`storage_refs.contents`)."""
        if not keys:
            return ""
        if described_before and self.moved.moved and holders and len(holders) == len(keys):
            keys = self.moved.keys(keys, holders)  # read before the send moved them
        if holders:
            self.renew_rewritten(keys, holders, src, dst, content)
        table = self.storages
        if known_ids is not None and type(keys) is list:
            text = known_ids(table, keys)  # every storage met before and alive: the common hop
            if text is not None:
                return text
            if len(keys) == 1 and len(table) < MAX_STORAGE_IDS - 1:  # one new storage
                return self.new_storage(keys[0], holders[0] if holders and len(holders) == 1 else None)
        # One C-level pass; not join's TypeError on a new one: raising it costs more than a
        # hop's other work, and a training step's tensors are mostly new storages.
        entries = list(map(table.get, keys))
        aligned = holders is not None and len(holders) == len(keys)
        if len(table) + len(keys) >= MAX_STORAGE_IDS:  # the table may be cleared midway
            return ",".join([self.storage_id(k, holders[i] if aligned else None)  # type: ignore[index]
                             for i, k in enumerate(keys)])
        ids: list[str] = []
        for i, entry in enumerate(entries):
            if entry is not None and entry[1]() is not None:
                ids.append(entry[0])
                continue
            key = keys[i]
            now = table.get(key)  # a storage met twice in this hop has its id by now
            if now is not entry and now is not None and now[1]() is not None:
                ids.append(now[0])
                continue
            ids.append(self.new_storage(key, holders[i] if aligned else None))  # type: ignore[index]
        return ",".join(ids)

    def arrived_ids(self, keys: Sequence[Hashable], holders: Sequence[Any] | None,
                    owner: str) -> str:
        """`storage_ids` of what a message brought `owner`: new ids, even for a storage this
        process named before. A tensor sent out and back through shared memory is the very
        storage (torch keeps one mapping per file), written by the other process unseen
        here: it holds what the sender sent (the receipt links its ids to these)."""
        table, objects = self.storages, self.objects
        for key in keys:
            named = table.pop(key, None)
            self.versions.pop(key, None)  # its writers and makers were this process's
            if named is not None:
                objects.pop(id(named[1]()), None)
        if objects:
            for holder in holders or ():  # moved into shared memory as it was sent: a new address
                storage = storage_of(holder)
                if storage is not None:
                    objects.pop(id(storage), None)
        return self.storage_ids(keys, holders, None, owner)

    def left(self, old: int, new: int, nbytes: int, storage: Any) -> None:
        """torch moved `storage` from `old` into shared memory at `new`
        (`flowmap.writer.moved_storages`): what was named at its start and at its views
        keeps its id and provenance at the new address, while `storage` lives."""
        region = self.regions.get(id(storage))
        named = region[1] if region is not None and region[0]() is storage else []
        ref = weakref.ref(storage)  # the data's holder now (`from_numpy`: no more the array)
        for key, to in self.moved.note(old, new, nbytes, storage, named):
            if key in self.storages:
                self.storages[to] = (self.storages.pop(key)[0], ref)
            if key in self.versions:
                self.versions[to] = self.versions.pop(key)
            if key in self.spans:
                self.spans[to] = self.spans.pop(key)
            if key in self.former:
                self.former[to] = self.former.pop(key)
            self.writes.rekey(key, to)

    def renew_rewritten(self, keys: Sequence[Hashable], holders: Sequence[Any],
                        src: str | None = None, dst: str | None = None,
                        content: bool = False) -> None:
        """Give a new id to each storage written in place since its last hop (its tensor's
        counter, or a serialised array's `content`, moved): it holds new data (advantages
        normalised in place, weights stepped, a reused buffer filled again), not what the
        last hop carried; its writer's (`_writer`, an `o` line if not this hop's sender)."""
        seen, hop = self.versions, self.hops_seen
        self.hops_seen += 1
        self.hop_ends = (src, dst)
        hold = self.writes.hold
        versions = storage_refs.contents(holders, keys, seen) if content else versions_of(holders)
        for i, version in enumerate(versions):
            if version is None:
                continue
            key = keys[i]
            last = seen.get(key)
            if last is None:
                maker = self.writes.stepped_first(key, version, holders[i]) or src
                seen[key] = [version, hop, (dst,), maker, None, ()]
                if maker is not None and maker != src:  # weights stepped, handed on by another
                    self.origin(self.new_storage(key, holders[i]), maker)
                hold(src, key, holders[i])
                hold(dst, key, holders[i])
            elif last[0] == version:  # the common hop: the same data again
                last[1] = hop
                if last[5]:
                    last[4], last[5] = None, ()
                if dst not in last[2] and len(last[2]) < MAX_HELD:
                    last[2] += (dst,)
                    hold(dst, key, holders[i])
            else:
                self._rewritten(key, holders[i], version, last, hop)

    def _rewritten(self, key: Hashable, holder: Any, version: int, last: list[Any],
                   hop: int) -> None:
        """The counter of the storage at `key` moved since its last hop: a new id, said to
        be its writer's, unless the write was another view's, or the storage is new here
        (its address held another before)."""
        src, dst = self.hop_ends
        table = self.storages
        named = table.get(key)
        if named is None or named[1]() is None:  # a new storage: `new_storage` renews `last`
            last[:] = [version, hop, (dst,), src, None, ()]
        elif self._written_elsewhere(key, version, hop, last):
            last[0], last[1], last[4], last[5] = version, hop, None, ()
        else:
            maker = writer_of(last, src, version, self.ran, self.blockless) or src
            self.former[key] = (named[0], self.spans.get(key), version, named[1])
            del table[key]
            self.objects.pop(id(named[1]()), None)
            if maker is not None and maker != src and len(table) < MAX_STORAGE_IDS - 1:
                self.origin(self.new_storage(key, holder), maker)
            last[:] = [version, hop, (dst,), maker, None, ()]
        self.writes.hold(last[3], key, holder)
        self.writes.hold(dst, key, holder)

    def origin(self, storage: str, owner: str) -> None:
        """Say that `owner` made what `storage` holds (the writer's `o` line; here, ids only)."""

    def owner_runs(self, owner: str) -> BlockToken:
        """`owner`'s code starts, and runs until `owner_ran` (`ran`): a write by the block a hop
        is sent from is its sender's. Returns what `owner_ran` is given back."""
        ran = self.ran
        if len(ran) >= MAX_REGIONS * 64 and owner not in ran:
            ran.clear()
            self.blockless.clear()
        ran[owner] = (self.hops_seen, RUNNING)
        self.blockless.discard(owner)
        return self.writes.starts(owner, self.hops_seen)

    def owner_ran(self, owner: str, token: BlockToken) -> None:
        """`owner`'s code ran from `owner_runs` until now (`ran`); bounded, as owners are
        few. What its block wrote of what it holds is noted (`block_writes`)."""
        ran = self.ran
        if len(ran) >= MAX_REGIONS * 64 and owner not in ran:
            ran.clear()
        ran[owner] = (token.since, self.hops_seen)
        self.writes.ends(owner, token, self.versions)

    def acted(self, stage: str | None) -> None:
        """A hop (sent or taken) by code of `stage` in no block (a `set_owner` thread: an
        engine's loop) says it ran then: its write to what it was handed is its own
        (`block_writes.writer_of`), and no other thread's block open now ran alone (`block_writes`)."""
        if stage is None or get_ident() in self.writes.open:
            return
        self.writes.acts += 1
        ran = self.ran
        run = ran.get(stage)
        if run is None or stage in self.blockless:
            if run is None and len(ran) >= MAX_REGIONS * 64:
                ran.clear()
                self.blockless.clear()
            ran[stage] = (self.hops_seen, self.hops_seen)
            self.blockless.add(stage)

    def stepped(self, owner: str, keys: Sequence[Hashable], holders: Sequence[Any]) -> None:
        """An optimizer's step, run by `owner`'s code, wrote `holders` (`block_writes.stepped`)."""
        self.writes.stepped(self.versions, owner, keys, holders)

    def _written_elsewhere(self, key: Hashable, version: int, hop: int, last: list[Any]) -> bool:
        """Whether the write that moved the counter was another region's: a view of the
        same storage starting elsewhere was hopped, by an earlier hop than this one, at
        this very version (rows of one buffer that stages fill in turn; a view shares its
        storage's counter), by the stage whose block was seen to write (`last`), if one
        was. Views hopped together (a state dict of one flat buffer's views) were all
        written."""
        entry = self.storages.get(key)
        storage = entry[1]() if entry is not None else None
        region = self.regions.get(id(storage)) if storage is not None else None
        if region is None or region[0]() is not storage:
            return False
        seen = self.versions
        wrote = last[WROTE]
        writer = wrote[0] if wrote is not None and wrote[1] == version else None
        return any(other != key and seen.get(other, (None, hop))[0] == version
                   and seen[other][1] < hop and writer in (None, seen[other][3])
                   for other in region[1])

    def storage_id(self, key: Hashable, holder: Any = None) -> str:
        """The id of the storage `key` (an address, say), as JSON text; no line is written."""
        entry = self.storages.get(key)
        if entry is not None and entry[1]() is not None:
            return entry[0]
        if len(self.storages) >= MAX_STORAGE_IDS:
            self.storages.clear()  # bounded memory: a link is lost, none is made
            self.spans.clear()
            self.former.clear()
            self.objects.clear()
            self.versions.clear()
            self.regions.clear()
            self.ran.clear()
        return self.new_storage(key, holder)

    def new_storage(self, key: Hashable, holder: Any) -> str:
        """A new id for `key`, kept in the table while `holder`'s storage (else its base, else
        itself) lives: a storage outlives the tensor that showed it where an alias (`detach()`,
        a view kept in a buffer) still holds it, and is the same data then. A torch storage
        met before at another start address (moved into shared memory by `share_memory_`, as
        torch does to what a multiprocessing queue sends) keeps its id."""
        last = self.versions.get(key)
        if last is not None and last[1] == self.hops_seen - 1:  # what its address held before
            last[2:] = [(self.hop_ends[1],), self.hop_ends[0], None, ()]  # made, handed: not this
        if holder is None:
            self.storages.pop(key, None)
            return self._next()
        try:
            storage = storage_of(holder)
            if storage is not None:
                start = storage.data_ptr()
                # by the tensor's offset, not its address: pickling may have moved the
                # storage since the key was read (a queue's send is recorded after it)
                at_start = holder.storage_offset() == 0
                if at_start:
                    known = self.objects.get(id(storage))
                    if known is not None and known[1]() is storage:
                        self.storages[key] = known
                        return known[0]
                i = self._next()
                self.part_of(i, key, storage, start, holder)
                holder = storage
            else:
                i, at_start = self._next(), False
                base = base_getter(type(holder))  # torch's getter, read on the class
                if base is not None:
                    owner = base.__get__(holder, type(holder))
                    if owner is not None:
                        holder = owner
            if holder is not None and type(holder).__name__ == "ndarray":
                root = array_root(holder)
                if root is not holder or root.base is not None:  # a view, or `Tensor.numpy()`
                    self.part_of(i, key, root, root.__array_interface__["data"][0], holder)
            entry = self.storages[key] = (i, weakref.ref(holder))
            if at_start:
                self.objects[id(storage)] = entry
            if storage is not None:  # the views of it named so far (`_written_elsewhere`)
                region = self.regions.get(id(storage))
                if region is None or region[0]() is not storage:
                    region = self.regions[id(storage)] = (entry[1], [])
                if len(region[1]) < MAX_REGIONS:
                    region[1].append(key)
        except Exception:  # not weakly referable: an id of its own, never met again
            self.storages.pop(key, None)
            return self._next()
        return i

    def _next(self) -> str:
        i = str(self.next_storage)  # a counter, not the table's size: unique across clears
        self.next_storage += 1
        return i

    def part_of(self, i: str, key: Hashable, storage: Any, start: int, view: Any = None) -> None:
        """A `b` line when the new storage id `i` (a view at `key`) lies in what was named at
        the start of its storage, alive, whose data starts at `start`: a row of a received
        batch sent on is that batch's data, though it starts elsewhere. Rows of a buffer
        that stages fill in turn are not one another's: a view named at the start
        (`view`) that ends short of the storage reaches only that far (`spans`), and a
        storage written since that hop holds other data. Rows past a view at the start that
        was written and hopped (taking that write: the counter moved no further) hold what
        the storage's former id held (`former`). Only for views new to the table, off the
        common hop's path."""
        base = start if type(key) is int else (start, key[1]) if type(key) is tuple else None
        if base is None:
            return
        if base == key:
            self.spans[base] = start_span(view, storage) if view is not None else None
            return
        entry = self.storages.get(base)
        span = self.spans.get(base)
        at: int = key if type(key) is int else key[0]  # type: ignore[index]
        inside = 0 <= at - start and (span is None or at - start < span)
        if entry is not None and storage_refs.same_memory(entry[1](), storage, start) and inside \
                and not self._written_since(base, view):
            self.write(f'["{tf.PART}",{i},{entry[0]}]')
        elif base in self.former:  # rows past a written view at the start: what it held then
            was, reach, version, held = self.former[base]
            now = versions_of((view,)) if view is not None else []
            if (0 <= at - start and (reach is None or at - start < reach) and now
                    and now[0] == version and storage_refs.same_memory(held(), storage, start)):
                self.write(f'["{tf.PART}",{i},{was}]')

    def _written_since(self, base: Hashable, view: Any) -> bool:
        """Whether the storage was written in place since what was named at its start last
        hopped (a view shares its base's counter): the view holds what its writer made then
        (columns of one buffer that two stages fill in turn)."""
        seen = self.versions.get(base)
        if view is None or seen is None:
            return False
        now = versions_of((view,))
        return bool(now) and now[0] is not None and now[0] != seen[0]
