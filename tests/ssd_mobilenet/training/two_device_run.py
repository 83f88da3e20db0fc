"""Run by test_distribute in a fresh process (logical devices must be set before TensorFlow
initialises its devices): `python two_device_run.py ARGS_JSON` calls `migrate.train.run(**run)`
with `devices=2` (the CPU split into two logical devices) and prints the result's losses as JSON;
then, given "loss_scaled" (its arguments), the loss-scaled moving-average step on the same two
devices (`loss_scaled_average_run.main`) and its JSON on a second line."""

import json
import os
import sys

# The repository's root (tests/ssd_mobilenet/training/ is three folders below it), for `migrate` and `tests`.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3)))

from migrate import train  # noqa: E402

if __name__ == "__main__":
    import tensorflow as tf
    args = json.loads(sys.argv[1])
    tf.random.set_seed(0)  # the dataset's shuffles combine their seed with the global one (no device set up yet)
    result = train.run(devices=2, **args["run"])
    print(json.dumps({"losses": result["losses"], "step": result["step"],
                      "replicas": len(tf.config.list_logical_devices("CPU"))}), flush=True)
    if "loss_scaled" in args:
        from tests.ssd_mobilenet.training import loss_scaled_average_run
        print(json.dumps(loss_scaled_average_run.main(args["loss_scaled"])))
