#!/usr/bin/env bash
# The main job: install what is missing, build zeromem (Release), and print real memory breakdowns.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
mkdir -p build
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DZEROMEM_BUILD_TESTS=OFF > build/release-configure.log 2>&1 || { cat build/release-configure.log; exit 1; }
cmake --build build/release -j "$(nproc)"
echo
echo "== examples/zero_paper_7b5: the ZeRO paper's 7.5B model on 64 GPUs =="
./build/release/examples/zero_paper_7b5
echo
echo "== zeromem estimate --params 7.5B --precision mixed-fp16 --optimizer adam --zero-stage 3 --dp 64 --offload-optimizer cpu =="
./build/release/tools/zeromem estimate --params 7.5B --precision mixed-fp16 --optimizer adam --zero-stage 3 --dp 64 \
  --offload-optimizer cpu
echo
echo "== zeromem deepspeed zero3: DeepSpeed's own table for bigscience/T0_3B =="
./build/release/tools/zeromem deepspeed zero3 --params 2783959040 --largest-layer-params 65798144
