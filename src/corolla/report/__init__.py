"""What people read, written from plain data: figures and metrics.json (`plots`), report.html
(`html`), submission.csv written and checked (`submission`), a scored folder (`scored`, which
reads the few val photos its pictures show), an export folder, a photo table. Importing this
package imports none of them.

    export_folder: an export folder written: a deployment model and what it needs beside it
    html: report.html, one self-contained page that opens offline
    label_review: the labels to review as files a person reads (label_review.csv and .png)
    photo_table: predictions on anyone's photos as a table, a CSV and a JSON file
    plots: metrics.json and pictures, written atomically into folders checked first
    scored: the one writer of a scored folder (a run, eval-*, an ensemble, a k-fold parent)
    submission: the competition's submission file, written and checked
"""
