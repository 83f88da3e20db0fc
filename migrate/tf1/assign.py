"""Strict assignment of TF1 weights to the Keras model: every target once, every source accounted for."""

from __future__ import annotations

import re

import numpy as np

from migrate.tf1 import name_map
from ssd_mobilenet.errors import InputError


def plan(weights: dict, model, use_moving_averages: bool = False):
    """Matches TF1 weights to the model's variables.

    Args:
      weights: {tf1_name: ndarray}.
      model: an `SSDMobileNetV1`; its `unused_tf1_weights` ((pattern, reason), ...) are TF1
        weights the OD API builds and its feature extractor does not use (PPN's Conv2d_12 and 13):
        ignored with that reason.
      use_moving_averages: take `<name>/ExponentialMovingAverage` where the checkpoint has it.
    Returns:
      (assignments, ignored): [(keras_path, tf1_name, ndarray)] in model variable order and
      {tf1_name: reason}.
    Raises:
      InputError: listing every unfilled model variable, unknown TF1 weight and shape mismatch.
    """
    targets = {v.path: v for v in model.weights}
    by_target, ignored, unknown = {}, {}, []
    unused = getattr(model, "unused_tf1_weights", ())
    for name in sorted(weights):
        reason = name_map.ignore_reason(name) or next((why for pattern, why in unused if re.match(pattern, name)),
                                                      None)
        if reason is not None:
            ignored[name] = reason
            continue
        path = name_map.tf2_path(name)
        if path is None or path not in targets:
            unknown.append(name)
            continue
        by_target[path] = name
    problems = []
    missing = [p for p in targets if p not in by_target]
    if missing:
        problems.append(f"{len(missing)} model weights have no TF1 source: {', '.join(missing[:8])}"
                        + (" ..." if len(missing) > 8 else ""))
    if unknown:
        problems.append(f"{len(unknown)} TF1 weights fit no model variable: {', '.join(unknown[:8])}"
                        + (" ..." if len(unknown) > 8 else ""))
    assignments = []
    for path, var in targets.items():
        if path not in by_target:
            continue
        name = by_target[path]
        value = weights[name]
        if use_moving_averages and f"{name}/ExponentialMovingAverage" in weights:
            value = weights[f"{name}/ExponentialMovingAverage"]
        if tuple(value.shape) != tuple(var.shape):
            problems.append(f"{name}: shape {list(value.shape)} but the model's {path} is {list(var.shape)}")
            continue
        assignments.append((path, name, value))
    if problems:
        raise InputError("; ".join(problems))
    return assignments, ignored


def assign(weights: dict, model, use_moving_averages: bool = False):
    """Plans and assigns; returns (name_map {keras_path: tf1_name}, ignored {tf1_name: reason})."""
    assignments, ignored = plan(weights, model, use_moving_averages)
    targets = {v.path: v for v in model.weights}
    for path, _, value in assignments:
        targets[path].assign(np.asarray(value, dtype=np.float32))
    return {p: n for p, n, _ in assignments}, ignored
