"""Data: the competition layout -> parsed records -> `tf.data` pipelines -> augmentation."""
