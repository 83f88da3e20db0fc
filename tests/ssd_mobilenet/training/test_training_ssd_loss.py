"""SSDLoss against the OD API's meta_architectures/ssd_meta_arch_test.py loss tests (tensorflow/models 9bf1fd02).

Their model (ssd_meta_arch_test_lib.SSDMetaArchTestBase._create_model) has one class, the 2x2 mock
anchors, a matcher that matches anchor 0 to groundtruth 0 and nothing else (test_utils.MockMatcher),
a difference box coder (test_utils.MockBoxCoder), a box predictor of zeros, sigmoid and smooth L1
losses of weight 1 and no normalisation by matches; the same parts are built here. Expected values
and tolerance (`assertAllClose`, rtol = atol = 1e-6) are theirs.
"""

import numpy as np
import tensorflow as tf

from ssd_mobilenet.training.hard_example_miner import HardExampleMiner
from ssd_mobilenet.training.ssd_loss import CLASSIFICATION_LOSS, LOCALIZATION_LOSS, SSDLoss
from ssd_mobilenet.training.targets import ArgMaxMatcher, FasterRcnnBoxCoder, TargetAssigner


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, np.float64), rtol=1e-6, atol=1e-6)


MOCK_ANCHORS = np.array([[0, 0, .5, .5], [0, .5, .5, 1], [.5, 0, 1, .5], [1., 1., 1.5, 1.5]], np.float32)
BATCH, NUM_CLASSES, NUM_ANCHORS = 2, 1, 4


class MockMatcher:
    """test_utils.MockMatcher: anchor 0 matches groundtruth 0, the others are unmatched."""

    def match(self, similarity, valid_rows=None):
        return tf.constant([0, -1, -1, -1], tf.int32)


class MockBoxCoder:
    """test_utils.MockBoxCoder: codes are box - anchor."""

    code_size = 4

    def encode(self, boxes, anchors):
        return boxes - anchors

    def decode(self, codes, anchors):
        return codes + anchors


def mock_loss(**kwargs):
    return SSDLoss(TargetAssigner(MockMatcher(), MockBoxCoder()), normalize_loss_by_num_matches=False, **kwargs)


def run(loss, gt_box, class_slots=NUM_CLASSES + 1):
    predictions = tf.zeros([BATCH, NUM_ANCHORS, 4]), tf.zeros([BATCH, NUM_ANCHORS, class_slots])
    gt_boxes = [np.array([gt_box], np.float32)] * BATCH
    gt_classes = [np.array([[1]], np.float32)] * BATCH
    out = loss(MOCK_ANCHORS, *predictions, gt_boxes, gt_classes)
    assert sorted(out) == [CLASSIFICATION_LOSS, LOCALIZATION_LOSS]
    return out


def test_loss_results_are_correct():  # test_loss_results_are_correct
    out = run(mock_loss(), [0, 0, .5, .5])
    close(out[LOCALIZATION_LOSS], 0.0)
    close(out[CLASSIFICATION_LOSS], BATCH * NUM_ANCHORS * (NUM_CLASSES + 1) * np.log(2.0))


def test_loss_results_are_correct_with_normalize_by_codesize_true():
    # test_loss_results_are_correct_with_normalize_by_codesize_true
    out = run(mock_loss(normalize_loc_loss_by_codesize=True), [0, 0, 1, 1])
    close(out[LOCALIZATION_LOSS], 0.5 / 4)


def test_loss_results_are_correct_with_hard_example_mining():
    # test_loss_results_are_correct_with_hard_example_mining: a miner "expected to be a no-op".
    out = run(mock_loss(hard_example_miner=HardExampleMiner(num_hard_examples=None, iou_threshold=1.0)),
              [0, 0, .5, .5])
    close(out[LOCALIZATION_LOSS], 0.0)
    close(out[CLASSIFICATION_LOSS], BATCH * NUM_ANCHORS * (NUM_CLASSES + 1) * np.log(2.0))


def test_loss_results_are_correct_without_add_background_class():
    # test_loss_results_are_correct_without_add_background_class
    out = run(mock_loss(add_background_class=False), [0, 0, .5, .5], class_slots=NUM_CLASSES)
    close(out[LOCALIZATION_LOSS], 0.0)
    close(out[CLASSIFICATION_LOSS], BATCH * NUM_ANCHORS * NUM_CLASSES * np.log(2.0))


def test_a_split_batch_normalised_by_the_whole_count_sums_to_the_batch_loss():
    # What distributed training relies on: the images of a batch split in two, each part's sums
    # divided by the matched anchors of the whole batch, add up to the whole batch's losses; each
    # part divided by its own count does not, when the parts match unequally many anchors.
    rng = np.random.default_rng(0)
    grid = (np.arange(8, dtype=np.float32) + 0.5) / 8
    cy, cx = np.meshgrid(grid, grid, indexing="ij")
    centres = np.stack([cy.ravel(), cx.ravel()], 1)
    anchors = np.concatenate([centres - 0.1, centres + 0.1], 1).astype(np.float32)  # [64, 4]
    loss = SSDLoss(TargetAssigner(ArgMaxMatcher(0.5, 0.4, force_match_for_each_row=True), FasterRcnnBoxCoder()),
                   hard_example_miner=HardExampleMiner(num_hard_examples=20, iou_threshold=0.99, loss_type="cls",
                                                       max_negatives_per_positive=3, min_negatives_per_image=2))
    counts = [1, 3, 2, 4]
    boxes = [np.concatenate([c - 0.15, c + 0.15], 1).astype(np.float32) for c in
             (rng.uniform(0.2, 0.8, (n, 2)) for n in counts)]
    classes = [np.eye(2, dtype=np.float32)[rng.integers(0, 2, n)] for n in counts]
    codes = rng.normal(size=(4, 64, 4)).astype(np.float32)
    logits = rng.normal(size=(4, 64, 3)).astype(np.float32)
    whole = loss(anchors, codes, logits, boxes, classes)
    parts = [loss.sums(anchors, codes[s], logits[s], boxes[s], classes[s]) for s in (slice(0, 2), slice(2, 4))]
    total = parts[0].num_matches + parts[1].num_matches
    own = [loss.normalize(p) for p in parts]
    shared = [loss.normalize(p, total) for p in parts]
    assert float(parts[0].num_matches) != float(parts[1].num_matches)
    for key in (LOCALIZATION_LOSS, CLASSIFICATION_LOSS):
        # float32 sums of the same terms in another grouping: an ulp or two.
        close(shared[0][key] + shared[1][key], whole[key])
        assert abs(float(own[0][key] + own[1][key]) - float(whole[key])) > 1e-3 * float(whole[key])
