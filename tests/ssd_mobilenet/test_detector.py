
import numpy as np
import pytest
import tensorflow as tf

import ssd_mobilenet
from tests.conftest import ZOO_2018, model_for_fixture, needs_shared, random_images
from ssd_mobilenet import SSDConfig, SSDMobileNetV1, detector
from ssd_mobilenet.detections import ALL_OUTPUTS


@pytest.fixture(scope="module")
def saved(tmp_path_factory, zoo_fixture):
    model, _ = model_for_fixture(zoo_fixture(ZOO_2018))
    out = tmp_path_factory.mktemp("converted")
    detector.save(model, str(out))
    return model, str(out)


@needs_shared
def test_load_restores_every_weight(saved):
    model, path = saved
    loaded = detector.load_model(path)
    assert [v.path for v in loaded.weights] == [v.path for v in model.weights]
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@needs_shared
def test_detector_is_a_concrete_function_for_any_batch_and_size(saved):
    model, path = saved
    det = ssd_mobilenet.load(path)
    assert det.concrete_function.structured_input_signature[0][0].shape.as_list() == [None, None, None, 3]
    for shape in [(1, 300, 300), (3, 123, 457)]:
        images = random_images(7, *shape)
        out = det(images)
        expected = model.detect(images)
        assert set(out) == set(ALL_OUTPUTS)
        for k in ("detection_classes", "num_detections"):
            np.testing.assert_array_equal(out[k].numpy(), expected[k].numpy())
        # Inside a tf.function Grappler may reorder float arithmetic (1-ulp differences).
        for k in ("detection_boxes", "detection_scores"):
            assert out[k].dtype == tf.float32
            np.testing.assert_allclose(out[k].numpy(), expected[k].numpy(), rtol=0, atol=1e-6)
    single = det(random_images(7, 1, 300, 300)[0])
    assert single["detection_boxes"].shape == (1, 100, 4)
    # No images: every output empty along the batch, with the shapes and dtypes of a batch.
    empty = det(np.zeros((0, 480, 640, 3), np.uint8))
    assert set(empty) == set(single)
    for k, v in empty.items():
        assert v.shape == (0,) + tuple(single[k].shape[1:]) and v.dtype == single[k].dtype, k


def test_detector_rejects_wrong_inputs():
    det = detector.Detector(SSDMobileNetV1(SSDConfig(num_classes=2, image_height=64, image_width=64)))
    with pytest.raises(TypeError, match="uint8"):
        det(np.zeros((1, 64, 64, 3), np.float32))
    with pytest.raises(ValueError, match="shape"):
        det(np.zeros((1, 64, 64), np.uint8))


def test_partial_checkpoint_is_refused(tmp_path):
    model = SSDMobileNetV1(SSDConfig(num_classes=2, image_height=64, image_width=64))
    detector.save(model, str(tmp_path))
    # A config that needs more weights than the checkpoint holds must not load silently.
    other = SSDConfig(num_classes=2, image_height=64, image_width=64, use_depthwise=True)
    (tmp_path / detector.CONFIG_FILE).write_text(__import__("json").dumps(other.to_dict()))
    with pytest.raises(Exception, match="variables|match|found"):
        detector.load_model(str(tmp_path))


@needs_shared
@pytest.mark.slow
def test_jit_compile_gives_the_same_detections(saved):
    model, path = saved
    with pytest.warns(UserWarning, match="XLA"):
        det = ssd_mobilenet.load(path, jit_compile=True)
    # 480x640 too: XLA's own legacy resize differed from TF's there, so preprocessing stays outside.
    for images in (random_images(3, 2, 300, 300), random_images(4, 1, 480, 640)):
        out = det(images)
        ref = model.detect(images)
        np.testing.assert_array_equal(out["num_detections"].numpy(), ref["num_detections"].numpy())
        np.testing.assert_array_equal(out["detection_classes"].numpy(), ref["detection_classes"].numpy())
        np.testing.assert_allclose(out["detection_boxes"].numpy(), ref["detection_boxes"].numpy(), atol=1e-5)
        np.testing.assert_allclose(out["detection_scores"].numpy(), ref["detection_scores"].numpy(), atol=1e-5)
