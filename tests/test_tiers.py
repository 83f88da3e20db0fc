"""tests/tiers.py: each test's tier is the heaviest thing it needs, read from its fixtures, its
folder and the names its code calls; every collected test carries exactly one."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import run_cli
from tests.tiers import TIERS, tier_of


def _plain():
    return np.zeros(3).sum()


def _with_tensorflow():
    return tf.zeros(3)


def _calls_the_cli():
    return run_cli(["--version"])


def _calls_a_helper_that_calls_the_cli():
    return _calls_the_cli()


@pytest.mark.parametrize("path, fixtures, function, tier", [
    ("ssd_mobilenet/config/test_config.py", ["tmp_path"], _plain, "unit"),
    ("ssd_mobilenet/config/test_config.py", [], _with_tensorflow, "model"),
    ("ssd_mobilenet/test_model.py", ["small_model"], _plain, "model"),
    ("migrate/verify/test_verify.py", ["zoo_fixture", "small_model"], _plain, "parity"),
    ("migrate/tf1/test_builder.py", [], _plain, "parity"),
    ("migrate/verify/test_verify.py", ["zoo_fixture"], _calls_the_cli, "cli"),
    ("migrate/verify/test_verify.py", [], _calls_a_helper_that_calls_the_cli, "cli"),
    ("docs/test_docs.py", [], _plain, "cli"),
])
def test_a_test_is_in_the_tier_of_the_heaviest_thing_it_needs(path, fixtures, function, tier):
    assert tier_of(path, fixtures, function) == tier


def test_a_fixture_of_the_suites_own_brings_what_it_calls():
    # A module's fixture that runs a command (or builds a TF1 graph) makes its tests that tier.
    assert tier_of("migrate/test_evaluate.py", ["runs"], _plain, [_calls_the_cli]) == "cli"
    assert tier_of("migrate/test_evaluate.py", ["runs"], _plain, [_with_tensorflow]) == "model"


def test_every_collected_test_carries_one_tier(request):
    items = request.session.items
    assert items and all(sum(item.get_closest_marker(t) is not None for t in TIERS) == 1 for item in items)
