"""The SavedModel: `writer` (`export_saved_model`: the fast or exact variant, `VARIANTS`) and
`runner` (`SavedModelDetector`, which `ssd_mobilenet.load` returns when a converted directory's
SavedModel computes what was asked for). Both need TensorFlow.
"""
