"""Run by test_distribute in a fresh process (logical devices must be set before TensorFlow
initialises its devices), after two_device_run.py's run in the same process, or on its own as
`python loss_scaled_average_run.py ARGS_JSON`: builds a `Trainer` with
mixed_float16 (dynamic loss scaling) on two CPU replicas, takes micro-batches until the first
step that is not skipped for non-finite gradients, and prints JSON: how many steps that took,
and how far each moving-average shadow is from one update and from two updates towards its
variable (the largest absolute difference over all shadows), with the largest shadow move."""

import dataclasses
import json
import os
import sys

# The repository's root (tests/ssd_mobilenet/training/ is three folders below it), for `migrate` and `tests`.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3)))

from ssd_mobilenet.training import distribute  # noqa: E402

MAX_STEPS = 8


def main(args: dict) -> dict:
    strategy = distribute.make_strategy(2)
    import numpy as np

    from ssd_mobilenet import detector
    from ssd_mobilenet.training import precision, trainer
    from ssd_mobilenet.training.train_config import TrainingConfig
    with strategy.scope():
        model = detector.load_model(args["converted"])
    config = TrainingConfig.from_pipeline_config(args["config"])
    config = dataclasses.replace(config, num_classes=model.config.num_classes,
                                 add_background_class=model.config.add_background_class,
                                 box_coder_scales=tuple(model.config.box_coder_scales))
    with strategy.scope():
        model = precision.with_policy(model, "mixed_float16")
    one = trainer.Trainer(model, config, 1, True, strategy)
    iterator = iter(trainer._dataset([args["records"]], model, args["batch"], None, 0, config))
    decay = np.float32(1.0 - one.moving_average.decay)
    for taken in range(1, MAX_STEPS + 1):
        before = [s.numpy() for s in one.moving_average.shadows]
        one.train_step(next(iterator))
        if int(one.optimizer.iterations.numpy()) == 1:
            break
    once_error = twice_error = moved = 0.0
    for s0, shadow, variable in zip(before, one.moving_average.shadows, one.variables):
        s1, v1 = shadow.numpy(), np.asarray(variable.numpy())
        once = s0 - (s0 - v1) * decay
        twice = once - (once - v1) * decay
        once_error = max(once_error, float(np.max(np.abs(s1 - once))))
        twice_error = max(twice_error, float(np.max(np.abs(s1 - twice))))
        moved = max(moved, float(np.max(np.abs(s1 - s0))))
    return {"steps_taken": taken, "applied": int(one.optimizer.iterations.numpy()), "once_error": once_error,
            "twice_error": twice_error, "moved": moved}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
