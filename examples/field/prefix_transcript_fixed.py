"""Control: the agent loop sends each turn's new text only.

The fix of `prefix_transcript.py`: the engine keeps each conversation (a session), and
every turn carries only what the tool added after the engine's last answer. The messages'
lengths do not grow: no prefix is resent.

    flowmap trace examples/field/prefix_transcript_fixed.py && flowmap report
"""

from __future__ import annotations

from prefix_transcript import main

EXPECT = None

if __name__ == "__main__":
    main(deltas=True)
