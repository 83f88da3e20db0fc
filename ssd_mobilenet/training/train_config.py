"""What a TF1 `pipeline.config` says about training an SSD MobileNet v1, as frozen dataclasses.

`TrainingConfig.from_pipeline_config(path_or_text)` reads the training fields of `model.ssd`
(matcher, similarity calculator, losses, hard example miner, normalisation, regularizers, batch
norm) and `train_config` (batch size, steps, optimizer and learning-rate schedule, moving averages,
gradient clipping, augmentation, fine-tune checkpoint type). Each message is read through a table
(`proto_table.Message`) listing every field the TF1-era proto declares with its proto default;
the defaults are those of tensorflow/models research/object_detection/protos at commit 9bf1fd02
(2019-02-21, TF 1.13 era). Unknown fields and options this toolkit does not reproduce raise
`ConfigError` naming the dotted field path.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssd_mobilenet import pipeline_text
from ssd_mobilenet.config import SSD_MOBILENET_V1, ConfigError, SSDConfig, _PipelineReader, parse_pipeline_config
from ssd_mobilenet.training.proto_table import (DEFAULT_ONLY, IGNORED, MESSAGE, REFUSED, Field, Message,
                                                choose, fail, read)

_INPUT = "about the TF1 input pipeline, not the numerics"
_DIST = "about TF1 distributed training (replicas, queues)"

# ---- tables: one per proto message --------------------------------------------------------

# protos/argmax_matcher.proto (ArgMaxMatcher)
ARGMAX_MATCHER = Message("protos/argmax_matcher.proto", (
    Field("matched_threshold", float, 0.5),
    Field("unmatched_threshold", float, 0.5),
    Field("ignore_thresholds", bool, False),
    Field("negatives_lower_than_unmatched", bool, True),
    Field("force_match_for_each_row", bool, False),
    # A gather by one-hot matmul (for TPUs) selects the same values as tf.gather.
    Field("use_matmul_gather", bool, False),
))
# protos/matcher.proto (Matcher: oneof)
MATCHER = Message("protos/matcher.proto", (
    Field("argmax_matcher", MESSAGE),
    Field("bipartite_matcher", MESSAGE, use=REFUSED, why="only argmax_matcher is supported"),
))
# protos/region_similarity_calculator.proto (RegionSimilarityCalculator: oneof)
SIMILARITY = Message("protos/region_similarity_calculator.proto", (
    Field("iou_similarity", MESSAGE),
    Field("neg_sq_dist_similarity", MESSAGE, use=REFUSED, why="only iou_similarity is supported"),
    Field("ioa_similarity", MESSAGE, use=REFUSED, why="only iou_similarity is supported"),
    Field("thresholded_iou_similarity", MESSAGE, use=REFUSED, why="only iou_similarity is supported"),
))
_ANCHORWISE = Field("anchorwise_output", bool, False, IGNORED,
                    "deprecated: since 2018 the OD API's losses are always per anchor")
# protos/losses.proto (LocalizationLoss oneof and its members)
LOCALIZATION_LOSS = Message("protos/losses.proto", (
    Field("weighted_l2", MESSAGE),
    Field("weighted_smooth_l1", MESSAGE),
    Field("weighted_iou", MESSAGE, use=REFUSED, why="SSD MobileNet v1 trains with smooth L1 or L2"),
))
WEIGHTED_L2 = Message("protos/losses.proto", (_ANCHORWISE,))
WEIGHTED_SMOOTH_L1 = Message("protos/losses.proto", (_ANCHORWISE, Field("delta", float, 1.0)))
# protos/losses.proto (ClassificationLoss oneof and its members)
CLASSIFICATION_LOSS = Message("protos/losses.proto", (
    Field("weighted_sigmoid", MESSAGE),
    Field("weighted_softmax", MESSAGE),
    Field("weighted_sigmoid_focal", MESSAGE),
    Field("weighted_logits_softmax", MESSAGE, use=REFUSED, why="distillation against logits is not supported"),
    Field("bootstrapped_sigmoid", MESSAGE, use=REFUSED, why="bootstrapped sigmoid is not supported"),
))
WEIGHTED_SIGMOID = Message("protos/losses.proto", (_ANCHORWISE,))
WEIGHTED_SOFTMAX = Message("protos/losses.proto", (_ANCHORWISE, Field("logit_scale", float, 1.0)))
# `alpha` has no proto default: unset means no alpha weighting (the builder passes None).
SIGMOID_FOCAL = Message("protos/losses.proto", (
    _ANCHORWISE, Field("gamma", float, 2.0), Field("alpha", float, None)))
# protos/losses.proto (HardExampleMiner)
HARD_EXAMPLE_MINER = Message("protos/losses.proto", (
    Field("num_hard_examples", int, 64),
    Field("iou_threshold", float, 0.7),
    Field("loss_type", ("BOTH", "CLASSIFICATION", "LOCALIZATION"), "BOTH"),
    Field("max_negatives_per_positive", int, 0),
    Field("min_negatives_per_image", int, 0),
))
# protos/losses.proto (Loss)
LOSS = Message("protos/losses.proto", (
    Field("localization_loss", MESSAGE),
    Field("classification_loss", MESSAGE),
    Field("hard_example_miner", MESSAGE),
    Field("classification_weight", float, 1.0),
    Field("localization_weight", float, 1.0),
    Field("random_example_sampler", MESSAGE, use=REFUSED, why="random example sampling is not supported"),
    Field("equalization_loss", MESSAGE, use=REFUSED, why="equalization loss is not supported"),
    Field("expected_loss_weights", ("NONE", "EXPECTED_SAMPLING", "REWEIGHTING_UNMATCHED_ANCHORS"), "NONE",
          DEFAULT_ONLY, "expected-sampling loss weights are not supported"),
    Field("min_num_negative_samples", float, 0.0, IGNORED, "only used with expected_loss_weights"),
    Field("desired_negative_sampling_ratio", float, 3.0, IGNORED, "only used with expected_loss_weights"),
))
# protos/hyperparams.proto (BatchNorm)
BATCH_NORM = Message("protos/hyperparams.proto", (
    Field("decay", float, 0.999),
    Field("center", bool, True),
    Field("scale", bool, False),
    Field("epsilon", float, 0.001),
    Field("train", bool, True),
))
# protos/hyperparams.proto (Regularizer oneof; L2Regularizer)
REGULARIZER = Message("protos/hyperparams.proto", (
    Field("l2_regularizer", MESSAGE),
    Field("l1_regularizer", MESSAGE, use=REFUSED, why="only l2_regularizer is supported"),
))
L2_REGULARIZER = Message("protos/hyperparams.proto", (Field("weight", float, 1.0),))
# protos/hyperparams.proto (Hyperparams)
HYPERPARAMS = Message("protos/hyperparams.proto", (
    Field("op", ("CONV", "FC"), "CONV", DEFAULT_ONLY, "SSD layers are convolutions"),
    Field("regularizer", MESSAGE),
    # Initial values do not matter when training continues from a converted checkpoint.
    Field("initializer", MESSAGE, use=IGNORED),
    # The inference config (SSDConfig) checks the activation.
    Field("activation", ("NONE", "RELU", "RELU_6"), "RELU", IGNORED, "checked by SSDConfig"),
    Field("batch_norm", MESSAGE),
    Field("group_norm", MESSAGE, use=REFUSED, why="group norm is not supported"),
    Field("regularize_depthwise", bool, False),
))
# protos/optimizer.proto (LearningRate oneof and its members)
LEARNING_RATE = Message("protos/optimizer.proto", (
    Field("constant_learning_rate", MESSAGE),
    Field("exponential_decay_learning_rate", MESSAGE),
    Field("manual_step_learning_rate", MESSAGE),
    Field("cosine_decay_learning_rate", MESSAGE),
))
CONSTANT_LR = Message("protos/optimizer.proto", (Field("learning_rate", float, 0.002),))
EXPONENTIAL_DECAY_LR = Message("protos/optimizer.proto", (
    Field("initial_learning_rate", float, 0.002),
    Field("decay_steps", int, 4000000),
    Field("decay_factor", float, 0.95),
    Field("staircase", bool, True),
    Field("burnin_learning_rate", float, 0.0),
    Field("burnin_steps", int, 0),
    Field("min_learning_rate", float, 0.0),
))
MANUAL_STEP_LR = Message("protos/optimizer.proto", (
    Field("initial_learning_rate", float, 0.002),
    Field("schedule", MESSAGE),
    Field("warmup", bool, False),
))
MANUAL_STEP = Message("protos/optimizer.proto", (Field("step", int, 0), Field("learning_rate", float, 0.002)))
COSINE_DECAY_LR = Message("protos/optimizer.proto", (
    Field("learning_rate_base", float, 0.002),
    Field("total_steps", int, 4000000),
    Field("warmup_learning_rate", float, 0.0002),
    Field("warmup_steps", int, 10000),
    Field("hold_base_rate_steps", int, 0),
))
# protos/optimizer.proto (Optimizer oneof, RMSPropOptimizer, MomentumOptimizer, AdamOptimizer)
OPTIMIZER = Message("protos/optimizer.proto", (
    Field("rms_prop_optimizer", MESSAGE),
    Field("momentum_optimizer", MESSAGE),
    Field("adam_optimizer", MESSAGE),
    Field("use_moving_average", bool, True),
    Field("moving_average_decay", float, 0.9999),
))
RMS_PROP = Message("protos/optimizer.proto", (
    Field("learning_rate", MESSAGE),
    Field("momentum_optimizer_value", float, 0.9),
    Field("decay", float, 0.9),
    Field("epsilon", float, 1.0),
))
MOMENTUM = Message("protos/optimizer.proto", (
    Field("learning_rate", MESSAGE), Field("momentum_optimizer_value", float, 0.9)))
ADAM = Message("protos/optimizer.proto", (Field("learning_rate", MESSAGE),))
# protos/preprocessor.proto (PreprocessingStep oneof: the two the SSD MobileNet configs use)
_AUGMENTATIONS = ("random_horizontal_flip", "ssd_random_crop")
RANDOM_HORIZONTAL_FLIP = Message("protos/preprocessor.proto", (
    Field("keypoint_flip_permutation", int, use=DEFAULT_ONLY, default=(), repeated=True,
          why="there are no keypoints"),
))
SSD_RANDOM_CROP = Message("protos/preprocessor.proto", (Field("operations", MESSAGE),))
# No proto defaults here: the OD API reads every field of an operation as written (unset is 0).
SSD_RANDOM_CROP_OPERATION = Message("protos/preprocessor.proto", (
    Field("min_object_covered", float, 0.0),
    Field("min_aspect_ratio", float, 0.0),
    Field("max_aspect_ratio", float, 0.0),
    Field("min_area", float, 0.0),
    Field("max_area", float, 0.0),
    Field("overlap_thresh", float, 0.0),
    Field("clip_boxes", bool, True),
    Field("random_coef", float, 0.0),
))
# protos/train.proto (TrainConfig)
TRAIN = Message("protos/train.proto", (
    Field("batch_size", int, 32),
    Field("data_augmentation_options", MESSAGE),
    Field("sync_replicas", bool, False, IGNORED, _DIST),
    Field("keep_checkpoint_every_n_hours", float, 10000.0, IGNORED, "checkpoint retention, not numerics"),
    Field("optimizer", MESSAGE),
    Field("gradient_clipping_by_norm", float, 0.0),
    Field("fine_tune_checkpoint", str, ""),
    Field("fine_tune_checkpoint_type", str, ""),
    Field("from_detection_checkpoint", bool, False),
    Field("load_all_detection_checkpoint_vars", bool, False),
    Field("num_steps", int, 0),
    Field("startup_delay_steps", float, 15.0, IGNORED, _DIST),
    Field("bias_grad_multiplier", float, 0.0, DEFAULT_ONLY, "bias gradient multipliers are not supported"),
    Field("update_trainable_variables", str, (), DEFAULT_ONLY, "variable selection is not supported", True),
    Field("freeze_variables", str, (), DEFAULT_ONLY, "variable freezing is not supported", True),
    Field("replicas_to_aggregate", int, 1, IGNORED, _DIST),
    Field("batch_queue_capacity", int, 150, IGNORED, _INPUT),
    Field("num_batch_queue_threads", int, 8, IGNORED, _INPUT),
    Field("prefetch_queue_capacity", int, 5, IGNORED, _INPUT),
    Field("merge_multiple_label_boxes", bool, False, DEFAULT_ONLY, "multi-label boxes are not supported"),
    Field("use_multiclass_scores", bool, False, DEFAULT_ONLY, "multiclass score targets are not supported"),
    Field("add_regularization_loss", bool, True),
    Field("max_number_of_boxes", int, 100, IGNORED, _INPUT),
    Field("unpad_groundtruth_tensors", bool, True, IGNORED, _INPUT),
    Field("retain_original_images", bool, False, IGNORED, _INPUT),
    Field("use_bfloat16", bool, False, DEFAULT_ONLY, "bfloat16 training is not supported"),
    Field("summarize_gradients", bool, False, IGNORED, "TensorBoard summaries, not numerics"),
))
# protos/ssd.proto (Ssd): the training fields; the inference ones are SSDConfig's.
SSD = Message("protos/ssd.proto", (
    Field("num_classes", int, use=IGNORED), Field("image_resizer", MESSAGE), Field("feature_extractor", MESSAGE),
    Field("box_coder", MESSAGE), Field("matcher", MESSAGE), Field("similarity_calculator", MESSAGE),
    Field("encode_background_as_zeros", bool, False),
    Field("negative_class_weight", float, 1.0),
    Field("box_predictor", MESSAGE), Field("anchor_generator", MESSAGE), Field("post_processing", MESSAGE),
    Field("normalize_loss_by_num_matches", bool, True),
    Field("normalize_loc_loss_by_codesize", bool, False),
    Field("loss", MESSAGE),
    Field("freeze_batchnorm", bool, False),
    Field("inplace_batchnorm_update", bool, False),
    Field("add_background_class", bool, True, IGNORED, "read by SSDConfig"),
    Field("explicit_background_class", bool, False, DEFAULT_ONLY, "an explicit background class is not supported"),
    Field("use_confidences_as_targets", bool, False, DEFAULT_ONLY, "confidence targets are not supported"),
    Field("implicit_example_weight", float, 1.0, IGNORED, "only used with use_confidences_as_targets"),
    Field("mask_head_config", MESSAGE, use=REFUSED, why="SSD MobileNet v1 has no mask head"),
))
# protos/ssd.proto (SsdFeatureExtractor): the inference fields are SSDConfig's.
FEATURE_EXTRACTOR = Message("protos/ssd.proto", (
    Field("type", str, use=IGNORED), Field("depth_multiplier", float, use=IGNORED),
    Field("min_depth", int, use=IGNORED), Field("conv_hyperparams", MESSAGE),
    Field("override_base_feature_extractor_hyperparams", bool, False),
    Field("pad_to_multiple", int, use=IGNORED), Field("use_explicit_padding", bool, use=IGNORED),
    Field("use_depthwise", bool, use=IGNORED), Field("fpn", MESSAGE),
))


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
class HyperparamsConfig:
    """A `conv_hyperparams` block: the L2 regularizer weight (0.0 without a regularizer) and batch norm."""

    l2_weight: float = 0.0
    regularize_depthwise: bool = False
    batch_norm: "BatchNormConfig | None" = None


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
    """One `ssd_random_crop.operations` entry, as written."""

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
    """One `data_augmentation_options` step: `random_horizontal_flip` or `ssd_random_crop`.
    `operations` is empty for an `ssd_random_crop {}` (the OD API then uses its built-in set)."""

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
    """Everything a pipeline.config says about training an SSD MobileNet v1.

    `box_coder_scales`, `add_background_class` and `num_classes` come from the inference config
    (`SSDConfig`), which the same file must also give. The feature extractor's `conv_hyperparams`
    govern the extra layers; the 14 MobileNet layers take slim's mobilenet_v1_arg_scope unless
    `override_base_feature_extractor_hyperparams`.
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
    train: TrainConfig = TrainConfig()

    @classmethod
    def from_pipeline_config(cls, path_or_text: str) -> "TrainingConfig":
        """Reads a TF1 OD API `pipeline.config` (a file path or its text).

        Raises:
          ConfigError: naming the field and value that cannot be honoured (or the parse error).
        """
        root = parse_pipeline_config(path_or_text)
        inference = _PipelineReader(root).config()  # the SSDConfig: refuses what the model cannot build
        if inference.feature_extractor_type != SSD_MOBILENET_V1:
            # FPN and PPN convert; their training fields (focal loss without a miner, the
            # weight-shared predictor's hyperparams) are not read yet.
            raise ConfigError(f"model.ssd.feature_extractor.type: {inference.feature_extractor_type} — training "
                              f"supports {SSD_MOBILENET_V1} only")
        return _read_training(root, root.child("model").child("ssd"), inference)


