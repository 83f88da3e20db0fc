"""The parts of `migrate.bench`: `inputs`, `sides` (the runners measured), `interleaving` (latency
in one process), `workers` (the processes bench starts), `statistics` (ratios and intervals),
`tables` and `notes` (console table, JSON, docs/benchmarks.md) and `plot`; and what the figure
scripts under scripts/ share, `publish` (docs/ only when asked) among them."""
