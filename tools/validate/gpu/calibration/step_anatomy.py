"""What is alive at each phase's peak of one real training step (forward with the loss, backward, each micro-batch of
an accumulating step, the optimizer step): the allocator's trace of a whole step after a warm-up step, split at
marker allocations between the phases, its blocks live at each phase's highest point grouped by the autograd node or
ATen op (C++ frames) and the Python frame that allocated them, and the events around each peak.
Cases are random_steps.py's (by name from CASES.json) or measure_hf.py's (by name).
usage: python3 step_anatomy.py CASES.json OUT.json NAME [NAME ...]"""
import collections
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_hf  # noqa: E402
from peak_anatomy import finished, frame_of, node_of, record_failure  # noqa: E402

MARK = 7 * 2**20 + 512 * 3  # a marker's size, one no tensor of these models has


def phases_of(events):
    """Per phase (split at marker allocations): its peak above the trace's start, the blocks live there, events near it."""
    live, total, out = {}, 0, []
    phase = {"best": -1}
    for i, ev in enumerate(events):
        a, size = ev["action"], ev["size"]
        if a == "alloc" and size == MARK:
            out.append(phase)
            phase = {"best": -1}
            continue
        if a == "alloc":
            frames = ev.get("frames", [])
            live[ev["addr"]] = (size, node_of(frames) + " | " + frame_of(frames))
            total += size
            if total > phase["best"]:
                phase.update(best=total, at=i, live=dict(live))
        elif a == "free_completed" and ev["addr"] in live:
            total -= live.pop(ev["addr"])[0]
    out.append(phase)
    result = []
    for p in out:
        if p["best"] < 0:
            continue
        groups = collections.Counter()
        for size, where in p["live"].values():
            groups[where] += size
        at = p["at"]
        near = [[i - at, events[i]["action"], events[i]["size"], node_of(events[i].get("frames", []))]
                for i in range(max(0, at - 12), min(len(events), at + 6)) if events[i]["action"] in ("alloc", "free_completed")]
        result.append({"peak": p["best"], "live": [[g, n] for g, n in groups.most_common(25)], "near": near})
    return result


def mark():
    x = torch.empty(MARK, dtype=torch.uint8, device="cuda")
    del x


def run(case, configs):
    name, cfg_name, precision, attn, s, b, ckpt = case[:7]
    accum = case[7] if len(case) > 7 else 1
    algorithm = case[8] if len(case) > 8 else "adamw"
    measure_hf.config_path = lambda n: os.path.join(configs, n) if os.path.isdir(os.path.join(configs, n)) else original(n)
    rec = {"name": name}
    t0 = time.time()
    model = opt = loss_fn = None
    try:
        model, opt, loss_fn = measure_hf.prepare(cfg_name, precision, attn, s, b, ckpt, algorithm)
        for _ in range(accum):
            loss_fn().backward()
        opt.step(); opt.zero_grad(set_to_none=True); torch.cuda.synchronize()
        rec["states"] = torch.cuda.memory_allocated()
        torch.cuda.memory._record_memory_history(max_entries=1000000, stacks="all")
        for _ in range(accum):
            loss = loss_fn(); mark()
            loss.backward(); del loss; mark()
        opt.step(); torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        opt.zero_grad(set_to_none=True)
        rec["phases"] = phases_of(snap["device_traces"][0])
    except Exception as e:  # recorded, and the run goes on
        record_failure(rec, e)
    del model, opt, loss_fn  # loss_fn holds the model too
    return finished(rec, t0)


original = measure_hf.config_path


def main():
    cases_file, out_file, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    drawn = {c["name"]: c for c in json.load(open(cases_file))["cases"]}
    configs = tempfile.mkdtemp()
    for c in drawn.values():
        os.makedirs(os.path.join(configs, c["config"]), exist_ok=True)
        with open(os.path.join(configs, c["config"], "config.json"), "w") as f:
            json.dump(c["config_json"], f)
    known = {c[0]: c for c in measure_hf.CASES}
    out = {"info": {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}, "cases": []}
    for n in names:
        if n in drawn:
            c = drawn[n]
            case = (n, c["config"], c["precision"], c["attention"], c["seq"], c["micro_batch"], c["checkpointing"],
                    c.get("accumulation_steps", 1), c.get("algorithm", "adamw"))
        else:
            case = known[n]
        r = run(case, configs)
        print(n, r.get("error", ""), r["seconds"], "s", flush=True)
        for i, p in enumerate(r.get("phases", [])):
            print("  phase %d: peak %d B above the step's start" % (i, p["peak"]))
            for g, size in p["live"][:8]:
                print("    %12d B  %s" % (size, g[:150]))
        out["cases"].append(r)
        with open(out_file, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
