#!/usr/bin/env bash
# Installs Debian's `mricron-data` (a real single-subject T1 brain, ch2.nii.gz, and atlases) for the imaging
# tests, and prints its templates folder. Safe to run again. Exits non-zero when it cannot be installed (no root
# or no network); those tests then skip with a message locally and fail under CI=true.
set -euo pipefail
dir=/usr/share/mricron/templates
if [ -f "$dir/ch2.nii.gz" ]; then echo "$dir"; exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "mricron-data: not installed and apt-get is not available" >&2; exit 1
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "mricron-data: not installed, and installing it needs root (apt-get install mricron-data)" >&2; exit 1
  fi
fi
echo "mricron-data: installing Debian's mricron-data with apt-get (once)" >&2
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
"${as_root[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends mricron-data >&2 || {
  "${as_root[@]}" apt-get "${apt_opts[@]}" update >&2 || true
  "${as_root[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends mricron-data >&2
}
echo "$dir"
