#!/usr/bin/env bash
# The whole test suite: unit, compile-time, compile-fail, header, CLI, PyTorch oracle, consumer and packaging tests,
# built three ways: g++, clang++, and g++ with AddressSanitizer + UndefinedBehaviorSanitizer.
# Warnings are errors in all three. Ends with one line: "zeromem: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh test || exit 1

jobs=$(nproc)
passed=0
failed=0
status=0
run_config() {
  local name=$1; shift
  local dir="build/test-$name"
  echo "== $name: configure and build ($dir) =="
  if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DZEROMEM_REQUIRE_ORACLE=ON -DZEROMEM_REQUIRE_RENDERER=ON "$@" > "$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"; status=1; failed=$((failed + 1)); return
  fi
  if ! cmake --build "$dir" -j "$jobs" > "$dir.build.log" 2>&1; then
    grep -E "error|Error" "$dir.build.log" | head -50; status=1; failed=$((failed + 1)); return
  fi
  echo "== $name: ctest =="
  local log="$dir.ctest.log"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure) 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local total fails
  total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  fails=$(sed -nE 's/.*tests passed, ([0-9]+) tests failed out of.*/\1/p' "$log" | tail -1)
  if [ -z "$total" ] || [ -z "$fails" ]; then status=1; failed=$((failed + 1)); return; fi
  passed=$((passed + total - fails))
  failed=$((failed + fails))
  [ "$rc" -eq 0 ] || status=1
}

mkdir -p build
run_config gcc -DCMAKE_CXX_COMPILER=g++ -DZEROMEM_BUILD_BENCHMARKS=ON
run_config clang -DCMAKE_CXX_COMPILER=clang++
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_config sanitize -DCMAKE_CXX_COMPILER=g++ "-DZEROMEM_SANITIZE=address,undefined"

echo
echo "zeromem: g++, clang++ and g++ with ASan+UBSan"
echo "$passed passed, $failed failed"
exit $status
