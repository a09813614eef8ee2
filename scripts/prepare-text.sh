#!/usr/bin/env bash
# Writes real English text for the main job: the fortune cookie collection of Debian's
# `fortunes` and `fortunes-min` packages (/usr/share/games/fortunes), with the `%`
# separator lines removed. Usage: prepare-text.sh OUT_FILE
set -euo pipefail
out="${1:-data/fortunes.txt}"
src=/usr/share/games/fortunes
if [ ! -d "$src" ]; then
  echo "prepare-text: $src is missing; install Debian's fortunes package (scripts/install-deps.sh)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
# plain text files only (skip the .dat indexes, the .u8 links and the ASCII-art files)
find "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' ! -name 'art' ! -name 'ascii-art' \
  -print0 | sort -z | xargs -0 cat | iconv -f utf-8 -t utf-8 -c | grep -v '^%$' > "$tmp"
mv "$tmp" "$out"
echo "prepare-text: $(wc -c < "$out") bytes of text in $out"
