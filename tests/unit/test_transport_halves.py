"""Joining send and receive halves into hops (`flowmap.read.halves`), on hand-made halves."""

from __future__ import annotations

from flowmap.read.events import SeamStep
from flowmap.read.halves import ReceiveFold, ReceiveHalf, SendFold, SendHalf, join, join_run
from flowmap.read.reader import Hop, Shard


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


# -- folded halves (`trace --aggregate`): joined by count per channel ----------------


def send_fold(t, src, channel, hops, nbytes_sum, step=0, lo=1, hi=100, items=0):
    st = SeamStep(t_ns=t, t_first_ns=t - 1, pid=1, src=src, dst="(untraced)", name="msg",
                  step=step, transport="pickle", hops=hops, nbytes_sum=nbytes_sum,
                  nbytes_min=lo, nbytes_max=hi, wire_bytes_sum=nbytes_sum, num_items=items,
                  version_min=None, version_max=None, leaves=())
    return SendFold(st, channel)


def recv_fold(t, owner, channel, count, wire=None, step=0):
    return ReceiveFold(t, t - 1, 2, owner, "got", "pickle", channel, step, count, wire)


def run_join(shards):
    joined = join_run(shards)
    return joined.hops, joined.seam_steps


def figures(hops, steps):
    """(src, dst) -> [hops, bytes, items] over kept hops and seam-steps."""
    out: dict = {}
    for h in hops:
        f = out.setdefault((h.src, h.dst), [0, 0, 0])
        f[0] += 1
        f[1] += h.nbytes
        f[2] += len(h.items)
    for s in steps:
        f = out.setdefault((s.src, s.dst), [0, 0, 0])
        f[0] += s.hops
        f[1] += s.nbytes_sum
        f[2] += s.num_items
    return out


def test_a_channel_with_one_reader_gets_every_send_whole():
    # two producers, one consumer (a result queue); the consumer folded, the producers partly
    hops, steps = run_join([
        shard(1, send(1, "rank0", "q", "k1", 7), send_fold(5, "rank0", "q", 3, 90, step=1),
              send_fold(6, "rank1", "q", 4, 400, step=1)),
        shard(2, recv(2, "driver", "q", "other"), recv_fold(9, "driver", "q", 7)),
    ])
    assert figures(hops, steps) == {("rank0", "driver"): [4, 97, 0],
                                    ("rank1", "driver"): [4, 400, 0]}
    # whole: each fold is the sender's record with its receiver filled in, min and max kept
    assert sorted((s.src, s.hops, s.nbytes_min, s.nbytes_max) for s in steps) == [
        ("rank0", 3, 1, 100), ("rank1", 4, 1, 100)]


def test_a_shared_queue_splits_by_count_and_the_parts_add_up():
    hops, steps = run_join([
        shard(1, *[send_fold(10 * i, "driver", "q", 5, 1001 + i, step=i, items=5)
                   for i in range(4)]),
        shard(2, recv_fold(100, "worker/0", "q", 12), recv_fold(101, "worker/1", "q", 8)),
    ])
    got = figures(hops, steps)
    assert got[("driver", "worker/0")][0] == 12 and got[("driver", "worker/1")][0] == 8
    assert got[("driver", "worker/0")][1] + got[("driver", "worker/1")][1] == 4 * 1001 + 6
    assert got[("driver", "worker/0")][2] + got[("driver", "worker/1")][2] == 20
    assert ("driver", "(untraced)") not in got
    assert join_run([shard(1, send_fold(1, "a", "q", 5, 10)),
                     shard(2, recv_fold(2, "w0", "q", 2), recv_fold(2, "w1", "q", 3))]
                    ).shared == ["q"]  # the outputs say which figures were shared out
    # every send fold's parts add up to it, step by step
    for i in range(4):
        parts = [s for s in steps if s.step == i]
        assert sum(s.hops for s in parts) == 5 and sum(s.nbytes_sum for s in parts) == 1001 + i


