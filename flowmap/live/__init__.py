"""Watch a run while it is written: `flowmap top`, the live page and `/metrics`.

All three consume one `flowmap.read.incremental.IncrementalReader` through a
`Watch` (`flowmap.live.watch`), py-spy style: one sample stream, independent
viewers.
"""
