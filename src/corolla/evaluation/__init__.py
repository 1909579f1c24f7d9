"""Evaluation: a trained run's model applied to data, and the plain data it returns.

`inference` (open a run, load its model, batched class probabilities), `evaluate` (scores on
val), `predict` (the test split -> submission.csv), `tta` (test-time augmentation views),
`predictions` (the saved format), `ensemble` (blends of runs' saved predictions), `metrics`.
Importing this package imports none of them (nor TensorFlow).

    bias: per-class offsets on the log-probabilities, chosen on val for macro F1
    blend: a weighted average of several runs' saved class probabilities
    exported: exported models run by their own runtimes, and their agreement with Keras
    gradcam: Grad-CAM heatmaps on the run's own model: where the evidence for a class lies
    inference: a run opened once, its model loaded and checked, batched class probabilities
    label_review: labels that look wrong, found by confident learning on held-out predictions
    labelled: scores on a labelled split, as plain data
    metrics: classification metrics as plain data, defined as the competition scores them
    pool: a k-fold run's scores from its folds' saved predictions (out-of-fold, test averaged)
    predictions: saved predictions, the format of what a model said about a split
    tta: test-time augmentation: N views of every image, their probabilities averaged
    unlabelled: the unlabelled test split: ids, classes and probabilities as plain data
"""
