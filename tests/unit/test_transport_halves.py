"""Joining send and receive halves into hops (`flowmap.model.halves`), on hand-made halves."""

from __future__ import annotations

from flowmap.model.halves import ReceiveHalf, SendHalf, join
from flowmap.model.reader import Hop, Shard


def shard(pid: int, *halves) -> Shard:
    s = Shard(path=f"{pid}.flowmap.jsonl", pid=pid, ppid=1, host="h", argv=[], process=None,
              t0_mono_ns=0, t0_wall_ns=0)
    s.halves.extend(halves)
    return s


def send(t, src, channel, key, nbytes=10, fallback="(untraced)"):
    hop = Hop(t, 1, src, fallback, "msg", nbytes, (), (), None, None, "pickle", (), nbytes)
    return SendHalf(hop, channel, key)


def recv(t, owner, channel, key, wire=10):
    return ReceiveHalf(t, 2, owner, "got", "pickle", channel, key, wire)


def edges(hops):
    return sorted((h.src, h.dst, h.nbytes) for h in hops)


def test_same_channel_and_key_join_in_send_order():
    # two identical messages from two producers on one queue: first sent, first received
    hops = join([shard(1, send(1, "a", "mp:pipe:1", "k"), send(2, "b", "mp:pipe:1", "k", 20)),
                 shard(2, recv(5, "x", "mp:pipe:1", "k"), recv(6, "y", "mp:pipe:1", "k"))])
    assert edges(hops) == [("a", "x", 10), ("b", "y", 20)]
    assert all(h.wire_bytes == h.nbytes for h in hops)


def test_equal_keys_on_other_named_channels_never_join():
    hops = join([shard(1, send(1, "a", "zmq:tcp:1", "k")), shard(2, recv(2, "x", "zmq:tcp:2", "k"))])
    assert edges(hops) == [("(untraced)", "x", 10), ("a", "(untraced)", 10)]


def test_a_side_with_no_single_channel_joins_by_key_within_its_family():
    hops = join([shard(1, send(1, "a", "zmq", "k"), send(1, "c", "mp", "k")),
                 shard(2, recv(2, "x", "zmq:tcp:5", "k"))])
    assert edges(hops) == [("a", "x", 10), ("c", "(untraced)", 10)]


def test_sequence_numbered_channels_match_exactly_only():
    hops = join([shard(1, send(1, "rank0", "dist:group[0,1]:0>1:0", "0", fallback="rank1")),
                 shard(2, recv(2, "rank1", "dist:group[0,1]:0>1:7", "0"))])
    assert edges(hops) == [("(untraced)", "rank1", 10), ("rank0", "rank1", 10)]
    assert {h.pid for h in hops} == {1, 2}


def test_fan_out_is_one_hop_per_receiver():
    hops = join([shard(1, send(1, "pub", "zmq:ipc:/s", "k")),
                 shard(2, recv(2, "sub/0", "zmq:ipc:/s", "k"), recv(3, "sub/1", "zmq:ipc:/s", "k"))])
    assert edges(hops) == [("pub", "sub/0", 10), ("pub", "sub/1", 10)]


def test_no_halves_no_hops():
    assert join([shard(1)]) == []
