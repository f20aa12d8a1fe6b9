#!/usr/bin/env bash
# Installs what zeromem needs from Debian 12 packages, and only what is missing (safe to run again).
#   install-deps.sh run    what building and running zeromem needs (scripts/run.sh)
#   install-deps.sh test   that, plus what the test suite needs: clang and libFuzzer, Catch2, Google Benchmark,
#                          pkg-config, PyTorch for the oracle, and librsvg to render the SVG charts (scripts/test.sh)
set -euo pipefail

run_packages=(cmake make g++ libboost-dev libcli11-dev nlohmann-json3-dev libyaml-cpp-dev)
test_packages=(clang libclang-rt-14-dev pkg-config python3 python3-torch catch2 libbenchmark-dev librsvg2-bin)

case "${1:-}" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: install-deps.sh run|test" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages for '$1' present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
