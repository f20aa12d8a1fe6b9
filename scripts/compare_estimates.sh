#!/usr/bin/env bash
# Whether the working tree's headers give every step estimate of bench/step_grid.cpp exactly as a commit's do (for
# optimizations and refactorings, which must not change a byte). Usage: scripts/compare_estimates.sh [commit]
# (default HEAD). Exits 0 when identical, 1 with the first differing lines otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:-HEAD}
cxx=${CXX:-g++}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$commit" include | tar -x -C "$dir"
"$cxx" -std=c++17 -O2 -I"$dir/include" bench/step_grid.cpp -o "$dir/before"
"$cxx" -std=c++17 -O2 -Iinclude bench/step_grid.cpp -o "$dir/after"
"$dir/before" > "$dir/before.txt"
"$dir/after" > "$dir/after.txt"
if cmp -s "$dir/before.txt" "$dir/after.txt"; then
  echo "identical: $(wc -l < "$dir/after.txt") estimates and rejections, $commit against the working tree"
else
  diff "$dir/before.txt" "$dir/after.txt" | head -20
  echo "the working tree's estimates differ from $commit's" >&2
  exit 1
fi
