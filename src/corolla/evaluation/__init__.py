"""Evaluation: a trained run's model applied to data, and the plain data it returns.

`inference` (open a run, load its model, batched class probabilities), `evaluate` (scores on
val), `predict` (the test split -> submission.csv), `tta` (test-time augmentation views),
`predictions` (the saved format), `ensemble` (blends of runs' saved predictions), `metrics`.
Importing this package imports none of them (nor TensorFlow).
"""
