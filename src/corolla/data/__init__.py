"""Data: the competition layout -> parsed records -> `tf.data` pipelines -> augmentation.

The modules here are what training, evaluation and prediction read; the subpackages make data
(`prepare`: image folders and CSVs into the competition layout), check it (`audit`: `corolla
check-data`) and draw it (`synthetic`: the demo's petals).

    augment: training-time augmentation on whole batches, inside tf.data, by name
    check: a fast pass over a split before it is read; damaged records found, skipped, explained
    class_weights: loss weights per class (config train.class_weight), for rare classes
    classes: class names: the competition's 104 flowers, or a data set's own classes.txt
    datasets: any data path -> a Layout: read as it is, or converted once into a cache
    folders: the competition layout's folder names, read without TensorFlow
    folds: k-fold splits: a run's train and val drawn from train+val pooled, by a fold per id
    layout: finds a data set in the competition layout, on a local disk or on gs://
    pipeline: tf.data pipelines over a split: train, and eval/test padded to full batches
    records: the competition's TFRecord format: parsing and writing
    audit: know the data before training (corolla check-data): duplicates, classes, sizes
    prepare: image folders and CSVs -> the competition layout (corolla convert), and its cache
    synthetic: the procedural petals of the demo, in the competition layout
"""
