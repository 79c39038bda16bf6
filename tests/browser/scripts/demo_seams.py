"""The demo trainer's seams as one run drew them (no weight-sync resubmits), replayed by hand.

Where a weight update found no request in flight, `examples/grpo_tiny.py` records no
`resubmit` seam, and its layout drew the batcher's four edges to the two ranks close
side by side: labels placed greedily along their own lines left two of them out.
Each seam is sent its hops spread over 4 steps, at its size per hop.
"""

import flowmap

# (src, dst, name, bytes per hop, hops in 4 steps, transport), in order of first use
SEAMS = [
    ('driver', 'trainer/rank0', 'Job', 1005, 2, 'pickle'),
    ('driver', 'trainer/rank1', 'Job', 1005, 2, 'pickle'),
    ('dataset', 'driver', 'env_group', 60, 20, 'ref'),
    ('driver', 'rollout/0', 'request', 70, 83, 'ref'),
    ('driver', 'rollout/1', 'request', 70, 77, 'ref'),
    ('rollout/0', 'env', 'turn', 59, 207, 'ref'),
    ('env', 'rollout/0', 'env_reply', 135, 124, 'ref'),
    ('rollout/1', 'env', 'turn', 59, 191, 'ref'),
    ('env', 'rollout/1', 'env_reply', 135, 114, 'ref'),
    ('rollout/0', 'ready_buffer', 'trajectory', 576, 83, 'ref'),
    ('rollout/1', 'ready_buffer', 'trajectory', 571, 77, 'ref'),
    ('ready_buffer', 'batcher', 'samples', 18599, 4, 'ref'),
    ('batcher', 'reward', 'rollout_batch', 31076, 4, 'ref'),
    ('reward', 'advantage', 'token_level_rewards', 2123, 4, 'ref'),
    ('advantage', 'batcher', 'advantages', 1930, 4, 'ref'),
    ('batcher', 'trainer/rank0', 'Job', 1044, 4, 'pickle'),
    ('batcher', 'trainer/rank1', 'Job', 1039, 4, 'pickle'),
    ('driver', 'trainer/rank0', 'initial_weights', 425984, 1, 'shm'),
    ('batcher', 'trainer/rank0', 'micro_batch', 6000, 8, 'shm'),
    ('driver', 'trainer/rank1', 'initial_weights', 425984, 1, 'shm'),
    ('batcher', 'trainer/rank1', 'micro_batch', 6000, 8, 'shm'),
    ('trainer/rank0', 'group[0,1]', 'all_reduce', 213008, 8, 'collective'),
    ('trainer/rank1', 'group[0,1]', 'all_reduce', 213008, 8, 'collective'),
    ('trainer/rank1', 'driver', 'RankResult', 188, 4, 'pickle'),
    ('trainer/rank0', 'weight_sync', 'state_dict', 425984, 4, 'shm'),
    ('trainer/rank0', 'driver', 'RankResult', 1864, 4, 'pickle'),
    ('rollout/0', 'weight_sync', 'paused', 0, 4, 'ref'),
    ('weight_sync', 'rollout/0', 'weights', 425984, 4, 'ref'),
    ('rollout/1', 'weight_sync', 'paused', 0, 4, 'ref'),
    ('weight_sync', 'rollout/1', 'weights', 425984, 4, 'ref'),
]

if __name__ == "__main__":
    for step in range(4):
        flowmap.step(step)
        for src, dst, name, size, hops, transport in SEAMS:
            for _ in range(hops // 4 + (1 if step < hops % 4 else 0)):
                flowmap.hop(src, dst, bytes(size), name=name, transport=transport)
