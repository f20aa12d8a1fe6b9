#!/usr/bin/env bash
# The main job: install what building and running needs, build zeromem (Release), explain the five reported
# out-of-memory scenarios, and print a step's peak, a model-state + activation breakdown and DeepSpeed's own
# estimator table. Each banner is the exact command that follows it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh run
mkdir -p build
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DZEROMEM_BUILD_TESTS=OFF > build/release-configure.log 2>&1 || { cat build/release-configure.log; exit 1; }
cmake --build build/release -j "$(nproc)"

show() {  # prints the command as a banner, then runs it
  echo
  echo "================================================================================================"
  echo "\$ $*"
  "$@"
}
zeromem=./build/release/tools/zeromem
for scenario in orz-1.5b-ppo logic-rl-7b-grpo openrlhf-70b-ppo openrlhf-zero2-vs-zero3 easyr1-vl-7b-grpo; do
  show $zeromem scenario $scenario
done
show $zeromem estimate --model qwen2.5-7b --zero-stage 2 --dp 8 --seq-len 4096 --gpu a100-80gb
show $zeromem estimate --model gpt3-175b --seq-len 2048 --tp 8 --sp --pp 8 --recompute selective --dropout 0.1 \
  --attention eager --implementation paper --zero-stage 1 --dp 8
show $zeromem plan --model llama-3-70b --gpu a100-80gb --gpus 8 --nodes 4 --seq-len 4096 --top 5
show $zeromem deepspeed zero3 --params 2783959040 --largest-layer-params 65798144
