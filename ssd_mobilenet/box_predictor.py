"""The names this module has always had: the ConvolutionalBoxPredictor now lives in
`ssd_mobilenet.box_predictors.convolutional`, beside the weight-shared one.

`build_box_predictors` follows the config's `box_predictor_type`.
"""

from ssd_mobilenet.box_predictors import build_box_predictors
from ssd_mobilenet.box_predictors.convolutional import BOX_CODE_SIZE, MERGED_CHANNEL_MULTIPLE, MERGED_HEADS, BoxPredictor

__all__ = ["BOX_CODE_SIZE", "MERGED_CHANNEL_MULTIPLE", "MERGED_HEADS", "BoxPredictor", "build_box_predictors"]
