#!/usr/bin/env bash
# Installs the Debian 12 packages listed in scripts/apt-packages.txt (needs root or sudo).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkgs=$(grep -v '^\s*#' "$here/apt-packages.txt" | grep -v '^\s*$' | tr '\n' ' ')
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "greentrain: installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
