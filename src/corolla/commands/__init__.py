"""The commands: one module per `corolla` command, which parses its command line and calls one
function, most often of `corolla.flows` (the workflows, which the Python API calls too). A
command module declares HELP, `add_arguments(parser)` (with the flag groups of `arguments`) and
`main(args)`, the CLI's entry; it imports no other command. The CLI imports every command
module to build its parser, before the flags pick the Keras backend and before TensorFlow's
start-up lines are quieted: what imports TensorFlow, Keras or JAX is imported inside the
functions that use it.

    arguments: the flag groups several commands declare, and a parsed command line's settings
    bench: `corolla bench`: input pipeline and training step throughput
    check_data: `corolla check-data`: what the data holds, before training
    check_submission: `corolla check-submission`: a submission.csv checked against the test ids
    convert: `corolla convert`: an image folder or CSV into the TFRecord layout
    demo: `corolla demo`: synthetic petals, trained, evaluated and predicted offline
    ensemble: `corolla ensemble`: several runs' probabilities blended
    evaluate: `corolla evaluate`: a run scored on val or other data
    explain: `corolla explain`: Grad-CAM pictures of a run's model on photos
    export: `corolla export`: a run's model for deployment
    info: `corolla info`: the hardware, the models and the recipes
    lr_find: `corolla lr-find`: the learning-rate range test of a run's settings
    predict: `corolla predict`: a run's submission.csv, or the top classes of photos
    report: `corolla report`: a scored folder's report.html
    submit: `corolla submit`: a run's submission sent to Kaggle
    train: `corolla train`: one run end to end, or a k-fold run
"""
