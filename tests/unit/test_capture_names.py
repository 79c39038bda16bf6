"""Item ids as the trace stores them: uuid.UUID is taken as its text without flowmap importing uuid."""

from __future__ import annotations

import uuid

from flowmap.capture.names import items_list


def test_a_uuid_item_is_its_text() -> None:
    u = uuid.UUID(int=7)
    assert items_list([u, "t1", 3]) == [str(u), "t1", 3]


def test_a_uuid_subclass_is_not_read_by_its_own_str() -> None:
    class Loud(uuid.UUID):
        def __str__(self) -> str:
            raise AssertionError("user code ran")

    got = items_list([Loud(int=1)])
    assert got is not None and got[0].startswith("<Loud@")


def test_item_ids_are_written_as_json() -> None:
    import json

    from flowmap.writer.encoder import items_json as _items_json

    for items in ([7], [1, 2, 3], [True], [True, 2], ["t0"], ["t0", 1], [10**30]):
        assert json.loads(_items_json(items)) == items
        assert type(json.loads(_items_json(items))[0]) is type(items[0])
    assert _items_json(None) == _items_json([]) == "null"


def test_the_hop_line_writes_item_ids_as_the_json_encoder_does() -> None:
    """`items_text`'s shortcuts (ints, one int, strings) give the encoder's own text."""
    from flowmap.capture.names import items_text

    cases: list[object] = [
        [], (), [7], (7,), [1, 2, 3], ["t0"], ("a", "b"), ['q"uote', "back\\slash", "tab\t"],
        ["日本", "é", "\udcff"], ["t0", 1], [True], [1, True], [10**30, 2], list(range(5000)),
        [str(i) for i in range(5000)], {"s", "t"}, range(3), None, "one", 5,
    ]
    for items in cases:
        assert items_text(items) == _items_json(items_list(items)), items
    assert items_text(iter([1])) is None  # an iterator is never used up


def _items_json(got: list[object] | None) -> str:
    from flowmap.writer.encoder import dumps as _dumps

    return "null" if not got else _dumps(got)
