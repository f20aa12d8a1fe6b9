#!/usr/bin/env bash
# The main job: install what is missing, build zeromem (Release), explain the five reported out-of-memory
# scenarios, and print a model-state + activation breakdown and DeepSpeed's own estimator table.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
mkdir -p build
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DZEROMEM_BUILD_TESTS=OFF > build/release-configure.log 2>&1 || { cat build/release-configure.log; exit 1; }
cmake --build build/release -j "$(nproc)"
for scenario in orz-1.5b-ppo logic-rl-7b-grpo openrlhf-70b-ppo openrlhf-zero2-vs-zero3 easyr1-vl-7b-grpo; do
  echo
  echo "================================================================================================"
  ./build/release/examples/$scenario
done
echo
echo "== zeromem estimate --model gpt3-175b --seq-len 2048 --tp 8 --sp --pp 8 --recompute selective --dropout 0.1 =="
./build/release/tools/zeromem estimate --model gpt3-175b --seq-len 2048 --tp 8 --sp --pp 8 --recompute selective \
  --dropout 0.1 --implementation paper --zero-stage 1 --dp 8
echo
echo "== zeromem deepspeed zero3: DeepSpeed's own table for bigscience/T0_3B =="
./build/release/tools/zeromem deepspeed zero3 --params 2783959040 --largest-layer-params 65798144
