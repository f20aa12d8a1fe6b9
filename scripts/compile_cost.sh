#!/usr/bin/env bash
# What including zeromem costs a translation unit: wall time of `g++ -std=c++17 -fsyntax-only` on a plain TU,
# on one including only zeromem's Boost-free headers, and on one including the umbrella header. Median of N runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
cxx=${CXX:-g++}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'int main() { return 0; }\n' > "$dir/plain.cpp"
printf '#include <zeromem/core/version.hpp>\n#include <zeromem/core/error.hpp>\n#include <zeromem/core/parse.hpp>\n#include <zeromem/training/sharding.hpp>\nint main() { return 0; }\n' > "$dir/boost_free.cpp"
printf '#include <zeromem/core/units.hpp>\nint main() { return 0; }\n' > "$dir/units.cpp"
printf '#include <zeromem/zeromem.hpp>\nint main() { return 0; }\n' > "$dir/umbrella.cpp"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for tu in plain boost_free units umbrella; do
  times=$(for _ in $(seq "$runs"); do
    s=$(date +%s%N); "$cxx" -std=c++17 -Iinclude -fsyntax-only "$dir/$tu.cpp"; e=$(date +%s%N)
    echo $(( (e - s) / 1000000 ))
  done | median)
  printf '%-11s %5d ms (median of %d, %s -fsyntax-only)\n' "$tu" "$times" "$runs" "$cxx"
done
