"""Knowing the data before training: duplicates within and across splits (the search, `corolla
check-data`), and conversions whose splits cannot leak. Tiny images, tens of files."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from corolla.cli import main
from corolla.data.audit import duplicates, findings, survey
from corolla.data.prepare import sources
from corolla.data.prepare.settings import Settings
from corolla.data.prepare.splits import assign_splits
from corolla.runs import paths
from helpers.images import copies_folder, photo, planted_folder


def _id_sets(result: survey.Survey, groups) -> list[set]:
    return [{result.entries[i].id for i in g.members} for g in groups]


def test_planted_copies_across_splits_are_found_and_distinct_images_are_not(tmp_path):
    planted = planted_folder(tmp_path / "photos")
    result = survey.survey(str(tmp_path / "photos"), log=lambda *a: None)
    assert len(result.entries) == 20 + 8 + 6 + 5 + 1
    found = _id_sets(result, result.groups)
    # Every planted pair, and nothing else: none of the distinct photos is flagged.
    assert sorted(map(sorted, found)) == sorted(map(sorted, planted["across"] + planted["within"]))
    assert sorted(map(sorted, _id_sets(result, result.across()))) == \
        sorted(map(sorted, planted["across"]))
    exact = [ids for ids, g in zip(found, result.groups) if g.exact]
    assert sorted(map(sorted, exact)) == [["test/same_pixels.bmp", "train/a/4.png"],
                                          ["train/b/5 (copy).png", "train/b/5.png"]]
    assert result.leaked() == {"val": 2, "test": 3}
    summary = result.summary()
    assert summary["splits"]["train"]["classes"] == {"a": 10, "b": 11}
    assert summary["splits"]["train"]["imbalance"] == pytest.approx(1.1)
    assert summary["splits"]["val"]["width"] == {"min": 38, "median": 48, "max": 48}
    assert summary["duplicates"]["across_groups"] == 5


def test_the_search_is_multi_index_and_finds_every_pair_within_the_threshold():
    """Pairs at distance <= THRESHOLD are all found (pigeonhole), farther ones never, on
    random hashes against a brute-force reference."""
    rng = np.random.default_rng(1)
    base = rng.integers(0, 2**63, 300, dtype=np.int64).astype(np.uint64)
    near = base[:60] ^ np.array([np.bitwise_or.reduce(
        np.uint64(1) << rng.choice(64, d, replace=False).astype(np.uint64))
        for d in rng.integers(1, duplicates.THRESHOLD + 3, 60)], dtype=np.uint64)
    hashes = np.concatenate([base, near])
    distance = np.bitwise_count(hashes[:, None] ^ hashes[None, :])
    i, j = np.nonzero(np.triu(distance <= duplicates.THRESHOLD, 1))
    expected = np.stack([i, j], 1)
    assert len(expected) > 40  # the test plants pairs on both sides of the threshold
    assert np.array_equal(duplicates.near_pairs(hashes), expected)


def test_check_data_prints_a_table_writes_json_and_strict_fails(tmp_path, cache, capsys):
    planted_folder(tmp_path / "photos")
    out = tmp_path / "check.json"
    assert main(["check-data", "--data", str(tmp_path / "photos"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "across splits: 5 group(s); images with a copy in another split: 2 of val, 3 of " \
        "test" in printed
    assert "[exact] train/a/4.png (a) = test/same_pixels.bmp" in printed
    saved = json.loads(out.read_text())
    paths = {m["path"] for g in saved["groups"] for m in g["members"]}
    assert str((tmp_path / "photos" / "test" / "brighter.png").resolve()) in paths
    # Never over a file; --strict: copies across splits are an error. From the cache now.
    assert main(["check-data", "--data", str(tmp_path / "photos"), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["check-data", "--data", str(tmp_path / "photos"), "--strict"]) == 2
    captured = capsys.readouterr()
    assert "from the cache" in captured.out
    assert len(captured.err.strip().splitlines()) == 1 and "--strict" in captured.err


def test_a_folder_converted_with_its_own_split_has_no_copies_across_splits(tmp_path, cache,
                                                                          capsys):
    planted = copies_folder(tmp_path / "photos")
    source = sources.scan(tmp_path / "photos")
    settings = Settings(image_sizes=(32,), val_fraction=0.3, test_fraction=0.2)
    # A plain stratified split would leak: this seed puts copies on both sides ...
    plain = assign_splits(source, settings.check())
    split_of = {i.id: name for name, items in plain.items() for i in items}
    assert any(len({split_of[f"a/g{k}{end}"] for end in (".png", "-small.png", "-q60.jpg")}) > 1
               for k in range(4))
    # ... the conversion keeps each group whole.
    assert main(["convert", str(tmp_path / "photos"), str(tmp_path / "out"), "--image-size",
                 "32", "--val-fraction", "0.3", "--test-fraction", "0.2"]) == 0
    assert f"copies: {planted} group(s) of exact or near duplicates" in capsys.readouterr().out
    result = survey.survey(str(tmp_path / "out"), log=lambda *a: None)
    assert result.across() == []
    assert len(result.groups) == planted  # still found, each inside one split
    record = json.loads((tmp_path / "out" / "convert.json").read_text())["duplicates"]
    assert record["searched"] and record["groups"] == planted and record["removed"] == []
    assert record["images_in_groups"] == 3 * planted


def test_dedupe_keeps_one_of_each_exact_copy_and_records_it(tmp_path, cache):
    root = tmp_path / "photos"
    copies_folder(root)
    shutil.copy(root / "a" / "0.png", root / "a" / "0 again.png")
    shutil.copy(root / "b" / "1.png", root / "b" / "1 again.png")
    assert main(["convert", str(root), str(tmp_path / "out"), "--image-size", "32",
                 "--dedupe"]) == 0
    manifest = json.loads((tmp_path / "out" / "convert.json").read_text())
    assert manifest["settings"]["dedupe"] is True
    assert manifest["duplicates"]["removed"] == [{"id": "a/0.png", "copy_of": "a/0 again.png"},
                                                 {"id": "b/1.png", "copy_of": "b/1 again.png"}]
    assert sum(manifest["images"].values()) == 2 * (12 + 12 + 1) - 2


def test_a_split_that_does_not_decode_lists_its_files_where_the_error_points(tmp_path,
                                                                           capsys):
    root = tmp_path / "photos"
    copies_folder(root / "train")
    (root / "val" / "a").mkdir(parents=True)
    for k in range(4):
        (root / "val" / "a" / f"{k}.jpg").write_text("not an image")
    assert main(["convert", str(root), str(tmp_path / "out"), "--image-size", "16"]) == 2
    captured = capsys.readouterr()
    error = captured.err.strip().splitlines()
    assert len(error) == 1 and "no image of the val split" in error[0]
    assert "e.g. val/a/0.jpg: " in error[0] and "listed above" in error[0]
    assert all(f"warning: val/a/{k}.jpg: " in captured.out for k in range(4))


def test_a_folder_too_small_to_split_advises_what_train_and_check_data_take(tmp_path, cache,
                                                                            capsys):
    """One image per class: the advice named --val-fraction / --test-fraction, flags only
    `convert` takes."""
    rng = np.random.default_rng(0)
    for cls in "ab":
        (tmp_path / "photos" / cls).mkdir(parents=True)
        photo(rng).save(tmp_path / "photos" / cls / "0.png")
    assert main(["check-data", "--data", str(tmp_path / "photos")]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if "not split" in line)
    assert "give the split yourself (train/ and val/ folders, or a CSV split column" in note
    assert "`corolla convert` also takes --val-fraction" in note


def test_copies_with_different_labels_come_first_everywhere(tmp_path, cache, capsys):
    """check-data said "4 group(s) hold copies with different labels" but listed same-label
    pairs only; train's line and the report never said it."""
    rng = np.random.default_rng(5)
    for cls in ("rose", "tulip"):
        (tmp_path / "photos" / cls).mkdir(parents=True)
        for k in range(12):
            photo(rng).save(tmp_path / "photos" / cls / f"{k}.png")
    for k in range(3):  # same-label copies: harmless within a split, listed after
        shutil.copy(tmp_path / "photos" / "rose" / f"{k}.png",
                    tmp_path / "photos" / "rose" / f"{k} again.png")
    shutil.copy(tmp_path / "photos" / "rose" / "11.png", tmp_path / "photos" / "tulip" / "z.png")
    assert main(["check-data", "--data", str(tmp_path / "photos"), "--out",
                 str(tmp_path / "found.json")]) == 0
    out = capsys.readouterr().out
    assert "1 group(s) hold copies with different labels (listed first" in out
    listed = [line for line in out.splitlines() if line.strip().startswith("[")]
    assert "labels differ" in listed[0] and "rose/11.png" in listed[0], listed
    assert all("labels differ" not in line for line in listed[1:])
    saved = json.loads((tmp_path / "found.json").read_text())
    assert [g["labels_differ"] for g in saved["groups"]][:2] == [True, False]
    result, _ = survey.cached(str(tmp_path / "photos"), cache / "checks")
    line = findings.one_line(result, "corolla check-data --data photos")
    assert line.startswith("data check: 1 group(s) of copies with different labels (one "
                           "label of each is wrong); ")
    from corolla.report import html

    (tmp_path / "run").mkdir()
    shutil.copy(tmp_path / "found.json", tmp_path / "run" / paths.DATA_CHECK)
    section = html._data_check(html.Sources(tmp_path / "run", "run", {}, tmp_path / "run"))
    assert "Copies with different labels: 1 group(s)" in section
    assert "near, labels differ" in section or "exact, labels differ" in section
    assert "rose/11.png" in section and "tulip/z.png" in section
