#!/usr/bin/env bash
# Sets up pgdyno in ./.venv on a fresh Debian machine with Python 3.11+, as root or not.
#
# - As root (or with passwordless sudo) it installs the Debian packages pgdyno's
#   optional features and tests use; without either it says which are missing and goes on.
# - Debian's PostgreSQL 15 is installed without creating or starting a cluster: pgdyno
#   only uses its binaries (bench --pg-bin /usr/lib/postgresql/15/bin).
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(python3-venv postgresql-15 sysstat fio sysbench nvme-cli smartmontools xfsprogs
              openssh-client openssh-server chromium)

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else return 1
    fi
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null; then
    if as_root true; then
        # Keep postgresql-common from creating and starting a "main" cluster.
        as_root mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.d/pgdyno.conf >/dev/null
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "setup: not root and no sudo: skipping Debian packages ${missing[*]} (optional features will say they are missing)" >&2
    fi
fi

PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "setup: pgdyno needs Python 3.11 or newer ($PYTHON is $("$PYTHON" -V 2>&1))" >&2; exit 2; }
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[test]"
echo "setup: pgdyno $(.venv/bin/pgdyno --version 2>/dev/null || .venv/bin/python -c 'import pgdyno; print(pgdyno.__version__)') ready in .venv" >&2
