"""Evaluation: a trained run's model applied to data, and the plain data it returns.

`inference` (open a run, load its model), `labelled` (scores on val), `unlabelled` (the test
split's predictions), `predictions` (the saved format), `blend` (blends of runs' saved
predictions); the metrics, TTA views and batched prediction it shares with training are
`corolla.scoring`'s. Importing this package imports none of them (nor TensorFlow).

    bias: per-class offsets on the log-probabilities, chosen on val for macro F1
    blend: a weighted average of several runs' saved class probabilities
    exported: exported models run by their own runtimes, and their agreement with Keras
    gradcam: Grad-CAM heatmaps on the run's own model: where the evidence for a class lies
    inference: a run opened once, its model loaded and checked, its data opened
    label_review: labels that look wrong, found by confident learning on held-out predictions
    labelled: scores on a labelled split, as plain data
    pool: a k-fold run's scores from its folds' saved predictions (out-of-fold, test averaged)
    predictions: saved predictions, the format of what a model said about a split
    unlabelled: the unlabelled test split: ids, classes and probabilities as plain data
"""
