"""The model's configuration: the `SSDConfig` dataclass and the TF1 `pipeline.config` it is read from.

- `ssd_config`: `SSDConfig` (every hyper-parameter of the inference graph), its validation
  (`ConfigError`), `float_text`/`f32` and the value names of its fields
  (NMS variant, background slice, score converters, resize methods).
- `type_names`: the architecture's type names (feature extractors, box predictors, anchor
  generators), a leaf module the parts' packages import.
- `pipeline_reader`: `read_pipeline_config(path_or_text) -> SSDConfig`, `parse_pipeline_config`
  (the checked tree) and `PipelineReader` (the field reading the training config shares).
- `pipeline_writer`: `to_pipeline_config(config)`, the inference part of a pipeline.config.
- `pipeline_text`: the schema-free protobuf text format parser (`TextMessage`, `Scalar`).
- `pipeline_messages`: the OD API's messages, field by field (names, kinds, defaults).
- `pipeline_schema`: checks a parsed config against `pipeline_messages` before anything reads it.

None of them loads TensorFlow.
"""
