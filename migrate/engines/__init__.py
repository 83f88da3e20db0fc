"""The engines `predict` can spread its work over, beside the runtimes that run the model.

A runtime (`migrate.runtimes`) runs a model on images; an engine decides where and how many
run at once. Without `--engine`, `predict` reads the images and calls its runtime in this
process. `beam`: an Apache Beam pipeline (`migrate.engines.beam`), on Beam's local runner with
worker processes or on any runner Beam's pipeline options name (Flink, Spark, Dataflow); each
worker opens the same runtime through `migrate.runtimes.open_runtime` and feeds it the bytes
the engine's file systems read (`runtime.results_of_encoded`).

Engines are extras (`pip install 'ssd-mobilenet-migrate[beam]'`): nothing here is imported unless
`--engine` names it.
"""

ENGINES = ("beam",)
