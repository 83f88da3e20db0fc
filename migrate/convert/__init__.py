"""`convert`'s room: a TF1 source -> a native TF2 model directory.

`conversion` (the run: sources read, weights assigned, the check against the TF1 graph, the
artifacts written to a temporary directory and renamed into place, `conversion_report.json`)
and `default_model` (the built-in TF1 model, built on first use for a command without a
source). What reads and runs TF1 is `migrate.tf1`'s.
"""
