"""Raw bytes a relay sends, matched to a message it received by a sample of its content.

GIVEN the bytes of messages received (as a transport serialised them),
WHEN the process sends raw bytes it serialised itself,
THEN they carry the storages of a received message whose sample they contain, and only then.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from flowmap.integrations.transports import relay_bytes


@pytest.fixture(autouse=True)
def _nothing_kept():
    relay_bytes._kept.clear()
    yield
    relay_bytes._kept.clear()


def test_a_relay_that_pickles_what_it_got_into_bytes_of_its_own_carries_its_storages():
    # GIVEN observations received in one pickle, sent on in another (a dataclass around a
    # tensor on the same memory), and other observations sent beside
    obs = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    received = pickle.dumps({"obs": obs})
    relay_bytes.keep(relay_bytes.sample_of(received), "7")
    sent_on = pickle.dumps(("batch", torch.from_numpy(obs)))
    other = pickle.dumps(np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32))
    # THEN the re-serialised bytes carry storage 7 on, the others nothing
    assert relay_bytes.carried(sent_on) == "7"
    assert relay_bytes.carried(bytearray(sent_on)) == "7"
    assert relay_bytes.carried(other) == ""


def test_uniform_or_small_messages_give_no_sample():
    # GIVEN zeros (padding), small integer ids, and a message under the threshold
    zeros = pickle.dumps(np.zeros((64, 1024), dtype=np.float32))
    ids = pickle.dumps(np.arange(65536, dtype=np.int64) % 3)
    small = pickle.dumps(np.random.default_rng(0).standard_normal(100))
    # THEN none is kept: their content would match bytes that are not theirs
    assert [relay_bytes.sample_of(b) for b in (zeros, ids, small)] == [None, None, None]
    relay_bytes.keep(None, "3")
    assert relay_bytes._kept == []


def test_at_most_the_latest_messages_are_kept():
    rng = np.random.default_rng(2)
    messages = [pickle.dumps(rng.standard_normal(16384).astype(np.float32))
                for _ in range(relay_bytes.MAX_KEPT + 2)]
    for i, m in enumerate(messages):
        relay_bytes.keep(relay_bytes.sample_of(m), str(i))
    assert len(relay_bytes._kept) == relay_bytes.MAX_KEPT
    assert relay_bytes.carried(messages[0]) == ""  # forgotten
    assert relay_bytes.carried(messages[-1]) == str(len(messages) - 1)


def test_a_copy_of_a_message_sent_again_as_an_object_is_that_message_and_only_a_whole_copy():
    # GIVEN a rollout batch received as one pickle: three arrays, stored as ids 4, 5 and 6
    rng = np.random.default_rng(3)
    batch = {"tokens": rng.integers(0, 32000, (16, 256)), "logprobs": -rng.random((16, 256)),
             "values": rng.standard_normal((16, 256))}
    received = pickle.dumps(batch)
    relay_bytes.keep(relay_bytes.sample_of(received), "4,5,6", len(received), (), "buffer")
    # WHEN a relay sends a deep copy of it; the copy with its values computed anew; the copy
    # with a fourth array; and a new batch of the same shapes
    import copy

    again = pickle.dumps(copy.deepcopy(batch))
    changed = pickle.dumps({**batch, "values": batch["values"] * 0.5})
    grown = pickle.dumps({**batch, "extra": rng.standard_normal(16)})
    fresh = np.random.default_rng(9)
    other = pickle.dumps({"tokens": fresh.integers(0, 32000, (16, 256)),
                          "logprobs": -fresh.random((16, 256)),
                          "values": fresh.standard_normal((16, 256))})
    # THEN only the whole copy, with as many arrays, sent on by the stage that received it,
    # is the message received
    assert relay_bytes.copied(again, 3, (), "buffer") == "4,5,6"
    assert relay_bytes.copied(again, 3, (), "server") == ""  # not who received it
    assert relay_bytes.copied(again, 2, (), "buffer") == ""
    assert relay_bytes.copied(changed, 3, (), "buffer") == ""
    assert relay_bytes.copied(grown, 4, (), "buffer") == ""
    assert relay_bytes.copied(other, 3, (), "buffer") == ""


def test_views_of_the_message_received_are_no_copy_of_it():
    # GIVEN a tensor and an array received (their pickles' samples kept with them)
    t = torch.randn(64, 512)
    a = np.random.default_rng(4).standard_normal((64, 512)).astype(np.float32)
    for got, ids in ((t, "1"), (a, "2")):
        relay_bytes._kept.clear()
        received = pickle.dumps(got)
        relay_bytes.keep(relay_bytes.sample_of(received), ids, len(received), [got])
        # WHEN a view of it is sent (torch pickles a view's whole storage), and a clone
        view, clone = got[8:], got.copy() if isinstance(got, np.ndarray) else got.clone()
        # THEN the view is the very memory received, linked by identity; the clone a copy
        assert relay_bytes.copied(pickle.dumps(got), 1, [view]) == ""
        assert relay_bytes.copied(pickle.dumps(clone), 1, [clone]) == ids


def test_a_message_received_after_a_send_began_is_not_what_it_sends():
    # GIVEN raw frames a bridge thread sends at t=100, and the trainer thread's receipt of
    # those very frames at t=150, recorded before the bridge's send was
    frame = np.random.default_rng(5).standard_normal(32768).astype(np.float32).tobytes()
    relay_bytes.keep(relay_bytes.sample_of(frame), "9", len(frame), (), "trainer", 150)
    # THEN the send carries nothing on; a send that began after the receipt carries it
    assert relay_bytes.carried(frame, 100) == ""
    assert relay_bytes.carried(frame, 200) == "9"
