"""What is alive at the forward pass's peak of a training step (its loss included): the allocator's trace of one forward
after a warm-up step, its blocks live at the highest point grouped by the Python frame that allocated them
(peak_anatomy.py's grouping). Used for a checkpointed MoE layer's forward (h100-moe-steps.json, 2026-11-26).
usage: python3 forward_anatomy.py CONFIG SEQ MICRO_BATCH [CONFIG SEQ MICRO_BATCH ...]   (bf16, SDPA, full recompute)"""
import gc, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_hf import build
from peak_anatomy import anatomy


def run(cfg, s, b):
    model, c = build(cfg, "bf16", "sdpa")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, c.vocab_size, (b, s), device="cuda")
    model(input_ids=ids, labels=ids).loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    states = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=400000, stacks="python")
    loss = model(input_ids=ids, labels=ids).loss
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated() - states
    best, groups, _ = anatomy(snap, 0)
    del loss, model, opt
    gc.collect(); torch.cuda.empty_cache()
    return dict(config=cfg, seq=s, micro_batch=b, peak_above_states=peak, trace_peak=best, live=[[g, n] for g, n in groups])


if __name__ == "__main__":
    args = sys.argv[1:]
    for i in range(0, len(args) - 2, 3):
        print(json.dumps(run(args[i], int(args[i + 1]), int(args[i + 2]))), flush=True)
