"""Training the converted model in TF2 as the TF1 Object Detection API trained it: targets,
losses, optimisers and schedules, data and augmentation (one module each)."""
