"""Numbers sent as text, counted from a few windows of the frame a transport serialised.

GIVEN the bytes a transport wrote for a text message,
WHEN they are numbers written as text (JSON, CSV),
THEN the count is estimated within a fifth, and nothing else reads as numbers.
"""

from __future__ import annotations

import base64
import json
import pickle
import random

import pytest
import torch

from flowmap.integrations.transports import number_text


@pytest.mark.parametrize("encode", [
    lambda v: json.dumps(v).encode(),  # send_string, send_bytes
    lambda v: pickle.dumps(json.dumps(v)),  # a str put on a queue or a pipe
    lambda v: json.dumps({"advantages": v}).encode(),
    lambda v: ",".join(f"{x:.6f}" for x in v).encode(),  # CSV
])
def test_floats_written_as_text_are_counted_within_a_fifth(encode):
    values = torch.randn(4096).tolist()
    found = number_text.numbers_in(encode(values))
    assert found is not None and abs(found - 4096) <= 4096 // 5


def test_token_ids_as_text_are_counted_too():
    ids = torch.randint(0, 50_000, (4096,)).tolist()
    found = number_text.numbers_in(json.dumps(ids).encode())
    assert found is not None and abs(found - 4096) <= 4096 // 5


def test_prose_binary_base64_empty_lists_and_small_frames_are_no_numbers():
    rng = random.Random(0)
    prose = " ".join(rng.choice(("seven", "plus", "4", "is", "11,", "so")) for _ in range(2000))
    array = torch.randn(4096)
    for frame in (prose.encode(), pickle.dumps(array), array.numpy().tobytes(),
                  base64.b64encode(array.numpy().tobytes()), json.dumps([[]] * 1000).encode(),
                  json.dumps([1.5] * 10).encode()):
        assert number_text.numbers_in(frame) is None


def test_a_note_names_the_text_leaf_that_is_most_of_the_message():
    frame = json.dumps(torch.randn(1024).tolist()).encode()
    leaves = [("", "str", (len(frame),), "", "", len(frame), 1, None)]
    path, nbytes, storage, real, numbers = number_text.note(leaves, frame, len(frame))
    assert (path, nbytes, storage, real) == ("", len(frame), None, None)
    assert abs(numbers - 1024) <= 1024 // 5
    # a small string beside the bulk of the message is not what the frame's text is
    small = [("tag", "str", (10,), "", "", 10, 1, None), ("x", "tensor", (4096,), "", "", 16384,
                                                         1, None)]
    assert number_text.note(small, frame, len(frame)) is None
