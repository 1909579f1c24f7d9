"""`corolla submit`: a run's submission.csv sent to a Kaggle competition through the official
`kaggle` package (an optional extra: pip install "corolla[kaggle]").

Everything that can be found out here is found before anything is sent: the file is checked
(`corolla.report.submission.check`) against the test ids and classes the run saved with its test
predictions (predictions/test.npz), then the package and the credentials are looked for. The
credentials are looked for before `kaggle` is imported, because the package authenticates on
import and, in some versions, ends the process when it finds none.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

from corolla.errors import UserError, first_line
from corolla.evaluation import predictions
from corolla.report import submission
from corolla.runs import paths

INSTALL = 'pip install "corolla[kaggle]"'
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]*")


def checked_file(target: str | Path) -> Path:
    """The submission file of a run or ensemble folder (or a CSV file beside its folder's
    predictions/), checked against the test ids and classes saved in predictions/test.npz."""
    target = Path(target)
    if target.is_dir():
        folder, path = target, target / paths.SUBMISSION
        if not path.is_file():
            raise UserError(f"{target} has no {paths.SUBMISSION}; run `corolla predict "
                            f"{target}` first")
    elif target.is_file():
        folder, path = target.parent, target
    else:
        raise UserError(f"{target} does not exist; pass a run folder holding "
                        f"{paths.SUBMISSION}, e.g. runs/<run>")
    saved = predictions.path_in(folder, "test")
    if not saved.is_file():
        raise UserError(f"{folder} has no saved test predictions ({saved}) to check {path} "
                        f"against; run `corolla predict {folder}` first")
    test = predictions.load(saved)
    problems = submission.check(path, test.ids, len(test.class_names))
    if problems:
        raise UserError(submission.problems_text(path, problems) + "\nnothing was sent to Kaggle")
    return path


def credentials(env=None, home: Path | None = None) -> str | None:
    """Where the kaggle package would find credentials (a phrase for people), or None. The
    places are those of the current package: an access token (KAGGLE_API_TOKEN, the token or a
    file holding it; ~/.kaggle/access_token; the token file of a Kaggle notebook), a legacy API
    key (KAGGLE_USERNAME + KAGGLE_KEY; kaggle.json in $KAGGLE_CONFIG_DIR, else ~/.kaggle/ or
    ~/.config/kaggle/), or the OAuth login of `kaggle auth login` (~/.kaggle/credentials.json)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else Path(home)
    if env.get("KAGGLE_API_TOKEN"):
        return "KAGGLE_API_TOKEN"
    notebook_token = env.get("KAGGLE_API_V1_TOKEN_PATH")
    if notebook_token and Path(notebook_token).is_file():
        return "KAGGLE_API_V1_TOKEN_PATH"
    if env.get("KAGGLE_USERNAME") and env.get("KAGGLE_KEY"):
        return "KAGGLE_USERNAME and KAGGLE_KEY"
    for path in [*_config_files(env, home), home / ".kaggle" / "access_token",
                 home / ".kaggle" / "access_token.txt", home / ".kaggle" / "credentials.json"]:
        if path.is_file():
            return str(path)
    return None


def _config_files(env, home: Path) -> list[Path]:
    if env.get("KAGGLE_CONFIG_DIR"):  # the package then looks there only
        return [Path(env["KAGGLE_CONFIG_DIR"]).expanduser() / "kaggle.json"]
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return [home / ".kaggle" / "kaggle.json", xdg / "kaggle" / "kaggle.json"]


def _where_to_put(env, home: Path) -> str:
    folder = _config_files(env, Path(home))[0].parent
    return (f"no Kaggle credentials found: download kaggle.json (kaggle.com > Settings > API > "
            f"Create New Token) into {folder}/, or set KAGGLE_API_TOKEN (or KAGGLE_USERNAME "
            f"and KAGGLE_KEY)")


def _installed() -> bool:
    if "kaggle" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("kaggle") is not None
    except ValueError:  # a module without a spec
        return False


def submit(path: str | Path, competition: str, message: str, log=print):
    """Sends the file at `path` (checked already) to `competition`; returns what the API
    answered."""
    if not _SLUG.fullmatch(competition or ""):
        raise UserError(f"--competition takes the competition's name as in its URL "
                        f"(kaggle.com/competitions/NAME), e.g. tpu-getting-started; got "
                        f"{competition!r}")
    if not (message or "").strip():
        raise UserError("-m/--message is empty; describe the submission (Kaggle shows it)")
    if not _installed():
        raise UserError(f"corolla submit needs the kaggle package: {INSTALL}")
    found = credentials()
    if found is None:
        raise UserError(_where_to_put(os.environ, Path.home()))
    try:
        kaggle = importlib.import_module("kaggle")  # authenticates (see the module)
    except (Exception, SystemExit) as e:
        raise UserError(f"the kaggle package could not authenticate with the credentials in "
                        f"{found} ({first_line(e)}); check them, or create a new token on "
                        f"kaggle.com > Settings > API") from None
    try:
        answer = kaggle.api.competition_submit(file_name=str(path), message=message,
                                               competition=competition)
    except Exception as e:  # HTTP errors: rules not accepted, unknown competition, limit
        raise UserError(f"Kaggle did not take the submission to {competition!r}: "
                        f"{first_line(e)}") from None
    said = getattr(answer, "message", None) or answer
    log(f"submitted {path} to {competition}: {said} (scores: "
        f"https://www.kaggle.com/competitions/{competition}/submissions)")
    return answer


def submit_run(target: str | Path, competition: str, message: str, log=print):
    """`corolla submit RUN --competition SLUG -m MESSAGE`: checks, then sends."""
    return submit(checked_file(target), competition, message, log=log)
