"""Training: the seven steps of splitting and moving a batch, and the data-parallel ranks.

    split.py     1 pad to divisible, 2 reorder by token count, 3 split across ranks,
                 5 micro-batches (trimmed to their own widths)
    shm_pool.py  4 the shared-memory pool the micro-batches and weights travel through
    loss.py      6 the [:, -R-1:-1] slice, log-probs and entropy; 7 split-invariant PPO loss
    rank.py      one DP rank process: micro-batches in, gradients all-reduced, optimiser step
    group.py     the driver's handle on the ranks: spawn, submit, poll, weights, close
"""
