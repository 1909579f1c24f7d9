"""The predictions on photos say what each column holds: the class by name, its index as an
index, never a `label` column a reader takes for the class."""

import csv
import io
import json

import numpy as np

from corolla.report import photo_table

NAMES = ["daisy", "rose", "tulip"]


def test_the_csv_names_the_class_and_its_index_for_what_they_are():
    rows = photo_table.records(["a.jpg"], np.array([[0.1, 0.2, 0.7]]), NAMES, 2)
    table = list(csv.reader(io.StringIO(photo_table.csv_text(rows))))
    assert table[0] == ["path", "class_1", "class_index_1", "probability_1",
                        "class_2", "class_index_2", "probability_2"]
    assert table[1] == ["a.jpg", "tulip", "2", "0.700000", "rose", "1", "0.200000"]
    assert not any("label" in column for column in table[0])


def test_the_json_rows_use_the_csv_names():
    rows = photo_table.records(["a.jpg"], np.array([[0.6, 0.3, 0.1]]), NAMES, 1)
    saved = json.loads(photo_table.json_text(rows, {}))
    assert saved["predictions"] == [{"path": "a.jpg", "top": [
        {"class": "daisy", "class_index": 0, "probability": 0.6}]}]
