"""What is alive at one phase's peak of a training-step oracle case: every live allocation, grouped by the Python
frame and the first aten op that made it, largest first. A developer's probe, not a test: it names the tensors a
missed moment holds (how the forward's eager-softmax moment and its attention frames were found, docs/validation.md).

It takes one step under PyTorch's profiler (profile_memory, with_stack), walks the event tree in time order keeping
each allocation's pointer, and prints the live set at the highest point inside the phase, then lets the oracle's own
measurement run (its phases' peaks, as run_step_oracle.check reads them).

usage: python3 live_at_peak.py step|family 'CASE_JSON' [forward|backward]
  step: run_step_oracle.py's Llama-family models; family: run_family_step_oracle.py's (GPT-NeoX, Phi, StarCoder2,
  StableLM). CASE_JSON overrides that oracle's BASE, as its CASES do.
"""
import collections
import json
import sys

import run_family_step_oracle  # first: through blocks, it caps oneDNN's ISA before torch loads
import run_step_oracle


def live_at_peak(loss_fn, opt, phase, set_to_none=True):
    """One step profiled; returns the peak inside `phase` and the live allocations there, {(frame | op, bytes): count}."""
    prof = run_step_oracle.profiled_step(loss_fn, opt, set_to_none, with_stack=True)
    tree = prof.profiler.kineto_results.experimental_event_tree()
    spans, allocations = {}, []

    def walk(node, path):
        if node.name.startswith("phase:"):
            spans[node.name[6:]] = (node.start_time_ns, node.end_time_ns)
        fields = node.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation":
            allocations.append((node.start_time_ns, fields.ptr, fields.alloc_size, path))
            return
        for child in node.children:
            walk(child, path + [node.name])

    for root in tree:
        walk(root, [])
    allocations.sort(key=lambda a: a[0])
    start, end = spans[phase]
    live, current, best, best_live = {}, 0, -1, {}
    for time, ptr, size, path in allocations:
        if size > 0:
            live[ptr] = (size, path)
        else:
            live.pop(ptr, None)
        current += size
        if start <= time <= end and current > best:
            best, best_live = current, dict(live)
    rows = collections.Counter()
    for size, path in best_live.values():
        ops = [p for p in path if p.startswith("aten::")]
        frames = [p for p in path if not p.startswith(("aten::", "phase:"))]
        rows[((frames[-1] if frames else "-")[-70:] + " | " + (ops[0] if ops else "-"), size)] += 1
    return best, rows


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("step", "family"):
        sys.exit(__doc__)
    oracle = run_step_oracle if sys.argv[1] == "step" else run_family_step_oracle
    phase = sys.argv[3] if len(sys.argv) > 3 else "forward"
    cfg = dict(oracle.BASE, **json.loads(sys.argv[2]))
    measure_phases = run_step_oracle.phase_peaks

    def probed(loss_fn, opt, ids, set_to_none=True):
        best, rows = live_at_peak(loss_fn, opt, phase, set_to_none)
        print(f"{phase} peak {best} B allocated in the profile (the oracle adds the token ids, {ids.numel() * 8} B)")
        for (where, size), count in sorted(rows.items(), key=lambda kv: -kv[0][1] * kv[1]):
            print(f"{size:>12d} B x{count:<3d} {where}")
        return measure_phases(loss_fn, opt, ids, set_to_none)

    run_step_oracle.phase_peaks = probed
    print(oracle.measure(cfg))


if __name__ == "__main__":
    main()
