"""The architecture's type names: which feature extractor, box predictor and anchor generator a
config builds (`SSDConfig.feature_extractor_type`, `.box_predictor_type`, `.anchor_generator_type`).

A leaf module (it imports nothing) so that the packages that implement the parts
(`ssd_mobilenet.feature_extractors`, `.box_predictors`, `.anchor_generators`) key their modules by
these names while `ssd_config`, whose validation counts the anchors, imports `anchor_generators`.
"""

# The architecture, chosen as the OD API's builders choose it: `model_builder` picks the feature
# extractor class by `feature_extractor.type`, `box_predictor_builder` the predictor by the
# box_predictor oneof, `anchor_generator_builder` the generator by its oneof. Each name is a module of
# `ssd_mobilenet.feature_extractors`, `.box_predictors` and `.anchor_generators`.
SSD_MOBILENET_V1 = "ssd_mobilenet_v1"
SSD_MOBILENET_V1_FPN = "ssd_mobilenet_v1_fpn"
SSD_MOBILENET_V1_PPN = "ssd_mobilenet_v1_ppn"
FEATURE_EXTRACTORS = (SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN)
# `feature_extractor.type` values read as one of those: the OD API's Keras (TF2) builds of the same
# networks, which a pipeline.config names when written for TF2.
FEATURE_EXTRACTOR_ALIASES = {"ssd_mobilenet_v1_keras": SSD_MOBILENET_V1,
                             "ssd_mobilenet_v1_fpn_keras": SSD_MOBILENET_V1_FPN}
CONVOLUTIONAL = "convolutional_box_predictor"
WEIGHT_SHARED = "weight_shared_convolutional_box_predictor"
BOX_PREDICTORS = (CONVOLUTIONAL, WEIGHT_SHARED)
SSD_ANCHORS = "ssd_anchor_generator"
MULTISCALE_ANCHORS = "multiscale_anchor_generator"
ANCHOR_GENERATORS = (SSD_ANCHORS, MULTISCALE_ANCHORS)
