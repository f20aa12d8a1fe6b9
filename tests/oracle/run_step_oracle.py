"""The training-step oracle: random-weight Llama-style models (forward.py's CausalLM) take a real training step on the
CPU (transformers' ForCausalLMLoss, torch.optim.AdamW with foreach=False, gradients set to None), and PyTorch's profiler
records every allocation and free of the CPU allocator (profile_memory=True). The highest bytes above the resting
states inside each phase (forward with the loss, backward, optimizer.step()) are compared with `zeromem estimate
--json` (phases.<phase>.peak_bytes minus the resting states), run for the CPU (--device cpu --torch-version 1
--blas-workspaces 0B, eager attention, the for-loop optimizer). Target: within 1% each phase.

Outside the target, and left out of the list below: a layer's MLP backward holds dL/d(MLP input) and the weight
gradients of gate, up and down beside the layer's saved tensors, which zeromem's backward walk (whole layers) does not
add; it matters where a layer's weights are large beside its activations (ffn 8 x hidden at 128 tokens: -10%).

usage: python3 run_step_oracle.py ZEROMEM_BINARY
"""
import json
import subprocess
import sys

import forward  # first: blocks.py caps oneDNN's ISA before torch loads
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

CASES = [  # hidden, heads, kv_heads, ffn, vocab, seq_len, micro_batch, layers, use_cache
    (256, 4, 2, 512, 1000, 64, 2, 2, False),
    (256, 4, 2, 512, 1000, 64, 2, 2, True),
    (256, 4, 2, 512, 8000, 64, 2, 2, False),
    (512, 8, 8, 1376, 4000, 128, 1, 4, False),
    (512, 8, 8, 1376, 4000, 512, 2, 4, False),
    (512, 8, 8, 4096, 4000, 128, 1, 4, False),  # gate then up: the for-loop's previous denom beside the next two
    (512, 8, 2, 1376, 4000, 64, 8, 4, False),
]


def measure(cfg):
    """Peak bytes above the resting states in each phase of the second training step."""
    torch.manual_seed(0)
    model = forward.CausalLM(cfg).to(torch.bfloat16)
    model.inv_freq = model.inv_freq.float()  # LlamaRotaryEmbedding keeps inv_freq in fp32
    vocab = cfg["vocab"]
    ids = torch.randint(0, vocab, (cfg["micro_batch"], cfg["seq_len"]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)

    def causal_lm_loss(logits, labels):  # transformers loss_utils.py ForCausalLMLoss
        logits = logits.float()
        labels = F.pad(labels, (0, 1), value=-100)
        shift_labels = labels[..., 1:].contiguous()
        logits = logits.view(-1, vocab)
        shift_labels = shift_labels.view(-1)
        return F.cross_entropy(logits, shift_labels, ignore_index=-100, reduction="mean")

    def loss_fn():  # LlamaForCausalLM.forward: the logits and the cache (past_key_values) live through the loss
        cache = [] if cfg["use_cache"] else None
        logits = model(ids, cache, "logits")
        loss = causal_lm_loss(logits, ids)
        return loss

    loss_fn().backward()  # the first step builds the optimizer's states
    opt.step()
    opt.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("phase:forward"):
            loss = loss_fn()
        with record_function("phase:backward"):
            loss.backward()
            del loss
        with record_function("phase:optimizer_step"):
            opt.step()
        opt.zero_grad(set_to_none=True)
    events = list(prof.profiler.kineto_results.events())
    spans = {e.name()[6:]: (e.start_us(), e.start_us() + e.duration_us()) for e in events if e.name().startswith("phase:")}
    peaks, current = {k: 0 for k in spans}, 0
    for e in events:
        if e.name() != "[memory]":
            continue
        current += e.nbytes()
        for phase, (start, end) in spans.items():
            if start <= e.start_us() <= end:
                peaks[phase] = max(peaks[phase], current)
    if current != 0:
        raise RuntimeError(f"the step left {current} B allocated; the phases are not measured from the resting states")
    return peaks


def predict(binary, cfg):
    args = [binary, "estimate", "--json", "--hidden", str(cfg["hidden"]), "--layers", str(cfg["layers"]), "--heads", str(cfg["heads"]),
            "--kv-heads", str(cfg["kv_heads"]), "--ffn", str(cfg["ffn"]), "--vocab", str(cfg["vocab"]), "--seq-len", str(cfg["seq_len"]),
            "--micro-batch", str(cfg["micro_batch"]), "--precision", "bf16", "--attention", "eager", "--device", "cpu",
            "--torch-version", "1", "--blas-workspaces", "0B", "--optimizer", "adamw", "--optimizer-impl", "forloop"]
    if cfg["use_cache"]:
        args.append("--use-cache")
    phases = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["phases"]
    resting = phases["forward"]["terms"]["resting_states_bytes"]
    return {k: v["peak_bytes"] - resting for k, v in phases.items()}


def main():
    binary = sys.argv[1]
    failed, worst = 0, 0.0
    for case in CASES:
        cfg = dict(zip(("hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len", "micro_batch", "layers", "use_cache"), case))
        measured, predicted = measure(cfg), predict(binary, cfg)
        for phase in ("forward", "backward", "optimizer_step"):
            error = (predicted[phase] - measured[phase]) / measured[phase]
            worst = max(worst, abs(error))
            ok = abs(error) <= 0.01
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {json.dumps(cfg, sort_keys=True)} {phase}: measured {measured[phase]} B, "
                  f"zeromem {predicted[phase]} B ({100 * error:+.3f}%)")
    print(f"step oracle: largest error {100 * worst:.3f}% over {3 * len(CASES)} phases, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
