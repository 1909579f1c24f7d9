"""Writers: data -> files. `plots` (PNG figures, metrics.json, output folders), `html`
(report.html), `submission` (submission.csv, written and checked), `kaggle` (`corolla submit`).
Importing this package imports none of them.
"""
