"""The commands: one module per `corolla` command, plus `run` (one run end to end: train,
evaluate on val, predict the test split) and `kfold` (the fold loop). The only layer that
combines stages and logs; `errors` turns library errors into the one-line messages that both
the CLI and the Python API give.

A command module declares its command line: HELP, `add_arguments(parser)` (with the flag
groups of `arguments`) and `main(args)`, the CLI's entry, which calls the same function the
Python API calls. The CLI imports every command module to build its parser, before the flags
pick the Keras backend and before TensorFlow's start-up lines are quieted: what imports
TensorFlow, Keras or JAX is imported inside the functions that use it.

    arguments: the flag groups several commands declare, and the settings of a command line
    bench: `corolla bench data|train`: the input pipeline's speed against decoding and the model
    check_data: `corolla check-data`: duplicates, class counts, sizes, undecodable files
    check_submission: `corolla check-submission`: a submission CSV against a test split
    convert: `corolla convert`: an image folder or a CSV -> TFRecords in the competition layout
    demo: `corolla demo`: synthetic petals through the real train / evaluate / predict path
    ensemble: `corolla ensemble`: runs' saved probabilities blended with weights chosen on val
    errors: library errors as the one line a user can act on, for the CLI and the Python API
    evaluate: `corolla evaluate`: a trained run scored on val (or other data), its files written
    explain: `corolla explain RUN IMAGE...`: one Grad-CAM picture per photo
    export: `corolla export`: the run's model for deployment (SavedModel, TFLite, ONNX), checked
    info: `corolla info`: the hardware and what Corolla would do on it; models; recipes
    kfold: the fold loop of `corolla train --folds K`: one whole run per fold inside the parent
    lr_find: `corolla lr-find`: the learning-rate range test of the run the train flags describe
    predict: `corolla predict`: a run's submission.csv, or the top classes of anyone's photos
    report: `corolla report`: FOLDER/report.html from what a scored folder holds
    run: one run end to end: train, evaluate on val, predict the test split, FINISHED last
    submit: `corolla submit`: a run's checked submission.csv sent to a Kaggle competition
    train: `corolla train`: the run's config resolved, then one run or a k-fold run
"""
