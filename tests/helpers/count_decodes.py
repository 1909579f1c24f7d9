"""Runs the `corolla` command and, at exit, prints how many training images this process
decoded (`DECODED total largest-batch`): every batch `pipeline.decode_batch` makes is counted
as tf.data runs it.

    python count_decodes.py corolla-args...
"""

import atexit
import sys

import tensorflow as tf

import corolla.data.pipeline as pipeline

counts = []
_decode_batch = pipeline.decode_batch


def counted(*args, **kwargs):
    images, labels = _decode_batch(*args, **kwargs)
    noted = tf.py_function(lambda n: counts.append(int(n)) or n, [tf.shape(images)[0]],
                           tf.int32)
    with tf.control_dependencies([noted]):
        return tf.identity(images), labels


pipeline.decode_batch = counted
atexit.register(lambda: print(f"DECODED {sum(counts)} {max(counts, default=0)}", flush=True))

from corolla.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
