#!/usr/bin/env bash
# Creates .venv (once) and installs the project with TensorFlow (CPU build) and test tools.
# SSD_MIGRATE_TF_EXTRA=gpu installs TensorFlow with CUDA instead; SSD_MIGRATE_EXTRAS=beam,... adds extras.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
log=$(mktemp)
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[${SSD_MIGRATE_TF_EXTRA:-cpu},dev${SSD_MIGRATE_EXTRAS:+,$SSD_MIGRATE_EXTRAS}]" >"$log" 2>&1; then
  grep -v "is ignored: it is neither a file nor a directory" "$log" >&2
  echo "setup_env: pip install failed" >&2
  exit 1
fi
rm -f "$log"
.venv/bin/python -c "import tensorflow as tf, ssd_mobilenet; print('tensorflow', tf.__version__, '| ssd_mobilenet', ssd_mobilenet.__version__)" 2>&1 | tail -1
