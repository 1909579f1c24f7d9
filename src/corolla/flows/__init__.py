"""The workflows: what each command does, below the command line that parses its flags
(`corolla.commands`) and the Python API (`corolla.api`), which both call these. The only layer
that combines stages and logs; errors are `UserError`s, and `library_errors` says a library's
in one line.
What imports TensorFlow, Keras or JAX is imported inside the functions that use it: the CLI
imports every command module, and so these, before the flags pick the Keras backend.

    auto: `--recipe auto`, the fine-tune-or-from-scratch choice, by accelerator
    bench: the input pipeline and the training step timed, side by side
    check_data: the data check of `corolla check-data`, and the one train runs first
    check_submission: a submission CSV checked against a data set's test split
    convert: an image folder or a CSV -> TFRecords in the competition layout, a new folder
    demo: synthetic petals, then one run end to end
    ensemble: several runs' saved probabilities blended into a new folder
    evaluate: a trained run scored on val or other data; bias offsets fitted
    explain: Grad-CAM pictures of a run's model on photos
    export: a run's model for deployment, checked against model.keras
    info: the hardware and the plan Corolla would make on it; the models; the recipes
    kfold: the fold loop of a k-fold run, and the pooling of its folds
    library_errors: library errors as the one line both the CLI and the Python API give
    lr_find: the learning-rate range test of a run's settings, without a run
    photos: the top classes of anyone's photos, from a trained run
    predict: a trained run's checked submission.csv for the test split
    report: FOLDER/report.html from what a scored folder holds
    run: one run end to end: train, refit, evaluate on val, predict the test split
    submit: a run's checked submission.csv sent to Kaggle through the `kaggle` package
    train: the run's config (recipe, flags, a continued run's), then run or kfold
"""
