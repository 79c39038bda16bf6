"""The built-in asynchronous GRPO trainer with a vLLM-style rollout engine.

A small but real RL pipeline, traced end to end through flowmap's public API
only: the reference for every hop of the loop, the demo, and the test bed.
Installed as `flowmap.trainer`; start at `driver.py` (the loop) and
`docs/trainer.md` (hop by hop). Run it with `examples/grpo_tiny.py`; with MoE +
DSA replay and its two transports, `examples/dsa_r3.py` (docs/case-study-dsa-r3.md).
"""
