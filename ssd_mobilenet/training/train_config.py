"""What a TF1 `pipeline.config` says about training an SSD MobileNet v1 (plain, FPN or PPN), as
frozen dataclasses.

`TrainingConfig.from_pipeline_config(path_or_text)` reads the training fields of `model.ssd`
(matcher, similarity calculator, losses, hard example miner, normalisation, regularizers,
initializers and batch norm of the feature extractor's and the box predictor's `conv_hyperparams`,
whichever box predictor the config has) and `train_config` (batch size, steps, optimizer and
learning-rate schedule, moving averages, gradient clipping, augmentation, fine-tune checkpoint
type). The config is first checked against
the OD API's messages (`pipeline_schema`: unknown fields are refused with their line); then each
message is read through a table (`proto_table.Uses`) saying what is done with each of its fields,
whose kinds and proto defaults are `pipeline_messages`' (the defaults of TF 1.13's release,
2019-02, where they changed). Options this toolkit does not reproduce raise `ConfigError` naming
the dotted field path.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssd_mobilenet.config import pipeline_text
from ssd_mobilenet.config.pipeline_reader import PipelineReader, parse_pipeline_config
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.training.proto_table import Uses, choose, fail, read

_INPUT = "about the TF1 input pipeline, not the numerics"
_DIST = "about TF1 distributed training (replicas, queues)"

# ---- tables: one per proto message (pipeline_messages holds the fields) --------------------

ARGMAX_MATCHER = Uses("ArgMaxMatcher", read=(
    "matched_threshold", "unmatched_threshold", "ignore_thresholds", "negatives_lower_than_unmatched",
    # A gather by one-hot matmul (for TPUs) selects the same values as tf.gather.
    "force_match_for_each_row", "use_matmul_gather"))
MATCHER = Uses("Matcher", read=("argmax_matcher",),
               refused={"bipartite_matcher": "only argmax_matcher is supported"})
_ONLY_IOU = "only iou_similarity is supported"
SIMILARITY = Uses("RegionSimilarityCalculator", read=("iou_similarity",), refused={
    "neg_sq_dist_similarity": _ONLY_IOU, "ioa_similarity": _ONLY_IOU, "thresholded_iou_similarity": _ONLY_IOU})
IOU_SIMILARITY = Uses("IouSimilarity")
_ANCHORWISE = {"anchorwise_output": "deprecated: since 2018 the OD API's losses are always per anchor"}
_SMOOTH_L1_OR_L2 = "SSD MobileNet v1 trains with smooth L1 or L2"
LOCALIZATION_LOSS = Uses("LocalizationLoss", read=("weighted_l2", "weighted_smooth_l1"), refused={
    "weighted_iou": _SMOOTH_L1_OR_L2, "l1_localization_loss": _SMOOTH_L1_OR_L2, "weighted_giou": _SMOOTH_L1_OR_L2})
WEIGHTED_L2 = Uses("WeightedL2LocalizationLoss", ignored=_ANCHORWISE)
WEIGHTED_SMOOTH_L1 = Uses("WeightedSmoothL1LocalizationLoss", read=("delta",), ignored=_ANCHORWISE)
CLASSIFICATION_LOSS = Uses("ClassificationLoss", read=("weighted_sigmoid", "weighted_softmax", "weighted_sigmoid_focal"),
                           refused={"weighted_logits_softmax": "distillation against logits is not supported",
                                    "bootstrapped_sigmoid": "bootstrapped sigmoid is not supported"})
WEIGHTED_SIGMOID = Uses("WeightedSigmoidClassificationLoss", ignored=_ANCHORWISE)
WEIGHTED_SOFTMAX = Uses("WeightedSoftmaxClassificationLoss", read=("logit_scale",), ignored=_ANCHORWISE)
# `alpha` has no proto default: unset means no alpha weighting (the builder passes None).
SIGMOID_FOCAL = Uses("SigmoidFocalClassificationLoss", read=("gamma", "alpha"), ignored=_ANCHORWISE,
                     unset_is_none=("alpha",))
HARD_EXAMPLE_MINER = Uses("HardExampleMiner", read=(
    "num_hard_examples", "iou_threshold", "loss_type", "max_negatives_per_positive", "min_negatives_per_image"))
LOSS = Uses("Loss", read=("localization_loss", "classification_loss", "hard_example_miner",
                          "classification_weight", "localization_weight"),
            refused={"random_example_sampler": "random example sampling is not supported",
                     "equalization_loss": "equalization loss is not supported"},
            default_only={"expected_loss_weights": "expected-sampling loss weights are not supported"},
            ignored={"min_num_negative_samples": "only used with expected_loss_weights",
                     "desired_negative_sampling_ratio": "only used with expected_loss_weights"})
BATCH_NORM = Uses("BatchNorm", read=("decay", "center", "scale", "epsilon", "train"))
REGULARIZER = Uses("Regularizer", read=("l2_regularizer",),
                   refused={"l1_regularizer": "only l2_regularizer is supported"})
L2_REGULARIZER = Uses("L2Regularizer", read=("weight",))
HYPERPARAMS = Uses("Hyperparams", read=("regularizer", "batch_norm", "regularize_depthwise", "initializer"),
                   default_only={"op": "SSD layers are convolutions",
                                 "force_use_bias": "the OD API's slim layers refuse it (Keras models only)"},
                   # The inference config (SSDConfig) checks the activation of the layers it applies to (the
                   # weight-shared predictor applies ReLU6 itself, whatever the block says).
                   ignored={"activation": "checked by SSDConfig"},
                   refused={"group_norm": "group norm is not supported",
                            "sync_batch_norm": "the OD API's slim layers refuse it (Keras models only)"})
# The initializer a layer starts from (`hyperparams_builder._build_initializer` for slim): it matters
# for the layers a run starts fresh (the class heads of another class count), not for converted weights.
INITIALIZER = Uses("Initializer", read=("truncated_normal_initializer", "variance_scaling_initializer",
                                        "random_normal_initializer"),
                   default_only={"keras_initializer_by_name": "the OD API's slim layers refuse it (Keras models only)"})
TRUNCATED_NORMAL = Uses("TruncatedNormalInitializer", read=("mean", "stddev"))
RANDOM_NORMAL = Uses("RandomNormalInitializer", read=("mean", "stddev"))
VARIANCE_SCALING = Uses("VarianceScalingInitializer", read=("factor", "uniform", "mode"))
_SSD_CONFIG = "read by SSDConfig"
BOX_PREDICTOR = Uses("BoxPredictor", read=("convolutional_box_predictor", "weight_shared_convolutional_box_predictor"))
# WeightSharedConvolutionalBoxPredictor: the training fields; the inference ones are SSDConfig's.
WEIGHT_SHARED_BOX_PREDICTOR = Uses("WeightSharedConvolutionalBoxPredictor", read=(
    "conv_hyperparams", "class_prediction_bias_init"), ignored={
    name: _SSD_CONFIG for name in ("num_layers_before_predictor", "depth", "kernel_size", "box_code_size",
                                   "share_prediction_tower", "use_depthwise", "score_converter",
                                   "box_encodings_clip_range")} | {
    "dropout_keep_probability": "only used with use_dropout"}, default_only={
    "use_dropout": "dropout before the class head is not reproduced (a random op TF1 and TF2 draw differently)",
    "apply_conv_hyperparams_to_heads": "a Keras-model option of later releases",
    "apply_conv_hyperparams_pointwise": "a Keras-model option of later releases"},
    refused={"mask_head": "SSD MobileNet v1 has no mask head"})
LEARNING_RATE = Uses("LearningRate", read=(
    "constant_learning_rate", "exponential_decay_learning_rate", "manual_step_learning_rate",
    "cosine_decay_learning_rate"))
CONSTANT_LR = Uses("ConstantLearningRate", read=("learning_rate",))
EXPONENTIAL_DECAY_LR = Uses("ExponentialDecayLearningRate", read=(
    "initial_learning_rate", "decay_steps", "decay_factor", "staircase", "burnin_learning_rate", "burnin_steps",
    "min_learning_rate"))
MANUAL_STEP_LR = Uses("ManualStepLearningRate", read=("initial_learning_rate", "schedule", "warmup"))
MANUAL_STEP = Uses("ManualStepLearningRate.LearningRateSchedule", read=("step", "learning_rate"))
COSINE_DECAY_LR = Uses("CosineDecayLearningRate", read=(
    "learning_rate_base", "total_steps", "warmup_learning_rate", "warmup_steps", "hold_base_rate_steps"))
OPTIMIZER = Uses("Optimizer", read=("rms_prop_optimizer", "momentum_optimizer", "adam_optimizer",
                                    "use_moving_average", "moving_average_decay"))
RMS_PROP = Uses("RMSPropOptimizer", read=("learning_rate", "momentum_optimizer_value", "decay", "epsilon"))
MOMENTUM = Uses("MomentumOptimizer", read=("learning_rate", "momentum_optimizer_value"))
ADAM = Uses("AdamOptimizer", read=("learning_rate",))
# PreprocessingStep: the steps the SSD MobileNet configs use (the zoo's plain and PPN configs the SSD crop,
# FPN's random_crop_image).
_AUGMENTATIONS = ("random_horizontal_flip", "ssd_random_crop", "random_crop_image")
RANDOM_HORIZONTAL_FLIP = Uses("RandomHorizontalFlip", default_only={"keypoint_flip_permutation": "there are no keypoints"})
SSD_RANDOM_CROP = Uses("SSDRandomCrop", read=("operations",))
# No proto defaults here: the OD API reads every field of an operation as written (unset is 0).
SSD_RANDOM_CROP_OPERATION = Uses("SSDRandomCropOperation", read=(
    "min_object_covered", "min_aspect_ratio", "max_aspect_ratio", "min_area", "max_area", "overlap_thresh",
    "clip_boxes", "random_coef"))
# random_crop_image: proto defaults apply to unset fields (preprocessor_builder reads the message's fields).
RANDOM_CROP_IMAGE = Uses("RandomCropImage", read=(
    "min_object_covered", "min_aspect_ratio", "max_aspect_ratio", "min_area", "max_area", "overlap_thresh",
    "random_coef", "clip_boxes"))
TRAIN = Uses("TrainConfig", read=(
    "batch_size", "data_augmentation_options", "optimizer", "gradient_clipping_by_norm", "fine_tune_checkpoint",
    "fine_tune_checkpoint_type", "from_detection_checkpoint", "load_all_detection_checkpoint_vars", "num_steps",
    "add_regularization_loss"), ignored={
    "sync_replicas": _DIST, "keep_checkpoint_every_n_hours": "checkpoint retention, not numerics",
    "startup_delay_steps": _DIST, "replicas_to_aggregate": _DIST, "batch_queue_capacity": _INPUT,
    "num_batch_queue_threads": _INPUT, "prefetch_queue_capacity": _INPUT, "max_number_of_boxes": _INPUT,
    # Padded or not, the groundtruth gives the same losses: padding rows have weight 0 (trainer.groundtruth).
    "unpad_groundtruth_tensors": "padded groundtruth rows have weight 0: the same losses either way",
    "retain_original_images": _INPUT,
    "summarize_gradients": "TensorBoard summaries, not numerics"}, default_only={
    "bias_grad_multiplier": "bias gradient multipliers are not supported",
    "update_trainable_variables": "variable selection is not supported",
    "freeze_variables": "variable freezing is not supported",
    "merge_multiple_label_boxes": "multi-label boxes are not supported",
    "use_multiclass_scores": "multiclass score targets are not supported",
    "use_bfloat16": "TPU bfloat16 training is not reproduced (train --precision mixed_bfloat16 computes in "
                    "bfloat16 with float32 variables)"})
# Ssd: the training fields; the inference ones are SSDConfig's.
SSD = Uses("Ssd", read=(
    "image_resizer", "feature_extractor", "box_coder", "matcher", "similarity_calculator", "box_predictor",
    "anchor_generator", "post_processing", "loss", "encode_background_as_zeros", "negative_class_weight",
    "normalize_loss_by_num_matches", "normalize_loc_loss_by_codesize", "freeze_batchnorm",
    "inplace_batchnorm_update"), ignored={
    "num_classes": "read by SSDConfig", "add_background_class": "read by SSDConfig",
    "implicit_example_weight": "only used with use_confidences_as_targets",
    "return_raw_detections_during_predict": "an export option, not training"}, default_only={
    "explicit_background_class": "an explicit background class is not supported",
    "use_confidences_as_targets": "confidence targets are not supported"},
    refused={"mask_head_config": "SSD MobileNet v1 has no mask head"})
# SsdFeatureExtractor: the inference fields are SSDConfig's.
FEATURE_EXTRACTOR = Uses("SsdFeatureExtractor", read=(
    "conv_hyperparams", "override_base_feature_extractor_hyperparams", "fpn"), ignored={
    name: _SSD_CONFIG for name in ("type", "depth_multiplier", "min_depth", "pad_to_multiple", "use_explicit_padding",
                                   "use_depthwise")})


# ---- the config -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ArgMaxMatcherConfig:
    """`model.ssd.matcher.argmax_matcher`. `matched_threshold` is None with `ignore_thresholds`."""

    matched_threshold: "float | None" = 0.5
    unmatched_threshold: "float | None" = 0.5
    negatives_lower_than_unmatched: bool = True
    force_match_for_each_row: bool = False
    use_matmul_gather: bool = False


@dataclass(frozen=True)
class HardExampleMinerConfig:
    """`model.ssd.loss.hard_example_miner`; `loss_type` is the proto enum name."""

    num_hard_examples: int = 64
    iou_threshold: float = 0.7
    loss_type: str = "BOTH"
    max_negatives_per_positive: int = 0
    min_negatives_per_image: int = 0


@dataclass(frozen=True)
class LossConfig:
    """`model.ssd.loss`. `localization` is `weighted_smooth_l1` or `weighted_l2`; `classification`
    is `weighted_sigmoid`, `weighted_softmax` or `weighted_sigmoid_focal`; only the parameters of
    the chosen losses matter (`focal_alpha` None: no alpha weighting)."""

    localization: str = "weighted_smooth_l1"
    smooth_l1_delta: float = 1.0
    classification: str = "weighted_sigmoid"
    softmax_logit_scale: float = 1.0
    focal_gamma: float = 2.0
    focal_alpha: "float | None" = None
    classification_weight: float = 1.0
    localization_weight: float = 1.0
    hard_example_miner: "HardExampleMinerConfig | None" = None


@dataclass(frozen=True)
class BatchNormConfig:
    """`batch_norm` of a `conv_hyperparams` block."""

    decay: float = 0.999
    center: bool = True
    scale: bool = False
    epsilon: float = 0.001
    train: bool = True


@dataclass(frozen=True)
class InitializerConfig:
    """`initializer` of a `conv_hyperparams` block: `kind` is the oneof member's name
    (`truncated_normal_initializer`, `random_normal_initializer`, `variance_scaling_initializer`),
    or "" without one (slim then took `tf.get_variable`'s default, Glorot uniform); the fields of
    the chosen one (`mode` the proto enum name)."""

    kind: str = ""
    mean: float = 0.0
    stddev: float = 1.0
    factor: float = 2.0
    uniform: bool = False
    mode: str = "FAN_IN"


@dataclass(frozen=True)
class HyperparamsConfig:
    """A `conv_hyperparams` block: the L2 regularizer weight (0.0 without a regularizer), batch
    norm, and the initializer of freshly initialised layers."""

    l2_weight: float = 0.0
    regularize_depthwise: bool = False
    batch_norm: "BatchNormConfig | None" = None
    initializer: InitializerConfig = InitializerConfig()


@dataclass(frozen=True)
class LearningRateConfig:
    """`learning_rate`: `kind` is the oneof member's name; `params` its fields as `{name: value}`
    (proto defaults filled in); for `manual_step_learning_rate`, `params["schedule"]` is a tuple of
    (step, learning_rate)."""

    kind: str
    params: tuple  # sorted ((name, value), ...): hashable, so the config stays frozen

    def __getitem__(self, name):
        return dict(self.params)[name]


@dataclass(frozen=True)
class OptimizerConfig:
    """`train_config.optimizer`: `kind` is `rms_prop_optimizer`, `momentum_optimizer` or
    `adam_optimizer`; `momentum`, `decay`, `epsilon` are RMSProp's (momentum also Momentum's)."""

    kind: str
    learning_rate: LearningRateConfig
    momentum: "float | None" = None
    decay: "float | None" = None
    epsilon: "float | None" = None
    use_moving_average: bool = True
    moving_average_decay: float = 0.9999


@dataclass(frozen=True)
class SSDRandomCropOperation:
    """One crop operation: an `ssd_random_crop.operations` entry as written (an unset field is
    0), or a `random_crop_image` step (an unset field its proto default)."""

    min_object_covered: float
    min_aspect_ratio: float
    max_aspect_ratio: float
    min_area: float
    max_area: float
    overlap_thresh: float
    clip_boxes: bool
    random_coef: float


@dataclass(frozen=True)
class AugmentationConfig:
    """One `data_augmentation_options` step: `random_horizontal_flip`, `ssd_random_crop` or
    `random_crop_image`. `operations` is empty for an `ssd_random_crop {}` (the OD API then uses its
    built-in set); a `random_crop_image` has its one operation there (its fields, proto defaults
    filled in)."""

    kind: str
    operations: tuple = ()


@dataclass(frozen=True)
class TrainConfig:
    """`train_config`. `fine_tune_checkpoint_type` is resolved as the TF1 model_lib did when unset:
    `detection` if `from_detection_checkpoint`, else `classification`."""

    batch_size: int = 32
    num_steps: int = 0
    optimizer: "OptimizerConfig | None" = None
    gradient_clipping_by_norm: float = 0.0
    data_augmentation: tuple = ()
    fine_tune_checkpoint: str = ""
    fine_tune_checkpoint_type: str = "classification"
    load_all_detection_checkpoint_vars: bool = False
    add_regularization_loss: bool = True


@dataclass(frozen=True)
class TrainingConfig:
    """Everything a pipeline.config says about training an SSD MobileNet v1 (plain, FPN or PPN).

    `box_coder_scales`, `add_background_class` and `num_classes` come from the inference config
    (`SSDConfig`), which the same file must also give. The feature extractor's `conv_hyperparams`
    govern the layers after MobileNet (the extra layers, FPN's pyramid); the 14 MobileNet layers
    take slim's mobilenet_v1_arg_scope unless `override_base_feature_extractor_hyperparams`. The
    box predictor's (`convolutional_box_predictor` or `weight_shared_convolutional_box_predictor`)
    govern its layers; `class_prediction_bias_init` is the class head's initial bias.
    """

    num_classes: int
    add_background_class: bool
    box_coder_scales: tuple
    matcher: ArgMaxMatcherConfig
    loss: LossConfig
    encode_background_as_zeros: bool = False
    negative_class_weight: float = 1.0
    normalize_loss_by_num_matches: bool = True
    normalize_loc_loss_by_codesize: bool = False
    freeze_batchnorm: bool = False
    inplace_batchnorm_update: bool = False
    feature_extractor_hyperparams: HyperparamsConfig = HyperparamsConfig()
    override_base_feature_extractor_hyperparams: bool = False
    box_predictor_hyperparams: HyperparamsConfig = HyperparamsConfig()
    class_prediction_bias_init: float = 0.0
    train: TrainConfig = TrainConfig()

    @classmethod
    def from_pipeline_config(cls, path_or_text: str) -> "TrainingConfig":
        """Reads a TF1 OD API `pipeline.config` (a file path or its text).

        Raises:
          ConfigError: naming the field and value that cannot be honoured (or the parse error).
        """
        root = parse_pipeline_config(path_or_text)
        inference = PipelineReader(root).config()  # the SSDConfig: refuses what the model cannot build
        return _read_training(root, root.child("model").child("ssd"), inference)


def _read_training(root, ssd, inference: SSDConfig) -> TrainingConfig:
    p = "model.ssd"
    fields = read(ssd, p, SSD)
    fe = ssd.child("feature_extractor")
    fe_fields = read(fe, f"{p}.feature_extractor", FEATURE_EXTRACTOR)
    predictor_path, predictor_hyperparams, bias_init = _box_predictor(ssd.child("box_predictor"),
                                                                      f"{p}.box_predictor")
    return TrainingConfig(
        num_classes=inference.num_classes,
        add_background_class=inference.add_background_class,
        box_coder_scales=inference.box_coder_scales,
        matcher=_matcher(ssd, p),
        loss=_loss(ssd.child("loss"), f"{p}.loss"),
        feature_extractor_hyperparams=_hyperparams(fe.child("conv_hyperparams"),
                                                   f"{p}.feature_extractor.conv_hyperparams"),
        override_base_feature_extractor_hyperparams=fe_fields["override_base_feature_extractor_hyperparams"],
        box_predictor_hyperparams=_hyperparams(predictor_hyperparams, f"{predictor_path}.conv_hyperparams"),
        class_prediction_bias_init=bias_init,
        train=_train(root.child("train_config"), "train_config"),
        **fields)


def _box_predictor(bp, p):
    """(path, conv_hyperparams message, class_prediction_bias_init) of the `box_predictor` oneof."""
    kind, msg = choose(bp, p, BOX_PREDICTOR)
    p = f"{p}.{kind}"
    if kind == "weight_shared_convolutional_box_predictor":
        bias_init = read(msg, p, WEIGHT_SHARED_BOX_PREDICTOR)["class_prediction_bias_init"]
    else:
        # Its inference fields are SSDConfig's; the class head's initial bias, as the OD API's
        # ConvolutionalClassHead takes it.
        bias_init = PipelineReader(None).get(msg, "class_prediction_bias_init", p, float)
    return p, msg.child("conv_hyperparams"), bias_init


def _matcher(ssd, p):
    _, sim = choose(ssd.child("similarity_calculator"), f"{p}.similarity_calculator", SIMILARITY)
    read(sim, f"{p}.similarity_calculator.iou_similarity", IOU_SIMILARITY)
    _, m = choose(ssd.child("matcher"), f"{p}.matcher", MATCHER)
    q = f"{p}.matcher.argmax_matcher"
    v = read(m, q, ARGMAX_MATCHER)
    ignore = v.pop("ignore_thresholds")
    if ignore:  # matcher_builder: no thresholds at all, every column matches its argmax row
        v["matched_threshold"] = v["unmatched_threshold"] = None
    elif v["unmatched_threshold"] > v["matched_threshold"]:
        fail(f"{q}.unmatched_threshold", v["unmatched_threshold"], "must not exceed matched_threshold")
    elif not v["negatives_lower_than_unmatched"] and v["unmatched_threshold"] == v["matched_threshold"]:
        fail(f"{q}.negatives_lower_than_unmatched", "false",
             "needs unmatched_threshold < matched_threshold (ArgMaxMatcher refuses equal ones)")
    return ArgMaxMatcherConfig(**v)


def _loss(loss, p):
    if loss is None:
        fail(p, "(missing)", "training needs model.ssd.loss")
    top = read(loss, p, LOSS)
    loc_kind, loc = choose(loss.child("localization_loss"), f"{p}.localization_loss", LOCALIZATION_LOSS)
    loc_v = read(loc, f"{p}.localization_loss.{loc_kind}",
                 WEIGHTED_SMOOTH_L1 if loc_kind == "weighted_smooth_l1" else WEIGHTED_L2)
    cls_kind, cls = choose(loss.child("classification_loss"), f"{p}.classification_loss", CLASSIFICATION_LOSS)
    cls_spec = {"weighted_sigmoid": WEIGHTED_SIGMOID, "weighted_softmax": WEIGHTED_SOFTMAX,
                "weighted_sigmoid_focal": SIGMOID_FOCAL}[cls_kind]
    cls_v = read(cls, f"{p}.classification_loss.{cls_kind}", cls_spec)
    miner = None
    if loss.child("hard_example_miner") is not None:
        if cls_kind == "weighted_sigmoid_focal":  # losses_builder raises the same
            fail(f"{p}.hard_example_miner", "{...}", "the OD API refuses it with sigmoid focal loss",
                 loss.child("hard_example_miner").line)
        miner = HardExampleMinerConfig(**read(loss.child("hard_example_miner"), f"{p}.hard_example_miner",
                                              HARD_EXAMPLE_MINER))
    return LossConfig(
        localization=loc_kind, smooth_l1_delta=loc_v.get("delta", 1.0),
        classification=cls_kind, softmax_logit_scale=cls_v.get("logit_scale", 1.0),
        focal_gamma=cls_v.get("gamma", 2.0), focal_alpha=cls_v.get("alpha"),
        classification_weight=top["classification_weight"], localization_weight=top["localization_weight"],
        hard_example_miner=miner)


def _hyperparams(hp, p):
    v = read(hp, p, HYPERPARAMS)
    regularizer = hp.child("regularizer") if hp is not None else None
    _, l2 = choose(regularizer, f"{p}.regularizer", REGULARIZER, required=False)
    weight = read(l2, f"{p}.regularizer.l2_regularizer", L2_REGULARIZER)["weight"] if l2 is not None else 0.0
    bn = hp.child("batch_norm") if hp is not None else None
    batch_norm = BatchNormConfig(**read(bn, f"{p}.batch_norm", BATCH_NORM)) if bn is not None else None
    return HyperparamsConfig(l2_weight=weight, regularize_depthwise=v["regularize_depthwise"], batch_norm=batch_norm,
                             initializer=_initializer(hp.child("initializer") if hp is not None else None,
                                                      f"{p}.initializer"))


def _initializer(init, p):
    kind, msg = choose(init, p, INITIALIZER, required=False)
    if kind is None:
        return InitializerConfig()
    spec = {"truncated_normal_initializer": TRUNCATED_NORMAL, "random_normal_initializer": RANDOM_NORMAL,
            "variance_scaling_initializer": VARIANCE_SCALING}[kind]
    return InitializerConfig(kind, **read(msg, f"{p}.{kind}", spec))


def _learning_rate(lr, p):
    kind, msg = choose(lr, p, LEARNING_RATE)
    spec = {"constant_learning_rate": CONSTANT_LR, "exponential_decay_learning_rate": EXPONENTIAL_DECAY_LR,
            "manual_step_learning_rate": MANUAL_STEP_LR, "cosine_decay_learning_rate": COSINE_DECAY_LR}[kind]
    params = read(msg, f"{p}.{kind}", spec)
    if kind == "manual_step_learning_rate":
        steps = [read(s, f"{p}.{kind}.schedule", MANUAL_STEP) for s in msg.get("schedule", [])]
        params["schedule"] = tuple((s["step"], s["learning_rate"]) for s in steps)
        if not steps:
            fail(f"{p}.{kind}.schedule", "(missing)", "the OD API refuses an empty schedule", msg.line)
    if kind == "cosine_decay_learning_rate":
        # learning_schedules.cosine_decay_with_warmup's own checks, here so that they name the
        # field (the proto's defaults: warmup_steps 10000 outruns a short total_steps).
        for field, floor in (("total_steps", "warmup_steps"), ("learning_rate_base", "warmup_learning_rate")):
            if params[field] < params[floor]:
                default = "" if floor in msg else ", the proto's default"
                fail(f"{p}.{kind}.{field}", _written(msg, field, params[field]),
                     f"must be at least {floor} ({_written(msg, floor, params[floor])}{default})", _line(msg, field))
    return LearningRateConfig(kind, tuple(sorted(params.items())))


def _line(msg, name) -> "int | None":
    """The line of field `name` in `msg`, else the message's own."""
    return getattr(msg.scalar(name), "line", 0) or msg.line


def _written(msg, name, value) -> str:
    """Field `name` of `msg` as the file spells it (a float32 field's value would print as
    9.999999747378752e-05 for 0.0001), or `value` (a proto default) as `%g`."""
    scalar = msg.scalar(name)
    return getattr(scalar, "text", None) or f"{value:g}"


def _optimizer(opt, p):
    top = read(opt, p, OPTIMIZER)
    kind, msg = choose(opt, p, OPTIMIZER)
    spec = {"rms_prop_optimizer": RMS_PROP, "momentum_optimizer": MOMENTUM, "adam_optimizer": ADAM}[kind]
    v = read(msg, f"{p}.{kind}", spec)
    if msg.child("learning_rate") is None:
        fail(f"{p}.{kind}.learning_rate", "(missing)", "the optimizer needs a learning rate")
    return OptimizerConfig(
        kind=kind, learning_rate=_learning_rate(msg.child("learning_rate"), f"{p}.{kind}.learning_rate"),
        momentum=v.get("momentum_optimizer_value"), decay=v.get("decay"), epsilon=v.get("epsilon"), **top)


def _augmentation(step, p):
    names = [n for n in step if isinstance(step[n][-1], pipeline_text.TextMessage)]
    if len(names) != 1:
        fail(p, ", ".join(names) or "(empty)", "each data_augmentation_options holds one step")
    name = names[0]
    if name not in _AUGMENTATIONS:
        fail(f"{p}.{name}", "{...}", f"not supported (only {', '.join(_AUGMENTATIONS)})", step.child(name).line)
    msg = step.child(name)
    if name == "random_horizontal_flip":
        read(msg, f"{p}.{name}", RANDOM_HORIZONTAL_FLIP)
        return AugmentationConfig(name)
    if name == "random_crop_image":
        return AugmentationConfig(name, (SSDRandomCropOperation(**read(msg, f"{p}.{name}", RANDOM_CROP_IMAGE)),))
    read(msg, f"{p}.{name}", SSD_RANDOM_CROP)
    ops = tuple(SSDRandomCropOperation(**read(o, f"{p}.{name}.operations", SSD_RANDOM_CROP_OPERATION))
                for o in msg.get("operations", []))
    return AugmentationConfig(name, ops)


def _train(train, p):
    if train is None:
        fail(p, "(missing)", "training needs train_config")
    v = read(train, p, TRAIN)
    if train.child("optimizer") is None:
        fail(f"{p}.optimizer", "(missing)", "training needs an optimizer")
    from_detection = v.pop("from_detection_checkpoint")
    # model_lib (TF 1.13): an unset type falls back on the deprecated from_detection_checkpoint.
    v["fine_tune_checkpoint_type"] = v["fine_tune_checkpoint_type"] or (
        "detection" if from_detection else "classification")
    return TrainConfig(
        optimizer=_optimizer(train.child("optimizer"), f"{p}.optimizer"),
        data_augmentation=tuple(_augmentation(s, f"{p}.data_augmentation_options")
                                for s in train.get("data_augmentation_options", [])),
        **v)
