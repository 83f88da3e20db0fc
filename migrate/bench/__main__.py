"""The latency worker: `python -m migrate.bench REQUEST.json RESULT.json` (started by `bench`)."""

import sys

if __name__ == "__main__":
    from migrate.common import console
    console.quiet_worker()  # started by a command without --verbose: no TensorFlow notices in the stderr tail
    from migrate.bench.workers import _latency_worker
    _latency_worker(*sys.argv[1:3])
