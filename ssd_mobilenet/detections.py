"""The names of a detector's outputs, as the TF1 Object Detection API's exporter named them.

Every form of the model (the Keras model, the SavedModel, the `.tflite` and `.onnx` files, the TF1
graph itself) returns `DETECTION_OUTPUTS`; for a batch of N images and D = `max_total_detections`:

    detection_boxes     float32 [N, D, 4]  [ymin, xmin, ymax, xmax], normalised to the image, clipped
    detection_scores    float32 [N, D]     in descending order
    detection_classes   float32 [N, D]     the label map's ids (1-based)
    num_detections      float32 [N]        the rows of each image that are detections; zeros after

The Keras model and its SavedModel also return `RAW_OUTPUTS`, as the OD API's exporter did (A anchors,
S class slots with background): `raw_detection_boxes` [N, A, 4] decoded, unclipped;
`raw_detection_scores` [N, A, S]; `detection_multiclass_scores` [N, D, S];
`detection_anchor_indices` [N, D]. No TensorFlow here: the files' runners read these names too.
"""

DETECTION_OUTPUTS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections")
RAW_OUTPUTS = ("raw_detection_boxes", "raw_detection_scores", "detection_multiclass_scores",
               "detection_anchor_indices")
ALL_OUTPUTS = DETECTION_OUTPUTS + RAW_OUTPUTS