def _read_training(root, ssd, inference: SSDConfig) -> TrainingConfig:
    p = "model.ssd"
    fields = read(ssd, p, SSD)
    fe = ssd.child("feature_extractor")
    fe_fields = read(fe, f"{p}.feature_extractor", FEATURE_EXTRACTOR)
    box_predictor = ssd.child("box_predictor").child("convolutional_box_predictor")
    return TrainingConfig(
        num_classes=inference.num_classes,
        add_background_class=inference.add_background_class,
        box_coder_scales=inference.box_coder_scales,
        matcher=_matcher(ssd, p),
        loss=_loss(ssd.child("loss"), f"{p}.loss"),
        feature_extractor_hyperparams=_hyperparams(fe.child("conv_hyperparams"),
                                                   f"{p}.feature_extractor.conv_hyperparams"),
        override_base_feature_extractor_hyperparams=fe_fields["override_base_feature_extractor_hyperparams"],
        box_predictor_hyperparams=_hyperparams(box_predictor.child("conv_hyperparams"),
                                               f"{p}.box_predictor.convolutional_box_predictor.conv_hyperparams"),
        train=_train(root.child("train_config"), "train_config"),
        **fields)


def _matcher(ssd, p):
    _, sim = choose(ssd.child("similarity_calculator"), f"{p}.similarity_calculator", SIMILARITY)
    read(sim, f"{p}.similarity_calculator.iou_similarity", Message(SIMILARITY.proto, ()))
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
            fail(f"{p}.hard_example_miner", "{...}", "the OD API refuses hard example mining with sigmoid focal loss")
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
    return HyperparamsConfig(l2_weight=weight, regularize_depthwise=v["regularize_depthwise"], batch_norm=batch_norm)


def _learning_rate(lr, p):
    kind, msg = choose(lr, p, LEARNING_RATE)
    spec = {"constant_learning_rate": CONSTANT_LR, "exponential_decay_learning_rate": EXPONENTIAL_DECAY_LR,
            "manual_step_learning_rate": MANUAL_STEP_LR, "cosine_decay_learning_rate": COSINE_DECAY_LR}[kind]
    params = read(msg, f"{p}.{kind}", spec)
    if kind == "manual_step_learning_rate":
        steps = [read(s, f"{p}.{kind}.schedule", MANUAL_STEP) for s in msg.get("schedule", [])]
        params["schedule"] = tuple((s["step"], s["learning_rate"]) for s in steps)
    return LearningRateConfig(kind, tuple(sorted(params.items())))


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
        fail(f"{p}.{name}", "{...}", f"not supported (supported: {', '.join(_AUGMENTATIONS)})")
    msg = step.child(name)
    if name == "random_horizontal_flip":
        read(msg, f"{p}.{name}", RANDOM_HORIZONTAL_FLIP)
        return AugmentationConfig(name)
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
