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
# The web page's browser runtime (`export --web`): LiteRT.js and libjpeg-turbo from npm, the
# versions migrate/export/web_page/package-lock.json pins (no install scripts: the files are copied as npm
# ships them). The same line as export --web prints where the runtime is missing.
if ! command -v npm >/dev/null; then
  echo "setup_env: warning: npm not found (Debian: apt-get install nodejs npm): export --web and its tests need it" >&2
elif ! npm ci --ignore-scripts --prefix migrate/export/web_page --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup_env: npm ci in migrate/export/web_page/ failed" >&2
  exit 1
fi
rm -f "$log"
# The browser the web page's tests and bench's browser sides drive: Debian's chromium (Playwright's own
# browser download is not used). Installed when missing and this runs as root (as CI does).
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1; then
      tail -20 "$log" >&2
      echo "setup_env: apt-get install chromium failed" >&2
      exit 1
    fi
    rm -f "$log"
  else
    echo "setup_env: warning: no Chromium at ${CHROMIUM:-/usr/bin/chromium} (Debian: apt-get install chromium, or" \
         "set CHROMIUM): the web page's tests and bench's browser sides need it" >&2
  fi
fi
.venv/bin/python -c "import tensorflow as tf, ssd_mobilenet; print('tensorflow', tf.__version__, '| ssd_mobilenet', ssd_mobilenet.__version__)" 2>&1 | tail -1
