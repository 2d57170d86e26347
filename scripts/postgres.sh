#!/usr/bin/env bash
# Installs Debian's `postgresql` (initdb, postgres and the client tools) for the tests that need a real
# PostgreSQL server, and prints its bin folder (/usr/lib/postgresql/N/bin). Safe to run again. Exits non-zero
# when it cannot be installed (no root or no network); those tests then skip with a message locally and fail
# under CI=true. The tests start their own private server (crates/test-support/src/postgres.rs): the system
# cluster Debian's package may create and start is not used.
set -euo pipefail
# The newest /usr/lib/postgresql/N/bin that has both initdb and postgres, or nothing.
bin_dir() {
  local d found=
  while IFS= read -r d; do
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then found="$d"; fi
  done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V)
  if [ -n "$found" ]; then echo "$found"; fi
}
dir="$(bin_dir)"
if [ -n "$dir" ]; then echo "$dir"; exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "postgres: not installed and apt-get is not available" >&2; exit 1
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "postgres: not installed, and installing it needs root (apt-get install postgresql)" >&2; exit 1
  fi
fi
echo "postgres: installing Debian's postgresql with apt-get (once)" >&2
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
# The package's own setup (creating and starting the system cluster) can fail where there is no init system;
# what counts is whether the binaries arrived, checked below.
"${as_root[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends postgresql >&2 || {
  "${as_root[@]}" apt-get "${apt_opts[@]}" update >&2 || true
  "${as_root[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends postgresql >&2 ||
    echo "postgres: apt-get install postgresql reported a failure; checking for the binaries anyway" >&2
}
dir="$(bin_dir)"
if [ -z "$dir" ]; then
  echo "postgres: apt-get did not install initdb and postgres under /usr/lib/postgresql/*/bin" >&2; exit 1
fi
echo "$dir"
