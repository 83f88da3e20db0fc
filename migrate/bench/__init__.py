"""`bench`'s room: latency and memory of the TF1 graph vs the converted model, side by side.

`benchmark` (the run, `bench(...) -> report`) and its parts: `inputs` (sizes, batches, the TF1
side's graph, the file sides), `sides` (the runners measured), `interleaving` (latency in one
process), `workers` (the processes bench starts; `__main__` is the latency worker, `python -m
migrate.bench`), `statistics` (ratios and intervals), `tables` and `notes` (console table, JSON,
docs/benchmarks.md), `plot`, `cold_start`, `litert_memory`, `kernels`; and what the figure
scripts under scripts/ share: `publish` (docs/ only when asked), `zoo_models`, `cold_memory`,
`photo_memory`, `web` and `browser`.
"""
