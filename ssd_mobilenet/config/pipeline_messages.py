"""The messages a TF1 Object Detection API `pipeline.config` can hold, field by field.

`TrainEvalPipelineConfig` and every message under it, as tensorflow/models declared them in
`research/object_detection/protos/*.proto` from the API's first release (2017-06) to 2022-10:
the union of all its releases, so that a config written by any of them passes, fields since
deprecated or removed included (2017 configs carry `batch_norm_trainable`, removed 2018-04).
Where a field's type changed (RandomPadImage's sizes: float, then int32 since 2018-11) the
wider one is kept; where a default changed, the one of TF 1.13's release (2019-02). A field
without a default in its `.proto` has `default=None` (protobuf's zero value when unset).

`FasterRcnn`, `CenterNet` and `ExperimentalModel` are opaque (their contents are not checked):
`SSDConfig` refuses those architectures by name anyway.

`pipeline_schema.check` checks a parsed config against these tables (names, kinds, enum
members, oneofs); `training.proto_table` reads its fields' defaults from them.
"""

from __future__ import annotations

from dataclasses import dataclass

# Scalar kinds, as protobuf text format checks them. A `Field.kind` is one of these, an `Enum`,
# a message's name (a key of `MESSAGES`) or an inline `Message` (a map field's entries).
FLOAT, INT32, UINT32, BOOL, STRING = "float", "int32", "uint32", "bool", "string"
SCALARS = (FLOAT, INT32, UINT32, BOOL, STRING)


@dataclass(frozen=True)
class Enum:
    """A proto enum: its (nested) name and its value names, in declaration order."""

    name: str
    members: tuple


@dataclass(frozen=True)
class Field:
    """One field of a message; `oneof` names the group whose members exclude each other."""

    name: str
    kind: object
    default: object = None
    repeated: bool = False
    oneof: "str | None" = None


@dataclass(frozen=True)
class Message:
    """A proto message: its (nested) name, the `.proto` file that declares it, its fields."""

    name: str
    proto: str
    fields: tuple = ()
    opaque: bool = False

    def field(self, name: str) -> "Field | None":
        return next((f for f in self.fields if f.name == name), None)


def map_entry(key_kind, value_kind) -> Message:
    """The entries of a `map<K, V>` field: text format writes each as `{ key: .. value: .. }`."""
    return Message(f"map<{key_kind}, {getattr(value_kind, 'name', value_kind)}>", "",
                   (Field("key", key_kind), Field("value", value_kind)))


def message(name: str) -> Message:
    """The message named `name` (nested messages as `Outer.Inner`)."""
    return MESSAGES[name]


# ---- enums ----------------------------------------------------------------------------------

RESIZE_TYPE = Enum("ResizeType", ("BILINEAR", "NEAREST_NEIGHBOR", "BICUBIC", "AREA"))
RESIZE_CONDITION = Enum("ConditionalShapeResizer.ResizeCondition", ("INVALID", "GREATER", "SMALLER"))
HYPERPARAMS_OP = Enum("Hyperparams.Op", ("CONV", "FC"))
INITIALIZER_MODE = Enum("VarianceScalingInitializer.Mode", ("FAN_IN", "FAN_OUT", "FAN_AVG"))
ACTIVATION = Enum("Hyperparams.Activation", ("NONE", "RELU", "RELU_6", "SWISH"))
SHARED_SCORE_CONVERTER = Enum("WeightSharedConvolutionalBoxPredictor.ScoreConverter", ("IDENTITY", "SIGMOID"))
SCORE_CONVERTER = Enum("PostProcessing.ScoreConverter", ("IDENTITY", "SIGMOID", "SOFTMAX"))
TRAINING_DATA_TYPE = Enum("TrainingDataType", ("DATA_TYPE_UNKNOWN", "ALL_CLASSES", "CLASS_SPECIFIC"))
LOSS_TYPE = Enum("HardExampleMiner.LossType", ("BOTH", "CLASSIFICATION", "LOCALIZATION"))
EXPECTED_LOSS_WEIGHTS = Enum("Loss.ExpectedLossWeights",
                             ("NONE", "EXPECTED_SAMPLING", "REWEIGHTING_UNMATCHED_ANCHORS"))
JITTER_MODE = Enum("RandomJitterBoxes.JitterMode", ("DEFAULT", "EXPAND", "SHRINK", "EXPAND_SYMMETRIC",
                                                    "SHRINK_SYMMETRIC", "EXPAND_SYMMETRIC_XY", "SHRINK_SYMMETRIC_XY"))
RESIZE_IMAGE_METHOD = Enum("ResizeImage.Method", ("AREA", "BICUBIC", "BILINEAR", "NEAREST_NEIGHBOR"))
CHECKPOINT_VERSION = Enum("CheckpointVersion", ("UNKNOWN", "V1", "V2"))
INSTANCE_MASK_TYPE = Enum("InstanceMaskType", ("DEFAULT", "NUMERICAL_MASKS", "PNG_MASKS"))
INPUT_TYPE = Enum("InputType", ("INPUT_DEFAULT", "TF_EXAMPLE", "TF_SEQUENCE_EXAMPLE"))


# ---- messages, by the .proto file that declares them --------------------------------------

