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
