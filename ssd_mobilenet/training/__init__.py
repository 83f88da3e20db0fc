"""Training numerics of the TF1 Object Detection API's SSD, in TF2.

What a `pipeline.config` says about training (`train_config`), target assignment (`targets`), the
losses (`losses`), hard example mining (`hard_example_miner`) and the loss of one batch as
`SSDMetaArch.loss` composed it (`ssd_loss`). Behaviour is that of tensorflow/models at commit
9bf1fd02 (2019-02-21, the TF 1.13 era); where earlier releases differ, the module says so.
"""

from ssd_mobilenet.training.train_config import TrainingConfig

__all__ = ["TrainingConfig"]
