"""Control: each rank's own chunk pickled apart and sent down its pipe.

The fix of `every_rank_serialised_once.py`: the controller pickles rank `r`'s rows
alone. Every message has the same length (equal chunks, one layout), but not the same
bytes: no duplicate.

    flowmap trace examples/field/every_rank_serialised_once_fixed.py && flowmap report
"""

from __future__ import annotations

from every_rank_serialised_once import main

EXPECT = None

if __name__ == "__main__":
    main(chunked=True)
