#!/usr/bin/env bash
# Installs Debian's `chromium` and `chromium-driver` (WebDriver) for the browser tests (report rendering, XSS
# check, screenshots, the leaderboard site contract) and prints the path of chromium. Safe to run again: it does
# nothing when both are there. Exits non-zero when they cannot be installed (e.g. without root or network); the
# browser tests then skip with a message locally and fail under CI=true.
set -euo pipefail
find_chromium() {
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
if bin="$(find_chromium)" && command -v chromedriver >/dev/null 2>&1; then echo "$bin"; exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed and apt-get is not available; install Debian's chromium by hand" >&2; exit 1
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "chromium: not installed, and installing it needs root (apt-get install chromium)" >&2; exit 1
  fi
fi
echo "chromium: installing Debian's chromium and chromium-driver with apt-get (once)" >&2
apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get "${apt_opts[@]}" update >&2 || true
"${as_root[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends chromium chromium-driver fonts-dejavu-core >&2
find_chromium
