"""The Python API and the HTML report: the notebook workflow (train, evaluate, predict, report)
returns the run's files and metrics; the shared tiny run's report.html holds every metric and
embeds every picture, escapes text, has no outside resource, and renders in a real headless
browser (no missing image)."""

import base64
import html
import json
import os
import shutil
from pathlib import Path

import pytest

import corolla
from corolla.report import html as html_report
from corolla.report import submission
from corolla.cli import main
from corolla.errors import UserError
from corolla.runs import paths


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture
def run(tiny_run):
    """The session's tiny run, opened as a notebook opens it."""
    return corolla.open_run(tiny_run)


@pytest.mark.slow
def test_notebook_workflow_returns_the_runs_files_and_metrics(tiny_petals, tmp_path):
    """A tiny run trained the notebook way: 1 epoch of 2 steps."""
    lines = []
    run = corolla.train(data=tiny_petals, epochs=1, steps_per_epoch=2, batch_size=8,
                        learning_rate=3e-3, runs_dir=tmp_path, name="nb", log=lines.append)
    assert any(line.startswith("val: accuracy") for line in lines)
    assert isinstance(run, corolla.Run) and run.path.name == "nb"
    for path in (*(run.path / name for name in (paths.MODEL, paths.METRICS, paths.REPORT,
                                                paths.SUBMISSION, paths.CONFUSION)),
                 paths.predictions_file(run.path, "val"), paths.predictions_file(run.path, "test")):
        assert path.is_file(), path
    assert run.config.train.epochs == 1 and run.config.train.steps_per_epoch == 2
    assert run.metrics == json.loads((run.path / paths.METRICS).read_text())
    assert run.metrics["num_examples"] == 32  # the val split of tiny_petals

    again = run.evaluate()
    assert again["accuracy"] == run.metrics["accuracy"]  # the same model, the same images
    assert again["f1_macro"] == pytest.approx(run.metrics["f1_macro"])
    path = run.predict(tta=1)
    assert path == run.path / paths.SUBMISSION and submission.row_count(path) == 20
    report = run.report()
    assert report.path == run.path / paths.REPORT and report.path.is_file()
    assert report._repr_html_().count("<img") == len(list(run.path.glob("*.png"))) >= 4
    assert "<img" in run._repr_html_()
    assert corolla.open_run(run.path).metrics == run.metrics


def test_unknown_or_misplaced_settings_are_named(run, tmp_path):
    with pytest.raises(UserError, match=r"unknown setting epoch= \(did you mean epochs=\); "
                                        r"it takes .*epochs="):
        corolla.train(data=tmp_path, epoch=3)
    with pytest.raises(UserError, match=r"Run.evaluate\(\) got an unknown setting epochs="):
        run.evaluate(epochs=3)  # a trained run's settings are its own
    with pytest.raises(UserError, match="not a run folder"):
        corolla.open_run(tmp_path)


def test_report_names_the_datas_size_and_the_models_input_size(run):
    text = (run.path / paths.REPORT).read_text()
    config = run.config
    assert f"<th>data image size</th><td>{config.data.image_size} px</td>" in text
    assert f"<th>model input size</th><td>{config.model.input_size} px</td>" in text


def test_report_holds_every_metric_and_embeds_every_picture(run):
    text = (run.path / paths.REPORT).read_text()
    m = run.metrics
    for key, _ in html_report.SUMMARY:
        assert f"{m[key]:.4f}" in text, key
    for row in m["per_class"]:
        assert html.escape(row["name"].strip()) in text
        cells = "".join(f'<td class="num">{row[k]:.4f}</td>' for k in ("precision", "recall",
                                                                       "f1"))
        assert f'<td class="num">{row["support"]}</td>{cells}' in text
    for key in ("num_examples", "num_classes_present", "num_classes_scored"):
        assert f'<td class="num">{m[key]}</td>' in text
    pictures = sorted(run.path.glob("*.png"))
    assert {p.name for p in pictures} >= {paths.CONFUSION, paths.CURVES, paths.SAMPLES,
                                          paths.MISTAKES}
    for picture in pictures:
        assert base64.b64encode(picture.read_bytes()).decode() in text, picture.name
    assert "tensorflow" in text and html.escape(f'name = "{run.path.name}"') in text  # plan, config
    assert "Training history (1 epoch" in text and "session 1 started" in text
    # Self-contained: no script, no link, nothing fetched.
    assert "<script" not in text and "href=" not in text and "url(" not in text
    assert text.count("src=") == text.count('src="data:image/png;base64,') == len(pictures)


def test_ensemble_folder_has_its_report_with_members_and_escaped_names(run, tmp_path):
    from corolla.flows.ensemble import ensemble_run
    from corolla.evaluation import predictions
    from corolla.report import scored

    twin = tmp_path / "twin"  # a second member: the same predictions, under other class names
    (twin / paths.PREDICTIONS).mkdir(parents=True)
    for split in ("val", "test"):
        saved = predictions.load(predictions.path_in(run.path, split))
        names = tuple(f"<b>{n} & co</b>" for n in saved.class_names)
        scored.save_predictions(predictions.path_in(twin, split), saved.ids,
                                saved.labels if split == "val" else None, saved.probabilities,
                                names)
    shutil.copytree(twin, tmp_path / "twin2")
    out = ensemble_run([twin, tmp_path / "twin2"], weights="1,1",
                       out=tmp_path / "blend", log=lambda line: None)
    text = (out / paths.REPORT).read_text()
    m = json.loads((out / paths.METRICS).read_text())
    assert "Members and weights" in text and "0.500" in text and f"{m['f1_macro']:.4f}" in text
    assert "&lt;b&gt;" in text and "<b>" not in text  # class names are text, not markup
    assert base64.b64encode((out / paths.CONFUSION).read_bytes()).decode() in text
    assert paths.CONFIG not in text  # an ensemble has members, not a config


def test_report_of_a_run_without_evaluation_says_to_evaluate(run, tmp_path, capsys):
    bare = tmp_path / "bare"  # trained (its model is there), never evaluated
    bare.mkdir()
    shutil.copy(run.path / paths.CONFIG, bare)
    shutil.copy(run.path / paths.MODEL, bare)
    assert main(["report", str(bare)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"run `corolla evaluate {bare}` first" in err
    assert not (bare / paths.REPORT).exists()


def test_report_renders_in_a_headless_browser(tiny_run_copy, tmp_path):
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.environ.get("CI"):
            pytest.fail("CI must render the report: install chromium and chromium-driver")
        pytest.skip("no /usr/bin/chromium and /usr/bin/chromedriver: on Debian or Ubuntu, "
                    "`sudo apt-get install chromium chromium-driver` (as .ci/run does; see "
                    "docs/contributing.md) renders report.html in this test")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    run = corolla.open_run(tiny_run_copy)
    assert main(["report", str(run.path)]) == 0
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.get((run.path / paths.REPORT).resolve().as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth]);")
        assert len(images) == len(list(run.path.glob("*.png")))
        assert all(complete and width > 0 for complete, width in images), images
        shown = driver.execute_script("return document.body.innerText;")
        for key, _ in html_report.SUMMARY:
            assert f"{run.metrics[key]:.4f}" in shown, key
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert min(pixels.shape[:2]) >= 500 and pixels[..., :3].std() > 0.05  # not blank
