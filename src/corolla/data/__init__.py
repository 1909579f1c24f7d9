"""Data: the competition layout -> parsed records -> `tf.data` pipelines -> augmentation.

    augment: training-time augmentation on whole batches, inside `tf.data`, by name
    check: a fast pass over a split: record counts, label range, image headers (nothing decoded)
    class_weights: loss weights per class (`train.class_weight`), for rare classes
    classes: class names: the competition's 104 flowers, or a data set's own `classes.txt`
    convert: an image folder or a CSV -> sharded TFRecords in exactly the competition layout
    datasets: any data path -> a Layout (converted once into a cache when it is not one)
    duplicates: exact and near-duplicate images: one fingerprint per image, and their groups
    folds: k-fold splits: a run's train and val drawn from train+val pooled, a fold per id
    layout: finds a data set in the competition layout, on a local disk or on gs://
    petals: procedural "synthetic petals": a small, offline flower-classification task
    photos: anyone's photos listed and read as `corolla convert` reads images, for a model
    pipeline: `tf.data` pipelines over a split: train (shuffled, augmented) and eval/test
    records: the competition's TFRecord format: parsing and writing records
    sources: where images come from: image folders and CSVs listed as labelled items
    survey: `corolla check-data`'s pass: duplicates, class counts, sizes, undecodable files
    synthetic: writes the synthetic petals in exactly the competition layout
"""
