"""HardExampleMiner against the OD API's core/losses_test.py HardExampleMinerTest (tensorflow/models 9bf1fd02).

Inputs and expected sums are theirs; tolerance `assertAllClose`'s rtol = atol = 1e-6.
"""

import numpy as np
import pytest

from ssd_mobilenet.training.hard_example_miner import HardExampleMiner
from ssd_mobilenet.training.train_config import HardExampleMinerConfig


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, np.float64), rtol=1e-6, atol=1e-6)


LOCATION_LOSSES = np.array([[100, 90, 80, 0], [0, 1, 2, 3]], np.float32)
CLS_LOSSES = np.array([[0, 10, 50, 110], [9, 6, 3, 0]], np.float32)
SAME_BOX = [0.1, 0.1, 0.9, 0.9]


@pytest.mark.parametrize("miner, boxes, loc, cls", [
    # testHardMiningWithSingleLossType: location losses alone pick the hard examples
    (HardExampleMiner(1, 0.0, "loc", 1, 1), [SAME_BOX] * 4, 100 + 3, 0 + 0),
    # testHardMiningWithBothLossType
    (HardExampleMiner(1, 0.0, "both", 1, 1), [SAME_BOX] * 4, 80 + 0, 50 + 9),
    # testHardMiningNMS
    (HardExampleMiner(2, 0.5, "cls", 1, 1), [SAME_BOX, [0.9, 0.9, 0.99, 0.99], SAME_BOX, SAME_BOX],
     0 + 90 + 0 + 1, 110 + 10 + 9 + 6),
], ids=["single_loss_type", "both_loss_type", "nms"])
def test_hard_mining(miner, boxes, loc, cls):
    loc_loss, cls_loss, summary = miner(LOCATION_LOSSES, CLS_LOSSES, np.array([boxes, boxes], np.float32))
    close(loc_loss, loc)
    close(cls_loss, cls)
    assert summary is None  # no match results: no subsampling


RATIO_LOC = np.array([[100, 90, 80, 0, 1, 2, 3, 10, 20, 100, 20, 3]], np.float32)
RATIO_CLS = np.array([[0, 0, 100, 0, 90, 70, 0, 60, 0, 17, 13, 0]], np.float32)
RATIO_BOXES = np.array([[[0.0, 0.0, h, 0.1] for h in (0.2, 0.2, 0.2, 0.2, 0.5, 0.6, 0.2, 0.8, 0.2, 1.0, 1.1, 0.2)]],
                       np.float32)


@pytest.mark.parametrize("max_negatives_per_positive, loc, cls", [
    # testEnforceNegativesPerPositiveRatio
    (0.0, 80 + 2, 100 + 70),
    (0.5, 80 + 1 + 2, 100 + 90 + 70),
    (1.0, 80 + 1 + 2 + 10, 100 + 90 + 70 + 60),
    (1.5, 80 + 1 + 2 + 10 + 100, 100 + 90 + 70 + 60 + 17),
    (10, 80 + 1 + 2 + 10 + 100 + 20, 100 + 90 + 70 + 60 + 17 + 13),
])
def test_negatives_per_positive_ratio(max_negatives_per_positive, loc, cls):
    matches = np.array([[2, -1, 0, -1, -1, 1, -1, -1, -1, -1, -1, 3]], np.int32)
    miner = HardExampleMiner(None, 0.9999, "cls", 1, 1, max_negatives_per_positive=max_negatives_per_positive)
    loc_loss, cls_loss, summary = miner(RATIO_LOC, RATIO_CLS, RATIO_BOXES, matches)
    close(loc_loss, loc)
    close(cls_loss, cls)
    # NMS leaves anchors 2, 4, 5, 7, 9, 10 (the rest share anchor 2's box): positives 2 and 5.
    assert summary.num_positives.numpy().tolist() == [2]


@pytest.mark.parametrize("min_negatives_per_image, loc, cls", [
    # testEnforceNegativesPerPositiveRatioWithMinNegativesPerImage
    (0, 0, 0),
    (1, 80, 100),
    (2, 80 + 1, 100 + 90),
    (4, 80 + 1 + 2 + 10, 100 + 90 + 70 + 60),
    (5, 80 + 1 + 2 + 10 + 100, 100 + 90 + 70 + 60 + 17),
    (6, 80 + 1 + 2 + 10 + 100 + 20, 100 + 90 + 70 + 60 + 17 + 13),
])
def test_min_negatives_per_image(min_negatives_per_image, loc, cls):
    miner = HardExampleMiner(None, 0.9999, "cls", 1, 1, max_negatives_per_positive=3,
                             min_negatives_per_image=min_negatives_per_image)
    loc_loss, cls_loss, summary = miner(RATIO_LOC, RATIO_CLS, RATIO_BOXES, np.full([1, 12], -1, np.int32))
    close(loc_loss, loc)
    close(cls_loss, cls)
    assert summary.num_negatives.numpy().tolist() == [min_negatives_per_image]


def test_from_config_maps_the_proto_as_losses_builder():
    # losses_builder.build_hard_example_miner: 0 means "no limit" for both counts; the loss weights weigh BOTH.
    miner = HardExampleMiner.from_config(HardExampleMinerConfig(0, 0.99, "BOTH", 0, 2), 0.5, 2.0)
    assert (miner.num_hard_examples, miner.max_negatives_per_positive) == (None, None)
    assert (miner.loss_type, miner.cls_loss_weight, miner.loc_loss_weight, miner.min_negatives_per_image) == \
        ("both", 0.5, 2.0, 2)
    zoo = HardExampleMiner.from_config(HardExampleMinerConfig(3000, 0.99, "CLASSIFICATION", 3, 0), 1.0, 1.0)
    assert (zoo.num_hard_examples, zoo.loss_type, zoo.max_negatives_per_positive) == (3000, "cls", 3.0)