def test_sends_nobody_received_go_to_the_fallback_and_extra_receipts_to_untraced():
    hops, steps = run_join([
        shard(1, send_fold(5, "driver", "q", 10, 1000)),
        shard(2, recv_fold(9, "worker/0", "q", 6)),
        shard(3, recv_fold(9, "engine", "other", 3, wire=300)),  # no traced sender at all
    ])
    got = figures(hops, steps)
    assert got[("driver", "worker/0")][:2] == [6, 600]
    assert got[("driver", "(untraced)")][:2] == [4, 400]
    assert got[("(untraced)", "engine")][:2] == [3, 300]


def test_fan_out_gives_every_reader_a_copy():
    hops, steps = run_join([
        shard(1, send_fold(5, "pub", "zmq:tcp://127.0.0.1:1", 4, 400)),
        shard(2, recv_fold(9, "sub/0", "zmq:tcp://127.0.0.1:1", 4)),
        shard(3, recv_fold(9, "sub/1", "zmq:tcp://127.0.0.1:1", 4)),
    ])
    assert figures(hops, steps) == {("pub", "sub/0"): [4, 400, 0], ("pub", "sub/1"): [4, 400, 0]}


def test_channels_without_folds_join_as_before():
    hops, steps = run_join([
        shard(1, send(1, "a", "q", "k", 5), send_fold(2, "a", "r", 1, 9)),
        shard(2, recv(3, "b", "q", "k")),
    ])
    assert edges(hops) == [("a", "b", 5)] and steps[0].dst == "(untraced)"
    assert not join_run([shard(1, send_fold(2, "a", "r", 4, 9)),
                         shard(2, recv_fold(3, "b", "r", 4))]).shared  # one reader: exact


def test_a_socket_on_several_endpoints_pools_its_family():
    # a PUB bound to two endpoints names only `zmq`; each SUB names the endpoint it is on
    hops, steps = run_join([
        shard(1, send_fold(5, "pub", "zmq", 4, 400)),
        shard(2, recv_fold(9, "sub/0", "zmq:ipc:/a", 4)),
        shard(3, recv_fold(9, "sub/1", "zmq:ipc:/b", 3), recv(10, "sub/1", "zmq:ipc:/b", "k")),
    ])
    assert figures(hops, steps) == {("pub", "sub/0"): [4, 400, 0], ("pub", "sub/1"): [4, 400, 0]}
    # a PUSH bound to two endpoints: its messages shared out between the two PULLs
    hops, steps = run_join([
        shard(1, send_fold(5, "push", "zmq", 10, 1000)),
        shard(2, recv_fold(9, "pull/0", "zmq:tcp:5555", 6)),
        shard(3, recv_fold(9, "pull/1", "zmq:tcp:5556", 4)),
    ])
    assert figures(hops, steps) == {("push", "pull/0"): [6, 600, 0], ("push", "pull/1"): [4, 400, 0]}
    # a PULL connected to two endpoints names only `zmq`: both senders' messages reach it
    hops, steps = run_join([
        shard(1, send_fold(5, "push/0", "zmq:tcp:5555", 3, 30)),
        shard(2, send_fold(6, "push/1", "zmq:tcp:5556", 2, 20)),
        shard(3, recv_fold(9, "pull", "zmq", 5)),
    ])
    assert figures(hops, steps) == {("push/0", "pull"): [3, 30, 0], ("push/1", "pull"): [2, 20, 0]}


def test_a_publisher_on_two_endpoints_fans_out_to_both():
    # the PUB names only `zmq`; its message reaches a SUB on each endpoint
    hops = join([shard(1, send(1, "pub", "zmq", "k", 30)),
                 shard(2, recv(2, "sub/0", "zmq:ipc:/a", "k"), recv(3, "sub/1", "zmq:ipc:/b", "k"))])
    assert edges(hops) == [("pub", "sub/0", 30), ("pub", "sub/1", 30)]
