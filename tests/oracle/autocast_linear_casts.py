"""Which of a linear's gradients are alive at each backward node under autocast, on the CPU. A developer's probe, not a
test: it shows the order the step model follows for lm_head's and down_proj's backward under AMP (step.hpp
autocast_head and down's two instants).

F.linear under autocast reads 16-bit casts of its fp32 weight and of its fp32 input (autocast_mode.cpp cached_cast).
Its backward is three nodes: MmBackward0 makes both 16-bit gradients and releases the two casts it saved; then the
casts' own nodes (ToCopyBackward0) make the fp32 gradients. The input's cast node runs before the weight's: the probe
prints the input's fp32 gradient alive when the weight's fp32 gradient is made, because autocast's wrapper cast the
weight first and autograd runs the later-made node first. With --bf16-input the input reaching F.linear is 16-bit
already (as down_proj's SwiGLU product is): autocast casts the weight alone, and the weight's cast node runs before the
node of the input's own earlier .to.

It prints, after each node's last allocation, the tensors the backward made that are still alive, in bytes.

usage: /usr/bin/python3 autocast_linear_casts.py [--bf16-input]
"""
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from autocast_branch_grads import alive_after_each_node


def main():
    bf16_input = "--bf16-input" in sys.argv
    tokens, h, v = 256, 512, 8192  # sizes in elements: the weight v x h, the input tokens x h
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(v, h) * 0.02)
    x = torch.randn(1, tokens, h, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inp = (x * 1.0).to(torch.bfloat16) if bf16_input else x * 1.0
        out = F.linear(inp, weight)
    incoming = torch.randn_like(out)

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out.backward(incoming)

    nodes, after = alive_after_each_node(prof)
    print(f"weight {v} x {h}, input {tokens} x {h} ({'16-bit' if bf16_input else 'fp32, cast'}): "
          f"16-bit weight gradient {2 * v * h} B, fp32 {4 * v * h} B; input gradient 16-bit {2 * tokens * h} B, fp32 {4 * tokens * h} B")
    for node in nodes:
        if node in after:
            alive = sorted(((size, who[1]) for size, who in after[node].values() if who is not None and size >= 1024), reverse=True)
            print(f"  after {node[1]:<20} " + ", ".join(f"{size} B made by {who}" for size, who in alive))


if __name__ == "__main__":
    main()
