"""What a model's outputs are scored by, below both training (its val F1 each epoch, the time
probe) and evaluation (a trained run's scores): the metrics, test-time augmentation's views,
and batched prediction over a split or images in memory. Nothing here knows of runs.

    batched: a model's class probabilities over a split or images, batch by batch
    metrics: macro F1 (the competition's metric), per-class scores, bootstrap intervals
    tta: test-time augmentation's views of a batch (flips, then zooms, shifts, rotations)
"""
