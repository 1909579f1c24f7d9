"""Preprocessing layers that are part of saved models (so they must be serializable)."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="corolla")
class CaffePreprocessing(keras.layers.Layer):
    """RGB [0, 255] -> BGR minus the ImageNet channel means: what VGG16's weights expect
    (`keras.applications.vgg16.preprocess_input`, as a layer so it is saved with the model)."""

    MEAN_BGR = (103.939, 116.779, 123.68)

    def call(self, images):
        bgr = keras.ops.flip(images, axis=-1)
        return bgr - keras.ops.cast(keras.ops.convert_to_tensor(self.MEAN_BGR), bgr.dtype)
