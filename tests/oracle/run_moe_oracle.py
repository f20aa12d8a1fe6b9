"""The MoE oracle: transformers 5's mixture-of-experts block (modeling_mixtral.py MixtralTopKRouter and the eager loop of
MixtralExperts, which Qwen3-MoE shares) written op by op, its input requiring grad as a layer's does, trained or frozen
(LoRA elsewhere in the layer), and the bytes autograd saves for backward (blocks.saved_bytes) compared with zeromem's
`activations.per_layer_terms.mlp_hidden` for the same shape.

What must agree exactly: the router's small tensors (softmax's fp32 output, topk's indices, the in-place
renormalisation's divisor and input), each routed choice's indices and fp32 weight, the gathers, SwiGLU's tensors and the
experts' outputs, frozen or not. One tensor differs by design: on the CPU this loop's index_add_ keeps its source
(derivatives.yaml index_add: `expand_as(source)`), a·h per routed choice, which the H200 step (transformers 5.17 on CUDA,
docs/validation.md) did not keep; zeromem follows the GPU, so the measured bytes must be zeromem's plus exactly that.

usage: python3 run_moe_oracle.py ZEROMEM_BINARY [--configs N] [--seed S]
"""
import argparse
import json
import random
import subprocess
import sys

import blocks
import torch
import torch.nn.functional as F


class Router(torch.nn.Module):
    """MixtralTopKRouter.forward (Qwen2MoeTopKRouter's with norm_topk_prob)."""

    def __init__(self, experts, hidden, top_k):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, hidden) * 0.02)
        self.top_k = top_k

    def forward(self, x):
        logits = F.linear(x, self.weight)
        probs = F.softmax(logits.float(), dim=-1)
        top_value, top_index = torch.topk(probs, self.top_k, dim=-1)
        top_value /= top_value.sum(dim=-1, keepdim=True)
        return logits, top_value, top_index


class Experts(torch.nn.Module):
    """MixtralExperts: two 3D parameters and the loop over the experts hit."""

    def __init__(self, experts, hidden, ffn):
        super().__init__()
        self.experts = experts
        self.gate_up_proj = torch.nn.Parameter(torch.randn(experts, 2 * ffn, hidden) * 0.02)
        self.down_proj = torch.nn.Parameter(torch.randn(experts, hidden, ffn) * 0.02)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final = torch.zeros_like(hidden_states)
        with torch.no_grad():
            expert_mask = F.one_hot(top_k_index, num_classes=self.experts).permute(2, 1, 0)
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_idx = expert_idx[0]
            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
            current = hidden_states[token_idx]
            gate, up = F.linear(current, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)
            current = F.linear(F.silu(gate) * up, self.down_proj[expert_idx])
            current = current * top_k_weights[token_idx, top_k_pos, None]
            final.index_add_(0, token_idx, current.to(final.dtype))
        return final


def measure(cfg):
    """Bytes the block saves for one micro-batch, its input (the norm's output, kept by the layer anyway) left out."""
    torch.manual_seed(cfg["seed"])
    dtype = torch.bfloat16
    n, h = cfg["seq_len"] * cfg["micro_batch"], cfg["hidden"]
    router = Router(cfg["experts"], h, cfg["top_k"]).to(dtype)
    experts = Experts(cfg["experts"], h, cfg["ffn"]).to(dtype)
    params = list(router.parameters()) + list(experts.parameters())
    if cfg["frozen"]:
        for p in params:
            p.requires_grad_(False)
    x = torch.randn(n, h, dtype=dtype, requires_grad=True)

    def block():  # MixtralSparseMoeBlock.forward: _, top_k_weights, top_k_index = self.gate(...); self.experts(...)
        _, top_k_weights, top_k_index = router(x)
        return experts(x, top_k_index, top_k_weights)

    saved, out = blocks.saved_bytes(block, [x] + params)
    out.float().sum().backward()
    return saved


def predict(binary, cfg):
    args = [binary, "estimate", "--json", "--hidden", str(cfg["hidden"]), "--layers", "2", "--heads", "4",
            "--ffn", str(cfg["ffn"]), "--vocab", "128", "--experts", str(cfg["experts"]),
            "--experts-per-token", str(cfg["top_k"]), "--expert-ffn", str(cfg["ffn"]),
            "--seq-len", str(cfg["seq_len"]), "--micro-batch", str(cfg["micro_batch"]), "--precision", "bf16",
            "--activation-dtype", "bf16", "--device", "cpu", "--torch-version", "1", "--implementation", "hf",
            "--attention", "eager"]
    if cfg["frozen"]:  # LoRA on the attention only: the experts and the router are frozen, the layer's input needs grad
        args += ["--lora-rank", "4", "--lora-targets", "q_proj"]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    return json.loads(run.stdout)["activations"]["per_layer_terms"]["mlp_hidden"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--configs", type=int, default=24)
    parser.add_argument("--seed", type=int, default=20261126)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    failed = 0
    for i in range(opts.configs):
        experts = rng.choice([2, 4, 8, 16, 64, 128])
        cfg = {"experts": experts, "top_k": rng.randint(1, min(experts, 8)), "hidden": 4 * rng.randint(2, 24),
               "ffn": rng.randint(4, 96), "seq_len": rng.randint(1, 96), "micro_batch": rng.randint(1, 3),
               "frozen": i % 2 == 1, "seed": rng.randint(0, 10**6)}
        measured = measure(cfg)
        predicted = predict(opts.binary, cfg)
        source = cfg["seq_len"] * cfg["micro_batch"] * cfg["top_k"] * cfg["hidden"] * 2  # index_add_'s source, bf16
        ok = measured == predicted + source
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {cfg}: measured {measured} B, zeromem {predicted} B + index_add_'s source {source} B")
    print(f"{opts.configs - failed} of {opts.configs} MoE blocks exact")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
