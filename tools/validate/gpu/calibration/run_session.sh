#!/bin/sh
# One device session's measurements, in the time one call allows (tools/validate/gpu, docs/validation.md):
# the prepared cases of measure_hf.py given as arguments (each group one process, a process's first case as predicted),
# then the drawn random steps under the default allocator to a deadline, what is alive at the peaks of the (at most
# eight) furthest from their prediction by more than 3% (step_anatomy.py), and the draws again under expandable
# segments (EXPANDABLE_S 0: not); with ALLOC_EVENTS="NAME ...", those cases' whole allocator event streams last
# (allocator_events.py: what a replay of the caching allocator must reproduce before reserved memory is modelled),
# replayed at once (replay_allocator.py); with FSDP_RESTING="NAME ...", those fsdp_fake.py cases again with the blocks
# alive between steps grouped by the frame that allocated them (RESTING=1: what the FSDP2 resting states hold above
# zeromem's prediction, 60.6 MiB in fsdp-qwen1.5b-w8-mixed-s2048-b4), one process each, into fsdp_fake.jsonl.
# ANATOMY_S and EVENTS_S (seconds; 150 and 240 unless set) bound those two stages, so that a session fits one call.
# usage: OUT=DIR [ALLOC_EVENTS="NAME ..."] [FSDP_RESTING="NAME ..."] [ANATOMY_S=S] [EVENTS_S=S] sh run_session.sh CASES.json DEFAULT_S EXPANDABLE_S "GROUP1 CASES" ...
set -u
here=$(dirname "$0"); cases=$1; default_s=$2; expandable_s=$3; shift 3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" > "$OUT/versions.txt" 2>&1
n=0
for group in "$@"; do
  n=$((n + 1)); mkdir -p "$OUT/prepared$n"
  OUT="$OUT/prepared$n" timeout 150 python3 "$here/measure_hf.py" $group > "$OUT/prepared$n.log" 2>&1
  mv "$OUT/prepared$n/hf_measured.json" "$OUT/prepared$n.json" && rmdir "$OUT/prepared$n"  # what comes back: files, not folders
done
timeout $((default_s + 90)) python3 "$here/random_steps.py" measure "$cases" "$OUT/random_default.json" --deadline "$default_s" \
  > "$OUT/random_default.log" 2>&1
misses=$(python3 "$here/random_steps.py" misses "$cases" "$OUT/random_default.json" 3 8)
[ -n "$misses" ] && timeout "${ANATOMY_S:-150}" python3 "$here/step_anatomy.py" "$cases" "$OUT/anatomy.json" $misses > "$OUT/anatomy.log" 2>&1
[ "$expandable_s" -gt 0 ] && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout $((expandable_s + 90)) python3 "$here/random_steps.py" measure "$cases" \
  "$OUT/random_expandable.json" --deadline "$expandable_s" > "$OUT/random_expandable.log" 2>&1
[ -n "${ALLOC_EVENTS:-}" ] && timeout "${EVENTS_S:-240}" python3 "$here/allocator_events.py" "$cases" $ALLOC_EVENTS > "$OUT/allocator_events.log" 2>&1 &&
  timeout 60 python3 "$here/replay_allocator.py" "$OUT/allocator_events.json.gz" > "$OUT/replay_allocator.log" 2>&1
for name in ${FSDP_RESTING:-}; do
  RESTING=1 timeout 150 python3 "$here/fsdp_fake.py" "$name" >> "$OUT/fsdp_resting.log" 2>&1
done
echo done