_MESSAGES = (
    # pipeline.proto
    Message("TrainEvalPipelineConfig", "pipeline", (
        Field("model", "DetectionModel"),
        Field("train_config", "TrainConfig"),
        Field("train_input_reader", "InputReader"),
        Field("eval_config", "EvalConfig"),
        Field("eval_input_reader", "InputReader", repeated=True),
        Field("graph_rewriter", "GraphRewriter"),
    )),
    # model.proto
    Message("DetectionModel", "model", (
        Field("faster_rcnn", "FasterRcnn", oneof="model"),
        Field("ssd", "Ssd", oneof="model"),
        Field("experimental_model", "ExperimentalModel", oneof="model"),
        Field("center_net", "CenterNet", oneof="model"),
    )),
    Message("ExperimentalModel", "model", opaque=True),
    # faster_rcnn.proto
    Message("FasterRcnn", "faster_rcnn", opaque=True),
    # ssd.proto
    Message("Ssd", "ssd", (
        Field("num_classes", INT32),
        Field("image_resizer", "ImageResizer"),
        Field("feature_extractor", "SsdFeatureExtractor"),
        Field("box_coder", "BoxCoder"),
        Field("matcher", "Matcher"),
        Field("similarity_calculator", "RegionSimilarityCalculator"),
        Field("box_predictor", "BoxPredictor"),
        Field("anchor_generator", "AnchorGenerator"),
        Field("post_processing", "PostProcessing"),
        Field("normalize_loss_by_num_matches", BOOL, True),
        Field("loss", "Loss"),
        Field("encode_background_as_zeros", BOOL, False),
        Field("negative_class_weight", FLOAT, 1.0),
        Field("normalize_loc_loss_by_codesize", BOOL, False),
        Field("inplace_batchnorm_update", BOOL, False),
        Field("freeze_batchnorm", BOOL, False),
        Field("weight_regression_loss_by_score", BOOL, False),  # 2018-08 to 2018-11 only
        Field("use_expected_classification_loss_under_sampling", BOOL, False),  # 2018-08 to 2018-11 only
        Field("minimum_negative_sampling", FLOAT, 0.0),  # 2018-08 to 2018-09 only
        Field("desired_negative_sampling_ratio", FLOAT, 3.0),  # 2018-08 to 2018-11 only
        Field("min_num_negative_samples", FLOAT, 0.0),  # 2018-11 only
        Field("add_background_class", BOOL, True),
        Field("explicit_background_class", BOOL, False),
        Field("use_confidences_as_targets", BOOL, False),
        Field("implicit_example_weight", FLOAT, 1.0),
        Field("mask_head_config", "Ssd.MaskHead"),
        Field("return_raw_detections_during_predict", BOOL, False),
    )),
    Message("SsdFeatureExtractor", "ssd", (
        Field("type", STRING),
        Field("depth_multiplier", FLOAT, 1.0),
        Field("min_depth", INT32, 16),
        Field("conv_hyperparams", "Hyperparams"),
        Field("pad_to_multiple", INT32, 1),
        Field("batch_norm_trainable", BOOL, True),  # 2017-10 to 2018-04 only
        Field("use_explicit_padding", BOOL, False),
        Field("use_depthwise", BOOL, False),
        Field("override_base_feature_extractor_hyperparams", BOOL, False),
        Field("fpn", "FeaturePyramidNetworks", oneof="feature_pyramid_oneof"),
        Field("replace_preprocessor_with_placeholder", BOOL, False),
        Field("num_layers", INT32, 6),
        Field("bifpn", "BidirectionalFeaturePyramidNetworks", oneof="feature_pyramid_oneof"),
        Field("spaghettinet_arch_name", STRING),
        Field("use_hardswish", BOOL, False),
    )),
    Message("FeaturePyramidNetworks", "ssd", (
        Field("min_level", INT32, 3),
        Field("max_level", INT32, 7),
        Field("additional_layer_depth", INT32, 256),
    )),
    Message("BidirectionalFeaturePyramidNetworks", "ssd", (
        Field("min_level", INT32, 3),
        Field("max_level", INT32, 7),
        Field("num_iterations", INT32),
        Field("num_filters", INT32),
        Field("combine_method", STRING, "fast_attention"),
        Field("use_native_resize_op", BOOL),
    )),
    Message("Ssd.MaskHead", "ssd", (
        Field("mask_height", INT32, 15),
        Field("mask_width", INT32, 15),
        Field("masks_are_class_agnostic", BOOL, True),
        Field("mask_prediction_conv_depth", INT32, 256),
        Field("mask_prediction_num_conv_layers", INT32, 2),
        Field("convolve_then_upsample_masks", BOOL, False),
        Field("mask_loss_weight", FLOAT, 5.0),
        Field("mask_loss_sample_size", INT32, 16),
        Field("conv_hyperparams", "Hyperparams"),
        Field("initial_crop_size", INT32, 15),
    )),
    # image_resizer.proto
    Message("ImageResizer", "image_resizer", (
        Field("keep_aspect_ratio_resizer", "KeepAspectRatioResizer", oneof="image_resizer_oneof"),
        Field("fixed_shape_resizer", "FixedShapeResizer", oneof="image_resizer_oneof"),
        Field("identity_resizer", "IdentityResizer", oneof="image_resizer_oneof"),
        Field("conditional_shape_resizer", "ConditionalShapeResizer", oneof="image_resizer_oneof"),
        Field("pad_to_multiple_resizer", "PadToMultipleResizer", oneof="image_resizer_oneof"),
    )),
    Message("KeepAspectRatioResizer", "image_resizer", (
        Field("min_dimension", INT32, 600),
        Field("max_dimension", INT32, 1024),
        Field("resize_method", RESIZE_TYPE, "BILINEAR"),
        Field("pad_to_max_dimension", BOOL, False),
        Field("convert_to_grayscale", BOOL, False),
        Field("per_channel_pad_value", FLOAT, repeated=True),
    )),
    Message("FixedShapeResizer", "image_resizer", (
        Field("height", INT32, 300),
        Field("width", INT32, 300),
        Field("resize_method", RESIZE_TYPE, "BILINEAR"),
        Field("convert_to_grayscale", BOOL, False),
    )),
    Message("IdentityResizer", "image_resizer", ()),
    Message("ConditionalShapeResizer", "image_resizer", (
        Field("condition", RESIZE_CONDITION, "GREATER"),
        Field("size_threshold", INT32, 300),
        Field("resize_method", RESIZE_TYPE, "BILINEAR"),
        Field("convert_to_grayscale", BOOL, False),
    )),
    Message("PadToMultipleResizer", "image_resizer", (
        Field("multiple", INT32, 1),
        Field("convert_to_grayscale", BOOL, False),
    )),
    # hyperparams.proto
    Message("Hyperparams", "hyperparams", (
        Field("op", HYPERPARAMS_OP, "CONV"),
        Field("regularizer", "Regularizer"),
        Field("initializer", "Initializer"),
        Field("activation", ACTIVATION, "RELU"),
        Field("batch_norm", "BatchNorm", oneof="normalizer_oneof"),
        Field("regularize_depthwise", BOOL, False),
        Field("group_norm", "GroupNorm", oneof="normalizer_oneof"),
        Field("force_use_bias", BOOL, False),
        Field("sync_batch_norm", "BatchNorm", oneof="normalizer_oneof"),
    )),
    Message("Regularizer", "hyperparams", (
        Field("l1_regularizer", "L1Regularizer", oneof="regularizer_oneof"),
        Field("l2_regularizer", "L2Regularizer", oneof="regularizer_oneof"),
    )),
    Message("L1Regularizer", "hyperparams", (
        Field("weight", FLOAT, 1.0),
    )),
    Message("L2Regularizer", "hyperparams", (
        Field("weight", FLOAT, 1.0),
    )),
    Message("Initializer", "hyperparams", (
        Field("truncated_normal_initializer", "TruncatedNormalInitializer", oneof="initializer_oneof"),
        Field("variance_scaling_initializer", "VarianceScalingInitializer", oneof="initializer_oneof"),
        Field("random_normal_initializer", "RandomNormalInitializer", oneof="initializer_oneof"),
        Field("keras_initializer_by_name", STRING, oneof="initializer_oneof"),
    )),
    Message("TruncatedNormalInitializer", "hyperparams", (
        Field("mean", FLOAT, 0.0),
        Field("stddev", FLOAT, 1.0),
    )),
    Message("VarianceScalingInitializer", "hyperparams", (
        Field("factor", FLOAT, 2.0),
        Field("uniform", BOOL, False),
        Field("mode", INITIALIZER_MODE, "FAN_IN"),
    )),
    Message("RandomNormalInitializer", "hyperparams", (
        Field("mean", FLOAT, 0.0),
        Field("stddev", FLOAT, 1.0),
    )),
    Message("BatchNorm", "hyperparams", (
        Field("decay", FLOAT, 0.999),
        Field("center", BOOL, True),
        Field("scale", BOOL, False),
        Field("epsilon", FLOAT, 0.001),
        Field("train", BOOL, True),
    )),
    Message("GroupNorm", "hyperparams", ()),
    # box_coder.proto
    Message("BoxCoder", "box_coder", (
        Field("faster_rcnn_box_coder", "FasterRcnnBoxCoder", oneof="box_coder_oneof"),
        Field("mean_stddev_box_coder", "MeanStddevBoxCoder", oneof="box_coder_oneof"),
        Field("square_box_coder", "SquareBoxCoder", oneof="box_coder_oneof"),
        Field("keypoint_box_coder", "KeypointBoxCoder", oneof="box_coder_oneof"),
    )),
    # faster_rcnn_box_coder.proto
    Message("FasterRcnnBoxCoder", "faster_rcnn_box_coder", (
        Field("y_scale", FLOAT, 10.0),
        Field("x_scale", FLOAT, 10.0),
        Field("height_scale", FLOAT, 5.0),
        Field("width_scale", FLOAT, 5.0),
    )),
    # mean_stddev_box_coder.proto
    Message("MeanStddevBoxCoder", "mean_stddev_box_coder", (
        Field("stddev", FLOAT, 0.01),
    )),
    # square_box_coder.proto
    Message("SquareBoxCoder", "square_box_coder", (
        Field("y_scale", FLOAT, 10.0),
        Field("x_scale", FLOAT, 10.0),
        Field("length_scale", FLOAT, 5.0),
    )),
    # keypoint_box_coder.proto
    Message("KeypointBoxCoder", "keypoint_box_coder", (
        Field("num_keypoints", INT32),
        Field("y_scale", FLOAT, 10.0),
        Field("x_scale", FLOAT, 10.0),
        Field("height_scale", FLOAT, 5.0),
        Field("width_scale", FLOAT, 5.0),
    )),
    # matcher.proto
    Message("Matcher", "matcher", (
        Field("argmax_matcher", "ArgMaxMatcher", oneof="matcher_oneof"),
        Field("bipartite_matcher", "BipartiteMatcher", oneof="matcher_oneof"),
    )),
    # argmax_matcher.proto
    Message("ArgMaxMatcher", "argmax_matcher", (
        Field("matched_threshold", FLOAT, 0.5),
        Field("unmatched_threshold", FLOAT, 0.5),
        Field("ignore_thresholds", BOOL, False),
        Field("negatives_lower_than_unmatched", BOOL, True),
        Field("force_match_for_each_row", BOOL, False),
        Field("use_matmul_gather", BOOL, False),
    )),
    # bipartite_matcher.proto
    Message("BipartiteMatcher", "bipartite_matcher", (
        Field("use_matmul_gather", BOOL, False),
    )),
    # region_similarity_calculator.proto
    Message("RegionSimilarityCalculator", "region_similarity_calculator", (
        Field("neg_sq_dist_similarity", "NegSqDistSimilarity", oneof="region_similarity"),
        Field("iou_similarity", "IouSimilarity", oneof="region_similarity"),
        Field("ioa_similarity", "IoaSimilarity", oneof="region_similarity"),
        Field("thresholded_iou_similarity", "ThresholdedIouSimilarity", oneof="region_similarity"),
    )),
    Message("NegSqDistSimilarity", "region_similarity_calculator", ()),
    Message("IouSimilarity", "region_similarity_calculator", ()),
    Message("IoaSimilarity", "region_similarity_calculator", ()),
    Message("ThresholdedIouSimilarity", "region_similarity_calculator", (
        Field("iou_threshold", FLOAT, 0.5),
    )),
    # box_predictor.proto
    Message("BoxPredictor", "box_predictor", (
        Field("convolutional_box_predictor", "ConvolutionalBoxPredictor", oneof="box_predictor_oneof"),
        Field("mask_rcnn_box_predictor", "MaskRCNNBoxPredictor", oneof="box_predictor_oneof"),
        Field("rfcn_box_predictor", "RfcnBoxPredictor", oneof="box_predictor_oneof"),
        Field("weight_shared_convolutional_box_predictor", "WeightSharedConvolutionalBoxPredictor",
              oneof="box_predictor_oneof"),
    )),
    Message("ConvolutionalBoxPredictor", "box_predictor", (
        Field("conv_hyperparams", "Hyperparams"),
        Field("min_depth", INT32, 0),
        Field("max_depth", INT32, 0),
        Field("num_layers_before_predictor", INT32, 0),
        Field("use_dropout", BOOL, True),
        Field("dropout_keep_probability", FLOAT, 0.8),
        Field("kernel_size", INT32, 1),
        Field("box_code_size", INT32, 4),
        Field("apply_sigmoid_to_scores", BOOL, False),
        Field("class_prediction_bias_init", FLOAT, 0.0),
        Field("use_depthwise", BOOL, False),
        Field("mask_head", "MaskHead"),  # 2018-09 to 2018-11 only
        Field("box_encodings_clip_range", "ConvolutionalBoxPredictor.BoxEncodingsClipRange"),
    )),
    Message("MaskHead", "box_predictor", (  # 2018-09 to 2018-11 only (then Ssd.MaskHead)
        Field("mask_height", INT32, 15),
        Field("mask_width", INT32, 15),
        Field("masks_are_class_agnostic", BOOL, True),
    )),
    Message("ConvolutionalBoxPredictor.BoxEncodingsClipRange", "box_predictor", (
        Field("min", FLOAT),
        Field("max", FLOAT),
    )),
    Message("MaskRCNNBoxPredictor", "box_predictor", (
        Field("fc_hyperparams", "Hyperparams"),
        Field("use_dropout", BOOL, False),
        Field("dropout_keep_probability", FLOAT, 0.5),
        Field("box_code_size", INT32, 4),
        Field("conv_hyperparams", "Hyperparams"),
        Field("predict_instance_masks", BOOL, False),
        Field("mask_prediction_conv_depth", INT32, 256),
        Field("predict_keypoints", BOOL, False),
        Field("mask_height", INT32, 15),
        Field("mask_width", INT32, 15),
        Field("mask_prediction_num_conv_layers", INT32, 2),
        Field("masks_are_class_agnostic", BOOL, False),
        Field("share_box_across_classes", BOOL, False),
        Field("convolve_then_upsample_masks", BOOL, False),
    )),
    Message("RfcnBoxPredictor", "box_predictor", (
        Field("conv_hyperparams", "Hyperparams"),
        Field("num_spatial_bins_height", INT32, 3),
        Field("num_spatial_bins_width", INT32, 3),
        Field("depth", INT32, 1024),
        Field("box_code_size", INT32, 4),
        Field("crop_height", INT32, 12),
        Field("crop_width", INT32, 12),
    )),
    Message("WeightSharedConvolutionalBoxPredictor", "box_predictor", (
        Field("conv_hyperparams", "Hyperparams"),
        Field("num_layers_before_predictor", INT32, 0),
        Field("depth", INT32, 0),
        Field("kernel_size", INT32, 3),
        Field("box_code_size", INT32, 4),
        Field("class_prediction_bias_init", FLOAT, 0.0),
        Field("use_dropout", BOOL, False),
        Field("dropout_keep_probability", FLOAT, 0.8),
        Field("share_prediction_tower", BOOL, False),
        Field("use_depthwise", BOOL, False),
        Field("mask_head", "MaskHead"),  # 2018-09 to 2018-11 only
        Field("score_converter", SHARED_SCORE_CONVERTER, "IDENTITY"),
        Field("box_encodings_clip_range", "WeightSharedConvolutionalBoxPredictor.BoxEncodingsClipRange"),
        Field("apply_conv_hyperparams_to_heads", BOOL, False),
        Field("apply_conv_hyperparams_pointwise", BOOL, False),
    )),
    Message("WeightSharedConvolutionalBoxPredictor.BoxEncodingsClipRange", "box_predictor", (
        Field("min", FLOAT),
        Field("max", FLOAT),
    )),
    # anchor_generator.proto
    Message("AnchorGenerator", "anchor_generator", (
        Field("grid_anchor_generator", "GridAnchorGenerator", oneof="anchor_generator_oneof"),
        Field("ssd_anchor_generator", "SsdAnchorGenerator", oneof="anchor_generator_oneof"),
        Field("multiscale_anchor_generator", "MultiscaleAnchorGenerator", oneof="anchor_generator_oneof"),
        Field("flexible_grid_anchor_generator", "FlexibleGridAnchorGenerator", oneof="anchor_generator_oneof"),
    )),
    # grid_anchor_generator.proto
    Message("GridAnchorGenerator", "grid_anchor_generator", (
        Field("height", INT32, 256),
        Field("width", INT32, 256),
        Field("height_stride", INT32, 16),
        Field("width_stride", INT32, 16),
        Field("height_offset", INT32, 0),
        Field("width_offset", INT32, 0),
        Field("scales", FLOAT, repeated=True),
        Field("aspect_ratios", FLOAT, repeated=True),
    )),
    # ssd_anchor_generator.proto
    Message("SsdAnchorGenerator", "ssd_anchor_generator", (
        Field("num_layers", INT32, 6),
        Field("min_scale", FLOAT, 0.2),
        Field("max_scale", FLOAT, 0.95),
        Field("aspect_ratios", FLOAT, repeated=True),
        Field("reduce_boxes_in_lowest_layer", BOOL, True),
        Field("scales", FLOAT, repeated=True),
        Field("interpolated_scale_aspect_ratio", FLOAT, 1.0),
        Field("base_anchor_height", FLOAT, 1.0),
        Field("base_anchor_width", FLOAT, 1.0),
        Field("height_stride", INT32, repeated=True),
        Field("width_stride", INT32, repeated=True),
        Field("height_offset", INT32, repeated=True),
        Field("width_offset", INT32, repeated=True),
    )),
    # multiscale_anchor_generator.proto
    Message("MultiscaleAnchorGenerator", "multiscale_anchor_generator", (
        Field("min_level", INT32, 3),
        Field("max_level", INT32, 7),
        Field("anchor_scale", FLOAT, 4.0),
        Field("aspect_ratios", FLOAT, repeated=True),
        Field("scales_per_octave", INT32, 2),
        Field("normalize_coordinates", BOOL, True),
    )),
    # flexible_grid_anchor_generator.proto
    Message("FlexibleGridAnchorGenerator", "flexible_grid_anchor_generator", (
        Field("anchor_grid", "AnchorGrid", repeated=True),
        Field("normalize_coordinates", BOOL, True),
    )),
    Message("AnchorGrid", "flexible_grid_anchor_generator", (
        Field("base_sizes", FLOAT, repeated=True),
        Field("aspect_ratios", FLOAT, repeated=True),
        Field("height_stride", UINT32),
        Field("width_stride", UINT32),
        Field("height_offset", UINT32, 0),
        Field("width_offset", UINT32, 0),
    )),
    # post_processing.proto
    Message("PostProcessing", "post_processing", (
        Field("batch_non_max_suppression", "BatchNonMaxSuppression"),
        Field("score_converter", SCORE_CONVERTER, "IDENTITY"),
        Field("logit_scale", FLOAT, 1.0),
        Field("calibration_config", "CalibrationConfig"),
    )),
    Message("BatchNonMaxSuppression", "post_processing", (
        Field("score_threshold", FLOAT, 0.0),
        Field("iou_threshold", FLOAT, 0.6),
        Field("max_detections_per_class", INT32, 100),
        Field("max_total_detections", INT32, 100),
        Field("use_static_shapes", BOOL, False),
        Field("use_class_agnostic_nms", BOOL, False),
        Field("max_classes_per_detection", INT32, 1),
        Field("soft_nms_sigma", FLOAT, 0.0),
        Field("use_combined_nms", BOOL, False),
        Field("use_partitioned_nms", BOOL, False),
        Field("change_coordinate_frame", BOOL, True),
        Field("use_hard_nms", BOOL, False),
        Field("use_cpu_nms", BOOL, False),
    )),
    # calibration.proto
    Message("CalibrationConfig", "calibration", (
        Field("function_approximation", "FunctionApproximation", oneof="calibrator"),
        # 2019-03 to 2019-05 only:
        Field("label_function_approximations", "LabelFunctionApproximations", oneof="calibrator"),
        Field("sigmoid_calibration", "SigmoidCalibration", oneof="calibrator"),
        # 2019-03 to 2019-05 only:
        Field("label_sigmoid_calibrations", "LabelSigmoidCalibrations", oneof="calibrator"),
        Field("class_id_function_approximations", "ClassIdFunctionApproximations", oneof="calibrator"),
        Field("class_id_sigmoid_calibrations", "ClassIdSigmoidCalibrations", oneof="calibrator"),
        Field("temperature_scaling_calibration", "TemperatureScalingCalibration", oneof="calibrator"),
    )),
    Message("FunctionApproximation", "calibration", (
        Field("x_y_pairs", "XYPairs"),
    )),
    Message("XYPairs", "calibration", (
        Field("x_y_pair", "XYPairs.XYPair", repeated=True),
        Field("training_data_type", TRAINING_DATA_TYPE),
    )),
    Message("XYPairs.XYPair", "calibration", (
        Field("x", FLOAT),
        Field("y", FLOAT),
    )),
    Message("LabelFunctionApproximations", "calibration", (
        Field("label_xy_pairs_map", map_entry(STRING, "XYPairs"), repeated=True),  # 2019-03 to 2019-05 only
        Field("label_map_path", STRING),  # 2019-03 to 2019-05 only
    )),
    Message("SigmoidCalibration", "calibration", (
        Field("sigmoid_parameters", "SigmoidParameters"),
    )),
    Message("SigmoidParameters", "calibration", (
        Field("a", FLOAT, -1.0),
        Field("b", FLOAT, 0.0),
    )),
    Message("LabelSigmoidCalibrations", "calibration", (
        # 2019-03 to 2019-05 only:
        Field("label_sigmoid_parameters_map", map_entry(STRING, "SigmoidParameters"), repeated=True),
        Field("label_map_path", STRING),  # 2019-03 to 2019-05 only
    )),
    Message("ClassIdFunctionApproximations", "calibration", (
        Field("class_id_xy_pairs_map", map_entry(INT32, "XYPairs"), repeated=True),
    )),
    Message("ClassIdSigmoidCalibrations", "calibration", (
        Field("class_id_sigmoid_parameters_map", map_entry(INT32, "SigmoidParameters"), repeated=True),
    )),
    Message("TemperatureScalingCalibration", "calibration", (
        Field("scaler", FLOAT),
    )),
    # losses.proto
    Message("Loss", "losses", (
        Field("localization_loss", "LocalizationLoss"),
        Field("classification_loss", "ClassificationLoss"),
        Field("hard_example_miner", "HardExampleMiner"),
        Field("classification_weight", FLOAT, 1.0),
        Field("localization_weight", FLOAT, 1.0),
        Field("random_example_sampler", "RandomExampleSampler"),
        Field("equalization_loss", "Loss.EqualizationLoss"),
        Field("expected_loss_weights", EXPECTED_LOSS_WEIGHTS, "NONE"),
        Field("min_num_negative_samples", FLOAT, 0.0),
        Field("desired_negative_sampling_ratio", FLOAT, 3.0),
    )),
    Message("LocalizationLoss", "losses", (
        Field("weighted_l2", "WeightedL2LocalizationLoss", oneof="localization_loss"),
        Field("weighted_smooth_l1", "WeightedSmoothL1LocalizationLoss", oneof="localization_loss"),
        Field("weighted_iou", "WeightedIOULocalizationLoss", oneof="localization_loss"),
        Field("l1_localization_loss", "L1LocalizationLoss", oneof="localization_loss"),
        Field("weighted_giou", "WeightedGIOULocalizationLoss", oneof="localization_loss"),
    )),
    Message("WeightedL2LocalizationLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
    )),
    Message("WeightedSmoothL1LocalizationLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
        Field("delta", FLOAT, 1.0),
    )),
    Message("WeightedIOULocalizationLoss", "losses", ()),
    Message("L1LocalizationLoss", "losses", ()),
    Message("WeightedGIOULocalizationLoss", "losses", ()),
    Message("ClassificationLoss", "losses", (
        Field("weighted_sigmoid", "WeightedSigmoidClassificationLoss", oneof="classification_loss"),
        Field("weighted_softmax", "WeightedSoftmaxClassificationLoss", oneof="classification_loss"),
        Field("bootstrapped_sigmoid", "BootstrappedSigmoidClassificationLoss", oneof="classification_loss"),
        Field("weighted_sigmoid_focal", "SigmoidFocalClassificationLoss", oneof="classification_loss"),
        Field("weighted_logits_softmax", "WeightedSoftmaxClassificationAgainstLogitsLoss",
              oneof="classification_loss"),
        Field("penalty_reduced_logistic_focal_loss", "PenaltyReducedLogisticFocalLoss", oneof="classification_loss"),
        Field("weighted_dice_classification_loss", "WeightedDiceClassificationLoss", oneof="classification_loss"),
    )),
    Message("WeightedSigmoidClassificationLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
    )),
    Message("WeightedSoftmaxClassificationLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
        Field("logit_scale", FLOAT, 1.0),
    )),
    Message("BootstrappedSigmoidClassificationLoss", "losses", (
        Field("alpha", FLOAT),
        Field("hard_bootstrap", BOOL, False),
        Field("anchorwise_output", BOOL, False),
    )),
    Message("SigmoidFocalClassificationLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
        Field("gamma", FLOAT, 2.0),
        Field("alpha", FLOAT),
    )),
    Message("WeightedSoftmaxClassificationAgainstLogitsLoss", "losses", (
        Field("anchorwise_output", BOOL, False),
        Field("logit_scale", FLOAT, 1.0),
    )),
    Message("PenaltyReducedLogisticFocalLoss", "losses", (
        Field("alpha", FLOAT),
        Field("beta", FLOAT),
    )),
    Message("WeightedDiceClassificationLoss", "losses", (
        Field("squared_normalization", BOOL, False),
        Field("is_prediction_probability", BOOL, False),
    )),
    Message("HardExampleMiner", "losses", (
        Field("num_hard_examples", INT32, 64),
        Field("iou_threshold", FLOAT, 0.7),
        Field("loss_type", LOSS_TYPE, "BOTH"),
        Field("max_negatives_per_positive", INT32, 0),
        Field("min_negatives_per_image", INT32, 0),
    )),
    Message("RandomExampleSampler", "losses", (
        Field("positive_sample_fraction", FLOAT, 0.01),
    )),
    Message("Loss.EqualizationLoss", "losses", (
        Field("weight", FLOAT, 0.0),
        Field("exclude_prefixes", STRING, repeated=True),
    )),
    # center_net.proto
    Message("CenterNet", "center_net", opaque=True),
    # train.proto
    Message("TrainConfig", "train", (
        Field("batch_size", UINT32, 32),
        Field("data_augmentation_options", "PreprocessingStep", repeated=True),
        Field("sync_replicas", BOOL, False),
        Field("keep_checkpoint_every_n_hours", FLOAT, 10000.0),
        Field("optimizer", "Optimizer"),
        Field("gradient_clipping_by_norm", FLOAT, 0.0),
        Field("fine_tune_checkpoint", STRING, ""),
        Field("from_detection_checkpoint", BOOL, False),  # deprecated
        Field("num_steps", UINT32, 0),
        Field("startup_delay_steps", FLOAT, 15.0),
        Field("bias_grad_multiplier", FLOAT, 0.0),
        Field("freeze_variables", STRING, repeated=True),
        Field("replicas_to_aggregate", INT32, 1),
        Field("batch_queue_capacity", INT32, 150),  # deprecated
        Field("num_batch_queue_threads", INT32, 8),  # deprecated
        Field("prefetch_queue_capacity", INT32, 5),  # deprecated
        Field("merge_multiple_label_boxes", BOOL, False),
        Field("load_all_detection_checkpoint_vars", BOOL, False),
        Field("add_regularization_loss", BOOL, True),
        Field("max_number_of_boxes", INT32, 100),  # deprecated
        Field("unpad_groundtruth_tensors", BOOL, True),
        Field("fine_tune_checkpoint_type", STRING, ""),
        Field("retain_original_images", BOOL, False),
        Field("use_multiclass_scores", BOOL, False),
        Field("update_trainable_variables", STRING, repeated=True),
        Field("use_bfloat16", BOOL, False),
        Field("summarize_gradients", BOOL, False),
        Field("fine_tune_checkpoint_version", CHECKPOINT_VERSION, "V1"),
        Field("run_fine_tune_checkpoint_dummy_computation", BOOL, True),
    )),
    # preprocessor.proto
    Message("PreprocessingStep", "preprocessor", (
        Field("normalize_image", "NormalizeImage", oneof="preprocessing_step"),
        Field("random_horizontal_flip", "RandomHorizontalFlip", oneof="preprocessing_step"),
        Field("random_pixel_value_scale", "RandomPixelValueScale", oneof="preprocessing_step"),
        Field("random_image_scale", "RandomImageScale", oneof="preprocessing_step"),
        Field("random_rgb_to_gray", "RandomRGBtoGray", oneof="preprocessing_step"),
        Field("random_adjust_brightness", "RandomAdjustBrightness", oneof="preprocessing_step"),
        Field("random_adjust_contrast", "RandomAdjustContrast", oneof="preprocessing_step"),
        Field("random_adjust_hue", "RandomAdjustHue", oneof="preprocessing_step"),
        Field("random_adjust_saturation", "RandomAdjustSaturation", oneof="preprocessing_step"),
        Field("random_distort_color", "RandomDistortColor", oneof="preprocessing_step"),
        Field("random_jitter_boxes", "RandomJitterBoxes", oneof="preprocessing_step"),
        Field("random_crop_image", "RandomCropImage", oneof="preprocessing_step"),
        Field("random_pad_image", "RandomPadImage", oneof="preprocessing_step"),
        Field("random_crop_pad_image", "RandomCropPadImage", oneof="preprocessing_step"),
        Field("random_crop_to_aspect_ratio", "RandomCropToAspectRatio", oneof="preprocessing_step"),
        Field("random_black_patches", "RandomBlackPatches", oneof="preprocessing_step"),
        Field("random_resize_method", "RandomResizeMethod", oneof="preprocessing_step"),
        Field("scale_boxes_to_pixel_coordinates", "ScaleBoxesToPixelCoordinates", oneof="preprocessing_step"),
        Field("resize_image", "ResizeImage", oneof="preprocessing_step"),
        Field("subtract_channel_mean", "SubtractChannelMean", oneof="preprocessing_step"),
        Field("ssd_random_crop", "SSDRandomCrop", oneof="preprocessing_step"),
        Field("ssd_random_crop_pad", "SSDRandomCropPad", oneof="preprocessing_step"),
        Field("ssd_random_crop_fixed_aspect_ratio", "SSDRandomCropFixedAspectRatio", oneof="preprocessing_step"),
        Field("ssd_random_crop_pad_fixed_aspect_ratio", "SSDRandomCropPadFixedAspectRatio",
              oneof="preprocessing_step"),
        Field("random_vertical_flip", "RandomVerticalFlip", oneof="preprocessing_step"),
        Field("random_rotation90", "RandomRotation90", oneof="preprocessing_step"),
        Field("rgb_to_gray", "RGBtoGray", oneof="preprocessing_step"),
        Field("convert_class_logits_to_softmax", "ConvertClassLogitsToSoftmax", oneof="preprocessing_step"),
        Field("random_absolute_pad_image", "RandomAbsolutePadImage", oneof="preprocessing_step"),
        Field("random_self_concat_image", "RandomSelfConcatImage", oneof="preprocessing_step"),
        Field("autoaugment_image", "AutoAugmentImage", oneof="preprocessing_step"),
        Field("drop_label_probabilistically", "DropLabelProbabilistically", oneof="preprocessing_step"),
        Field("remap_labels", "RemapLabels", oneof="preprocessing_step"),
        Field("random_jpeg_quality", "RandomJpegQuality", oneof="preprocessing_step"),
        Field("random_downscale_to_target_pixels", "RandomDownscaleToTargetPixels", oneof="preprocessing_step"),
        Field("random_patch_gaussian", "RandomPatchGaussian", oneof="preprocessing_step"),
        Field("random_square_crop_by_scale", "RandomSquareCropByScale", oneof="preprocessing_step"),
        Field("random_scale_crop_and_pad_to_square", "RandomScaleCropAndPadToSquare", oneof="preprocessing_step"),
        Field("adjust_gamma", "AdjustGamma", oneof="preprocessing_step"),
    )),
    Message("NormalizeImage", "preprocessor", (
        Field("original_minval", FLOAT),
        Field("original_maxval", FLOAT),
        Field("target_minval", FLOAT, 0.0),
        Field("target_maxval", FLOAT, 1.0),
    )),
    Message("RandomHorizontalFlip", "preprocessor", (
        Field("keypoint_flip_permutation", INT32, repeated=True),
        Field("probability", FLOAT, 0.5),
    )),
    Message("RandomPixelValueScale", "preprocessor", (
        Field("minval", FLOAT, 0.9),
        Field("maxval", FLOAT, 1.1),
    )),
    Message("RandomImageScale", "preprocessor", (
        Field("min_scale_ratio", FLOAT, 0.5),
        Field("max_scale_ratio", FLOAT, 2.0),
    )),
    Message("RandomRGBtoGray", "preprocessor", (
        Field("probability", FLOAT, 0.1),
    )),
    Message("RandomAdjustBrightness", "preprocessor", (
        Field("max_delta", FLOAT, 0.2),
    )),
    Message("RandomAdjustContrast", "preprocessor", (
        Field("min_delta", FLOAT, 0.8),
        Field("max_delta", FLOAT, 1.25),
    )),
    Message("RandomAdjustHue", "preprocessor", (
        Field("max_delta", FLOAT, 0.02),
    )),
    Message("RandomAdjustSaturation", "preprocessor", (
        Field("min_delta", FLOAT, 0.8),
        Field("max_delta", FLOAT, 1.25),
    )),
    Message("RandomDistortColor", "preprocessor", (
        Field("color_ordering", INT32),
    )),
    Message("RandomJitterBoxes", "preprocessor", (
        Field("ratio", FLOAT, 0.05),
        Field("jitter_mode", JITTER_MODE, "DEFAULT"),
    )),
    Message("RandomCropImage", "preprocessor", (
        Field("min_object_covered", FLOAT, 1.0),
        Field("min_aspect_ratio", FLOAT, 0.75),
        Field("max_aspect_ratio", FLOAT, 1.33),
        Field("min_area", FLOAT, 0.1),
        Field("max_area", FLOAT, 1.0),
        Field("overlap_thresh", FLOAT, 0.3),
        Field("random_coef", FLOAT, 0.0),
        Field("clip_boxes", BOOL, True),
    )),
    Message("RandomPadImage", "preprocessor", (
        Field("min_image_height", FLOAT),
        Field("min_image_width", FLOAT),
        Field("max_image_height", FLOAT),
        Field("max_image_width", FLOAT),
        Field("pad_color", FLOAT, repeated=True),
    )),
    Message("RandomCropPadImage", "preprocessor", (
        Field("min_object_covered", FLOAT, 1.0),
        Field("min_aspect_ratio", FLOAT, 0.75),
        Field("max_aspect_ratio", FLOAT, 1.33),
        Field("min_area", FLOAT, 0.1),
        Field("max_area", FLOAT, 1.0),
        Field("overlap_thresh", FLOAT, 0.3),
        Field("random_coef", FLOAT, 0.0),
        Field("min_padded_size_ratio", FLOAT, repeated=True),
        Field("max_padded_size_ratio", FLOAT, repeated=True),
        Field("pad_color", FLOAT, repeated=True),
        Field("clip_boxes", BOOL, True),
    )),
    Message("RandomCropToAspectRatio", "preprocessor", (
        Field("aspect_ratio", FLOAT, 1.0),
        Field("overlap_thresh", FLOAT, 0.3),
        Field("clip_boxes", BOOL, True),
    )),
    Message("RandomBlackPatches", "preprocessor", (
        Field("max_black_patches", INT32, 10),
        Field("probability", FLOAT, 0.5),
        Field("size_to_image_ratio", FLOAT, 0.1),
    )),
    Message("RandomResizeMethod", "preprocessor", (
        Field("target_height", FLOAT),
        Field("target_width", FLOAT),
    )),
    Message("ScaleBoxesToPixelCoordinates", "preprocessor", ()),
    Message("ResizeImage", "preprocessor", (
        Field("new_height", INT32),
        Field("new_width", INT32),
        Field("method", RESIZE_IMAGE_METHOD, "BILINEAR"),
    )),
    Message("SubtractChannelMean", "preprocessor", (
        Field("means", FLOAT, repeated=True),
    )),
    Message("SSDRandomCrop", "preprocessor", (
        Field("operations", "SSDRandomCropOperation", repeated=True),
    )),
    Message("SSDRandomCropOperation", "preprocessor", (
        Field("min_object_covered", FLOAT),
        Field("min_aspect_ratio", FLOAT),
        Field("max_aspect_ratio", FLOAT),
        Field("min_area", FLOAT),
        Field("max_area", FLOAT),
        Field("overlap_thresh", FLOAT),
        Field("random_coef", FLOAT),
        Field("clip_boxes", BOOL, True),
    )),
    Message("SSDRandomCropPad", "preprocessor", (
        Field("operations", "SSDRandomCropPadOperation", repeated=True),
    )),
    Message("SSDRandomCropPadOperation", "preprocessor", (
        Field("min_object_covered", FLOAT),
        Field("min_aspect_ratio", FLOAT),
        Field("max_aspect_ratio", FLOAT),
        Field("min_area", FLOAT),
        Field("max_area", FLOAT),
        Field("overlap_thresh", FLOAT),
        Field("random_coef", FLOAT),
        Field("min_padded_size_ratio", FLOAT, repeated=True),
        Field("max_padded_size_ratio", FLOAT, repeated=True),
        Field("pad_color_r", FLOAT),
        Field("pad_color_g", FLOAT),
        Field("pad_color_b", FLOAT),
        Field("clip_boxes", BOOL, True),
    )),
    Message("SSDRandomCropFixedAspectRatio", "preprocessor", (
        Field("operations", "SSDRandomCropFixedAspectRatioOperation", repeated=True),
        Field("aspect_ratio", FLOAT, 1.0),
    )),
    Message("SSDRandomCropFixedAspectRatioOperation", "preprocessor", (
        Field("min_object_covered", FLOAT),
        Field("min_area", FLOAT),
        Field("max_area", FLOAT),
        Field("overlap_thresh", FLOAT),
        Field("random_coef", FLOAT),
        Field("clip_boxes", BOOL, True),
    )),
    Message("SSDRandomCropPadFixedAspectRatio", "preprocessor", (
        Field("operations", "SSDRandomCropPadFixedAspectRatioOperation", repeated=True),
        Field("aspect_ratio", FLOAT, 1.0),
        Field("min_padded_size_ratio", FLOAT, repeated=True),
        Field("max_padded_size_ratio", FLOAT, repeated=True),
    )),
    Message("SSDRandomCropPadFixedAspectRatioOperation", "preprocessor", (
        Field("min_object_covered", FLOAT),
        Field("min_aspect_ratio", FLOAT),
        Field("max_aspect_ratio", FLOAT),
        Field("min_area", FLOAT),
        Field("max_area", FLOAT),
        Field("overlap_thresh", FLOAT),
        Field("random_coef", FLOAT),
        Field("min_padded_size_ratio", FLOAT, repeated=True),  # 2017-10 to 2018-02 only
        Field("max_padded_size_ratio", FLOAT, repeated=True),  # 2017-10 to 2018-02 only
        Field("clip_boxes", BOOL, True),
    )),
    Message("RandomVerticalFlip", "preprocessor", (
        Field("keypoint_flip_permutation", INT32, repeated=True),
        Field("probability", FLOAT, 0.5),
    )),
    Message("RandomRotation90", "preprocessor", (
        Field("keypoint_rot_permutation", INT32, repeated=True),
        Field("probability", FLOAT, 0.5),
    )),
    Message("RGBtoGray", "preprocessor", ()),
    Message("ConvertClassLogitsToSoftmax", "preprocessor", (
        Field("temperature", FLOAT, 1.0),
    )),
    Message("RandomAbsolutePadImage", "preprocessor", (
        Field("max_height_padding", INT32),
        Field("max_width_padding", INT32),
        Field("pad_color", FLOAT, repeated=True),
    )),
    Message("RandomSelfConcatImage", "preprocessor", (
        Field("concat_vertical_probability", FLOAT, 0.1),
        Field("concat_horizontal_probability", FLOAT, 0.1),
    )),
    Message("AutoAugmentImage", "preprocessor", (
        Field("policy_name", STRING, "v0"),
    )),
    Message("DropLabelProbabilistically", "preprocessor", (
        Field("label", INT32),
        Field("drop_probability", FLOAT, 1.0),
    )),
    Message("RemapLabels", "preprocessor", (
        Field("original_labels", INT32, repeated=True),
        Field("new_label", INT32),
    )),
    Message("RandomJpegQuality", "preprocessor", (
        Field("random_coef", FLOAT, 0.0),
        Field("min_jpeg_quality", INT32, 0),
        Field("max_jpeg_quality", INT32, 100),
    )),
    Message("RandomDownscaleToTargetPixels", "preprocessor", (
        Field("random_coef", FLOAT, 0.0),
        Field("min_target_pixels", INT32, 300000),
        Field("max_target_pixels", INT32, 500000),
    )),
    Message("RandomPatchGaussian", "preprocessor", (
        Field("random_coef", FLOAT, 0.0),
        Field("min_patch_size", INT32, 1),
        Field("max_patch_size", INT32, 250),
        Field("min_gaussian_stddev", FLOAT, 0.0),
        Field("max_gaussian_stddev", FLOAT, 1.0),
    )),
    Message("RandomSquareCropByScale", "preprocessor", (
        Field("max_border", INT32, 128),
        Field("scale_min", FLOAT, 0.6),
        Field("scale_max", FLOAT, 1.3),
        Field("num_scales", INT32, 8),
    )),
    Message("RandomScaleCropAndPadToSquare", "preprocessor", (
        Field("output_size", INT32, 512),
        Field("scale_min", FLOAT, 0.1),
        Field("scale_max", FLOAT, 2.0),
    )),
    Message("AdjustGamma", "preprocessor", (
        Field("gamma", FLOAT, 1.0),
        Field("gain", FLOAT, 1.0),
    )),
    # optimizer.proto
    Message("Optimizer", "optimizer", (
        Field("rms_prop_optimizer", "RMSPropOptimizer", oneof="optimizer"),
        Field("momentum_optimizer", "MomentumOptimizer", oneof="optimizer"),
        Field("adam_optimizer", "AdamOptimizer", oneof="optimizer"),
        Field("use_moving_average", BOOL, True),
        Field("moving_average_decay", FLOAT, 0.9999),
    )),
    Message("RMSPropOptimizer", "optimizer", (
        Field("learning_rate", "LearningRate"),
        Field("momentum_optimizer_value", FLOAT, 0.9),
        Field("decay", FLOAT, 0.9),
        Field("epsilon", FLOAT, 1.0),
    )),
    Message("LearningRate", "optimizer", (
        Field("constant_learning_rate", "ConstantLearningRate", oneof="learning_rate"),
        Field("exponential_decay_learning_rate", "ExponentialDecayLearningRate", oneof="learning_rate"),
        Field("manual_step_learning_rate", "ManualStepLearningRate", oneof="learning_rate"),
        Field("cosine_decay_learning_rate", "CosineDecayLearningRate", oneof="learning_rate"),
    )),
    Message("ConstantLearningRate", "optimizer", (
        Field("learning_rate", FLOAT, 0.002),
    )),
    Message("ExponentialDecayLearningRate", "optimizer", (
        Field("initial_learning_rate", FLOAT, 0.002),
        Field("decay_steps", UINT32, 4000000),
        Field("decay_factor", FLOAT, 0.95),
        Field("staircase", BOOL, True),
        Field("burnin_learning_rate", FLOAT, 0.0),
        Field("burnin_steps", UINT32, 0),
        Field("min_learning_rate", FLOAT, 0.0),
    )),
    Message("ManualStepLearningRate", "optimizer", (
        Field("initial_learning_rate", FLOAT, 0.002),
        Field("schedule", "ManualStepLearningRate.LearningRateSchedule", repeated=True),
        Field("warmup", BOOL, False),
    )),
    Message("ManualStepLearningRate.LearningRateSchedule", "optimizer", (
        Field("step", UINT32),
        Field("learning_rate", FLOAT, 0.002),
    )),
    Message("CosineDecayLearningRate", "optimizer", (
        Field("learning_rate_base", FLOAT, 0.002),
        Field("total_steps", UINT32, 4000000),
        Field("warmup_learning_rate", FLOAT, 0.0002),
        Field("warmup_steps", UINT32, 10000),
        Field("hold_base_rate_steps", UINT32, 0),
    )),
    Message("MomentumOptimizer", "optimizer", (
        Field("learning_rate", "LearningRate"),
        Field("momentum_optimizer_value", FLOAT, 0.9),
    )),
    Message("AdamOptimizer", "optimizer", (
        Field("learning_rate", "LearningRate"),
        Field("epsilon", FLOAT, 1e-08),
    )),
    # input_reader.proto
    Message("InputReader", "input_reader", (
        Field("label_map_path", STRING, ""),
        Field("shuffle", BOOL, True),
        Field("queue_capacity", UINT32, 2000),  # deprecated
        Field("min_after_dequeue", UINT32, 1000),  # deprecated
        Field("num_epochs", UINT32, 0),
        Field("num_readers", UINT32, 64),
        Field("load_instance_masks", BOOL, False),
        Field("tf_record_input_reader", "TFRecordInputReader", oneof="input_reader"),
        Field("external_input_reader", "ExternalInputReader", oneof="input_reader"),
        Field("shuffle_buffer_size", UINT32, 2048),
        Field("filenames_shuffle_buffer_size", UINT32, 100),
        Field("prefetch_buffer_size", UINT32, 2),  # 2018-01 to 2018-02 only
        Field("mask_type", INSTANCE_MASK_TYPE, "NUMERICAL_MASKS"),
        Field("prefetch_size", UINT32, 512),  # deprecated
        Field("num_parallel_map_calls", UINT32, 64),  # deprecated
        Field("read_block_length", UINT32, 32),
        Field("num_keypoints", UINT32, 0),
        Field("use_display_name", BOOL, False),
        Field("num_parallel_batches", UINT32, 8),
        Field("num_prefetch_batches", INT32, 2),
        Field("num_additional_channels", INT32, 0),
        Field("max_number_of_boxes", INT32, 100),
        Field("name", STRING, ""),
        Field("sample_1_of_n_examples", UINT32, 1),
        Field("load_multiclass_scores", BOOL, False),
        Field("keypoint_type_weight", FLOAT, repeated=True),
        Field("load_context_features", BOOL, False),
        Field("include_source_id", BOOL, False),
        Field("input_type", INPUT_TYPE, "TF_EXAMPLE"),
        Field("expand_labels_hierarchy", BOOL, False),
        Field("load_dense_pose", BOOL, False),
        Field("frame_index", INT32, -1),
        Field("load_track_id", BOOL, False),
        Field("sample_from_datasets_weights", FLOAT, repeated=True),
        Field("drop_remainder", BOOL, True),
        Field("load_context_image_ids", BOOL, False),
        Field("load_keypoint_depth_features", BOOL, False),
        Field("use_keypoint_label_map", BOOL, False),
    )),
    Message("TFRecordInputReader", "input_reader", (
        Field("input_path", STRING, repeated=True),
    )),
    Message("ExternalInputReader", "input_reader", ()),
    # eval.proto
    Message("EvalConfig", "eval", (
        Field("num_visualizations", UINT32, 10),
        Field("num_examples", UINT32, 5000),  # deprecated
        Field("eval_interval_secs", UINT32, 300),
        Field("max_evals", UINT32, 0),  # deprecated
        Field("save_graph", BOOL, False),
        Field("visualization_export_dir", STRING, ""),
        Field("eval_master", STRING, ""),
        Field("metrics_set", STRING, repeated=True),
        Field("export_path", STRING, ""),
        Field("ignore_groundtruth", BOOL, False),
        Field("use_moving_averages", BOOL, False),
        Field("eval_instance_masks", BOOL, False),
        Field("min_score_threshold", FLOAT, 0.5),
        Field("max_num_boxes_to_visualize", INT32, 20),
        Field("skip_scores", BOOL, False),
        Field("skip_labels", BOOL, False),
        Field("visualize_groundtruth_boxes", BOOL, False),
        Field("groundtruth_box_visualization_color", STRING, "black"),
        Field("keep_image_id_for_visualization_export", BOOL, False),
        Field("retain_original_images", BOOL, True),
        Field("include_metrics_per_category", BOOL, False),
        Field("batch_size", UINT32, 1),
        Field("recall_lower_bound", FLOAT, 0.0),
        Field("recall_upper_bound", FLOAT, 1.0),
        Field("retain_original_image_additional_channels", BOOL, False),
        Field("force_no_resize", BOOL, False),
        Field("parameterized_metric", "ParameterizedMetric", repeated=True),
        Field("use_dummy_loss_in_eval", BOOL, False),
        Field("keypoint_edge", "KeypointEdge", repeated=True),
        Field("skip_predictions_for_unlabeled_class", BOOL, False),
        Field("super_categories", map_entry(STRING, STRING), repeated=True),
        Field("all_metrics_per_category", BOOL, False),
        Field("image_classes_field_map_empty_to_ones", BOOL, True),
    )),
    Message("ParameterizedMetric", "eval", (
        Field("coco_keypoint_metrics", "CocoKeypointMetrics", oneof="parameterized_metric"),
    )),
    Message("CocoKeypointMetrics", "eval", (
        Field("class_label", STRING),
        Field("keypoint_label_to_sigmas", map_entry(STRING, FLOAT), repeated=True),
    )),
    Message("KeypointEdge", "eval", (
        Field("start", INT32),
        Field("end", INT32),
    )),
    # graph_rewriter.proto
    Message("GraphRewriter", "graph_rewriter", (
        Field("quantization", "Quantization"),
    )),
    Message("Quantization", "graph_rewriter", (
        Field("delay", INT32, 500000),
        Field("weight_bits", INT32, 8),
        Field("activation_bits", INT32, 8),
        Field("symmetric", BOOL, False),
    )),
)
MESSAGES = {m.name: m for m in _MESSAGES}
