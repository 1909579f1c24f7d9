"""Damaged records met by the pipelines themselves (a file damaged after the check, a notebook
that never ran it): the stream's error names the file and the record, skipping keeps ids and
predictions aligned, and the Python API gets the CLI's one line."""

import numpy as np
import pytest
import tensorflow as tf

from corolla.data import check, layout, pipeline, records
from corolla.errors import DATA_ERROR, UserError
from helpers.records import GOOD, SIZE, damaged_data


def test_a_corrupt_jpeg_in_the_training_stream_is_found_and_named(tmp_path):
    """The training stream shuffles records from all files; the error is traced back to its
    record all the same (as the CLI does, without a model to build)."""
    paths = damaged_data(tmp_path / "data", {("train", 1): "corrupt"})
    split = layout.open_layout(str(tmp_path / "data")).split("train")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(pipeline.train_dataset(split, SIZE, 8, epoch_examples=32).take(4))
    assert check.explain(info.value) == (
        f"the image of record 5 (id tr1-0005) of {paths['train', 1]} does not decode (corrupt "
        f"JPEG data); {records.SKIP_HINT}")
    assert check.explain(ValueError("a bug")) is None


def test_the_stream_error_carries_the_marker_the_file_and_the_id(tmp_path):
    """The assertion's data are pieces (joining them would cost every record a string op)."""
    paths = damaged_data(tmp_path / "data", {("val", 0): "not_jpeg"})
    split = layout.open_layout(str(tmp_path / "data")).split("val")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(pipeline.read(split, SIZE, ordered=True))
    assert (f"[{DATA_ERROR}: ] [record ] [3] [ (id ] [va0-0003] [) of ] [{paths['val', 0]}] "
            f"[ holds no image") in str(info.value)


def test_skipping_keeps_predictions_and_ids_aligned(tmp_path):
    """Skipped val records are left out of both ids and images; an undecodable test image is
    predicted from a blank image in its own place, so every test id keeps its row."""
    damaged_data(tmp_path / "data", {("val", 0): "corrupt", ("val", 1): "truncated",
                                     ("test", 0): "not_jpeg"})
    data = layout.open_layout(str(tmp_path / "data"))
    val = check.check_split(data.split("val"), 4, skip_bad_records=True)
    assert [f.count for f in val.files] == [GOOD - 1, GOOD - 1] and val.count == 30
    meta = pipeline.metadata(val, skip_bad_records=True)
    assert len(meta["ids"]) == 30 and "va0-0005" not in meta["ids"]
    assert "va1-0015" not in meta["ids"]  # the cut-off last record
    images = np.concatenate(list(pipeline.eval_dataset(val, SIZE, 8, skip_bad_records=True)))
    assert images.shape[0] == 32  # 30 images + 2 blanks of padding
    kept = [np.asarray(e["image"], np.float32) for e in
            pipeline.read(val, SIZE, ordered=True, skip_bad_records=True)]
    np.testing.assert_array_equal(images[:30], np.stack(kept))

    test = check.check_split(data.split("test"), 4, skip_bad_records=True)
    ids = pipeline.metadata(test, skip_bad_records=True)["ids"]
    assert test.count == len(ids) == GOOD and ids[3] == "te0-0003"
    images = np.concatenate(list(pipeline.eval_dataset(test, SIZE, 8, skip_bad_records=True)))
    assert images.shape[0] == GOOD and not images[3].any() and images[2].any()


def test_the_python_api_gets_the_clis_one_line_for_a_damaged_stream(tmp_path):
    """`corolla.train()` and `Run.evaluate()` translate library errors as the CLI does (one
    shared `flows.library_errors`): a notebook user sees the file and the record, not TensorFlow."""
    from corolla.flows.library_errors import as_user_errors

    paths = damaged_data(tmp_path / "data", {("val", 0): "not_jpeg"})
    split = layout.open_layout(str(tmp_path / "data")).split("val")
    with pytest.raises(UserError) as info, as_user_errors(note=lambda line: None):
        for _ in pipeline.eval_dataset(split, SIZE, 8):
            pass
    assert str(info.value).startswith(
        f"record 3 (id va0-0003) of {paths['val', 0]} holds no image: its bytes do not start")
    with pytest.raises(ZeroDivisionError), as_user_errors():  # a bug keeps its traceback
        1 / 0
