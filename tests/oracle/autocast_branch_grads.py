"""Which gradients are alive at each backward node of one layer under autocast, on the CPU. A developer's probe, not a
test: it shows how autograd casts the fp32 residual stream's gradient for 16-bit branch outputs (engine.cpp
validate_outputs), the mechanism step.hpp's branch_grad and attention_cast_waiting follow.

Layouts, as transformers writes them (the branches computed first, then summed):
  seq       x + attn(ln(x)), then + mlp(ln(.))                     (Llama, GPT-2, OPT)
  parallel  attn(ln(x)) + mlp(ln(x)) + x: the branches summed first  (Phi, GPT-NeoX: one cast, shared)
  residual  x + attn(ln(x)) + mlp(ln(x)): the residual added first   (StableLM: a cast for each branch)
MLP: gelu (fc1, GELU, fc2, biased) or swiglu (gate, up, down). Dropout p on the branch outputs.

For each node it prints the gradients made in backward that are alive after the node's last allocation, in units of
s x h elements' bytes (fp32 s x h = 4, bf16 = 2; bf16 s x ffn = 6, with ffn = 3h).

usage: /usr/bin/python3 autocast_branch_grads.py seq|parallel|residual gelu|swiglu [p] [--bf16]
"""
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


def alive_after_each_node(prof):
    """The backward's autograd nodes in the order they ran, and for each the allocations alive after its last one:
    {ptr: (bytes, (index, name) of the node that made it, or None outside any node)}."""
    allocations, nodes = [], []

    def walk(event, owner):
        if event.name.startswith("autograd::engine::evaluate_function: "):
            owner = (len(nodes), event.name.split(": ", 1)[1])
            nodes.append(owner)
        if type(event.extra_fields).__name__ == "_ExtraFields_Allocation":
            allocations.append((event.start_time_ns, event.extra_fields.ptr, event.extra_fields.alloc_size, owner))
            return
        for child in event.children:
            walk(child, owner)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, None)
    allocations.sort(key=lambda a: a[0])
    live, after = {}, {}
    for _, ptr, size, owner in allocations:
        if size > 0:
            live[ptr] = (size, owner)
        else:
            live.pop(ptr, None)
        if owner is not None and size > 0:
            after[owner] = dict(live)
    return nodes, after


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) < 2 or args[0] not in ("seq", "parallel", "residual") or args[1] not in ("gelu", "swiglu"):
        sys.exit(__doc__)
    layout, mlp, p = args[0], args[1], float(args[2]) if len(args) > 2 else 0.0
    amp = "--bf16" not in sys.argv
    s, h, f = 4096, 128, 384  # weights far smaller than s x h, so only activations' gradients pass the filter
    dtype = torch.float32 if amp else torch.bfloat16
    torch.manual_seed(0)

    def linear(i, o, bias):
        return torch.nn.Linear(i, o, bias=bias).to(dtype)

    norm1, norm2, attn = torch.nn.LayerNorm(h).to(dtype), torch.nn.LayerNorm(h).to(dtype), linear(h, h, False)
    gate, up, down = linear(h, f, mlp == "gelu"), linear(h, f, False), linear(f, h, mlp == "gelu")
    x = torch.randn(s, h, dtype=dtype, requires_grad=True)
    incoming = torch.randn(s, h, dtype=dtype)

    def drop(t):
        return F.dropout(t, p) if p > 0 else t

    def feed_forward(t):
        return down(F.gelu(gate(t))) if mlp == "gelu" else down(F.silu(gate(t)) * up(t))

    def layer():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            if layout == "seq":
                y = x + drop(attn(norm1(x)))
                return y + drop(feed_forward(norm2(y)))
            n = norm1(x)
            a = drop(attn(n))
            m = drop(feed_forward(n))
            return a + m + x if layout == "parallel" else x + a + m

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        (layer() * 1.0).backward(incoming)  # the product's node hands the layer its fp32 (or bf16) incoming gradient

    nodes, after = alive_after_each_node(prof)
    unit = s * h
    print(f"{layout} {mlp} p={p} {'autocast' if amp else 'bf16'}: gradients alive after each node (units of s x h elements)")
    for node in nodes:
        if node in after:
            grads = sorted(((size / unit, who[1]) for size, who in after[node].values() if who is not None and size >= unit / 2),
                           reverse=True)
            print(f"  {node[1]:<26} {sum(g for g, _ in grads):5.1f}  " + ", ".join(f"{g:g} {who}" for g, who in grads))


if __name__ == "__main__":
    main()
