"""The CUDA caching allocator's whole event stream for real training steps: what a replay of the allocator's rules
(c10/cuda/CUDACachingAllocator.cpp: the small and large pools, 2 MiB and 20 MiB segments, block splitting and best fit)
must reproduce before zeromem models reserved memory above the allocated peak (docs/validation.md: not modelled yet).

Per case, after empty_cache(): the allocator's history from before the model is built, through a warm-up step (the
optimizer's states are created in it) and one measured step, recorded without stack traces. Written compactly:
  events    [action, address, size, stream] in order; action one of ACTIONS' codes (block allocations and frees,
            segment allocations and frees, expandable segments' map and unmap);
  marks     the event counts at the phases' ends: the model built, the warm-up step, then the measured step's forward
            and backward (each micro-batch's) and its optimizer step (taken from snapshots, which allocate nothing on the
            GPU, where step_anatomy.py's marker allocations would move the segments being measured);
  segments  the segments at the start and at the end ([address, total_size, stream, is_expandable, [[block size,
            state code], ...]]): a replay starts from the first and must end at the second;
  stats     max_memory_allocated, max_memory_reserved and the allocator's counters (torch.cuda.memory_stats()).
Cases are random_steps.py's draws (by name from CASES.json) or measure_hf.py's (by name); PYTORCH_CUDA_ALLOC_CONF is
recorded per case. MEASURED_STEPS=N (1 unless set) records N measured steps, each followed by zero_grad (a mark) when
N > 1, to see whether reserved memory still grows after the first measured step. Writes $OUT/allocator_events.json.gz
($OUT/$EVENTS_NAME where that is set).

usage: OUT=DIR python3 allocator_events.py CASES.json NAME [NAME ...]"""
import gc
import gzip
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_hf  # noqa: E402

ACTIONS = {"alloc": "a", "free_requested": "r", "free_completed": "f", "segment_alloc": "S", "segment_free": "F",
           "segment_map": "M", "segment_unmap": "U", "oom": "O", "snapshot": "s"}
STATES = {"active_allocated": "a", "active_pending_free": "p", "inactive": "i"}
MEASURED_STEPS = int(os.environ.get("MEASURED_STEPS", "1"))
COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
            "segment.all.peak", "segment.large_pool.peak", "segment.small_pool.peak",
            "reserved_bytes.all.peak", "reserved_bytes.large_pool.peak", "reserved_bytes.small_pool.peak",
            "allocated_bytes.all.peak", "inactive_split_bytes.all.peak", "oversize_allocations.peak")


def segments_of(snap):
    """[address, total_size, stream, is_expandable, [[block size, state code], ...]] per segment."""
    return [[g["address"], g["total_size"], g["stream"], g.get("is_expandable", False),
             [[k["size"], STATES.get(k["state"], k["state"])] for k in g["blocks"]]] for g in snap["segments"]]


def case_of(name, drawn):
    """(name, config, precision, attention, seq, micro-batch, checkpointing, accumulation, optimizer)"""
    if name in drawn:
        c = drawn[name]
        return (name, c["config"], c["precision"], c["attention"], c["seq"], c["micro_batch"], c["checkpointing"],
                c.get("accumulation_steps", 1), c.get("algorithm", "adamw"))
    known = {c[0]: c for c in measure_hf.CASES}
    if name not in known:
        raise SystemExit("no case named %s in the draws or in measure_hf.py's CASES" % name)
    c = known[name]
    return tuple(c[:7]) + ((c[7] if len(c) > 7 else 1), (c[8] if len(c) > 8 else "adamw"))


def run(case):
    name, cfg_name, precision, attn, s, b, ckpt, accum, algorithm = case
    rec = {"name": name, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "measured_steps": MEASURED_STEPS,
           "accumulation_steps": accum}
    t0 = time.time()
    model = opt = loss_fn = None
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    rec["base_bytes"] = torch.cuda.memory_allocated()  # an earlier case's cuBLAS workspaces, if any
    marks = []

    def mark():
        torch.cuda.synchronize()
        marks.append(len(torch.cuda.memory._snapshot()["device_traces"][0]))

    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=4_000_000)
    # What the allocator holds before the case: the segments a replay starts from (empty_cache left those with live blocks).
    rec["initial_segments"] = segments_of(torch.cuda.memory._snapshot())
    try:
        model, opt, loss_fn = measure_hf.prepare(cfg_name, precision, attn, s, b, ckpt, algorithm)
        mark()  # the model built
        for _ in range(accum):
            loss_fn().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mark()  # the warm-up step done
        for _ in range(MEASURED_STEPS):
            for _ in range(accum):
                loss = loss_fn()
                mark()  # this micro-batch's forward
                loss.backward()
                del loss
                mark()  # its backward
            opt.step()
            mark()  # the optimizer step
            if MEASURED_STEPS > 1:
                opt.zero_grad(set_to_none=True)
                mark()  # the gradients freed before the next step
        snap = torch.cuda.memory._snapshot()
        rec["events"] = [[ACTIONS.get(e["action"], e["action"]), e["addr"], e["size"], e["stream"]]
                         for e in snap["device_traces"][0]]
        rec["marks"] = marks
        rec["segments"] = segments_of(snap)
        stats = torch.cuda.memory_stats()
        rec["stats"] = {k: stats.get(k) for k in COUNTERS}
        rec["max_allocated"] = torch.cuda.max_memory_allocated()
        rec["max_reserved"] = torch.cuda.max_memory_reserved()
    except Exception as e:  # recorded, and the run goes on
        rec["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    del model, opt, loss_fn  # loss_fn holds the model too
    gc.collect()
    torch.cuda.empty_cache()
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    cases_file, names = sys.argv[1], sys.argv[2:]
    drawn = {c["name"]: c for c in json.load(open(cases_file))["cases"]}
    configs = tempfile.mkdtemp()  # the draws' configs, where measure_hf.build looks them up
    for c in drawn.values():
        os.makedirs(os.path.join(configs, c["config"]), exist_ok=True)
        with open(os.path.join(configs, c["config"], "config.json"), "w") as f:
            json.dump(c["config_json"], f)
    original = measure_hf.config_path
    measure_hf.config_path = lambda n: os.path.join(configs, n) if os.path.isdir(os.path.join(configs, n)) else original(n)
    out = {"info": {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                    "total_bytes": torch.cuda.mem_get_info()[1], "actions": ACTIONS, "states": STATES}, "cases": []}
    path = os.path.join(os.environ.get("OUT", "."), os.environ.get("EVENTS_NAME", "allocator_events.json.gz"))
    for n in names:
        r = run(case_of(n, drawn))
        print(n, r.get("error", ""), len(r.get("events", [])), "events", r.get("max_allocated"), "B allocated",
              r.get("max_reserved"), "B reserved", r["seconds"], "s", flush=True)
        out["cases"].append(r)
        with gzip.open(path, "wt") as f:  # after each case, so a timeout keeps what finished
            json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
