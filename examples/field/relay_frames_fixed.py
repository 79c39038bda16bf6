"""Control for `relay_frames.py`: the bridge normalises the hidden states and sends what it
computed, frames of the same sizes. It is no relay: no finding may name it.

    flowmap trace examples/field/relay_frames_fixed.py && flowmap report
"""

from __future__ import annotations

from relay_frames import main

EXPECT = None

if __name__ == "__main__":
    main(transform=True)
