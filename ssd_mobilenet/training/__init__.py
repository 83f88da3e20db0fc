"""Training the converted model in TF2 as the TF1 Object Detection API trained it, one module
per part: what a `pipeline.config` says about training (`train_config`), target assignment
(`targets`), the losses (`losses`), hard example mining (`hard_example_miner`), the loss of one
batch as `SSDMetaArch.loss` composed it (`ssd_loss`), TF1's optimisers (`optimizers`),
learning-rate schedules (`schedules`) and moving averages (`moving_average`), the OD API's
TFRecords as `tf.data` batches (`data`, `tf_example`), their augmentation (`augmentation`), a
generated demo dataset (`shapes_dataset`), what a config builds for training (`builders`: optimiser,
schedule, moving average, L2 regularisation, batch-norm decays) and the training loop with
checkpoints and resume (`trainer`). Behaviour is that
of tensorflow/models at commit 9bf1fd02 (2019-02-21, the TF 1.13 era); where earlier releases
differ, the module says so.
"""

from ssd_mobilenet.training.train_config import TrainingConfig

__all__ = ["TrainingConfig"]
