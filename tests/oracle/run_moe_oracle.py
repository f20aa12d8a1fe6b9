"""The MoE oracle: transformers' mixture-of-experts block written op by op, its input requiring grad as a layer's does,
trained or frozen (LoRA elsewhere in the layer), and the bytes autograd saves for backward (blocks.saved_bytes) compared
exactly with zeromem's `activations.per_layer_terms.mlp_hidden` for the same shape. Two layouts, alternately:

- transformers 5 (zeromem's default): MixtralTopKRouter, then integrations/moe.py grouped_mm_experts_forward (the
  experts implementation modeling_utils.py picks where torch._grouped_mm dispatches), over the two 3D parameters.
  torch 1.13 has no _grouped_mm: GroupedMM below stands for it and saves what derivatives.yaml's _grouped_mm reads
  (the input where the weight needs a gradient, the weight where the input does, and the offsets).
- transformers 4 (--expert-linears): modeling_mixtral.py MixtralSparseMoeBlock.forward, an nn.Linear w1, w3, w2 per
  expert, the routing weights cast to the hidden dtype, index_add_ (which keeps its source: derivatives.yaml
  index_add, `expand_as(source)`).

Half the configs are Qwen's (a qwen3_moe or qwen2_moe config.json read by --hf-config), in either layout: the router
casts the weights to the logits' dtype, and one in four of them is Qwen2-MoE's block: norm_topk_prob false or true,
modular_qwen2_moe.py Qwen2MoeSparseMoeBlock's shared expert run first and its sigmoid gate's product added in place last;
four are asked as OLMoE's (model_type olmoe, the same router and experts, norm_topk_prob false).

What must agree: the router's small tensors, each routed choice's indices and weight, the gathers, SwiGLU's tensors,
the experts' outputs and the offsets.

usage: python3 run_moe_oracle.py ZEROMEM_BINARY [--configs N] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import blocks
import torch
import torch.nn.functional as F


class Router(torch.nn.Module):
    """MixtralTopKRouter.forward; with `cast`, Qwen3MoeTopKRouter's and Qwen2MoeTopKRouter's, which cast the weights
    back to the logits' dtype (router_top_value.to(router_logits.dtype)) and renormalise them only with norm_topk_prob
    (`renorm`)."""

    def __init__(self, experts, hidden, top_k, cast=False, renorm=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, hidden) * 0.02)
        self.top_k = top_k
        self.cast = cast
        self.renorm = renorm

    def forward(self, x):
        logits = F.linear(x, self.weight)
        probs = F.softmax(logits.float(), dim=-1)
        top_value, top_index = torch.topk(probs, self.top_k, dim=-1)
        if self.renorm:
            top_value /= top_value.sum(dim=-1, keepdim=True)
        if self.cast:
            top_value = top_value.to(logits.dtype)
        return logits, top_value, top_index


class GroupedMM(torch.autograd.Function):
    """torch._grouped_mm(a, b, offs): row block g of a (offsets) times b[g]; saves as derivatives.yaml's entry reads."""

    @staticmethod
    def forward(ctx, a, b, offs):
        ctx.save_for_backward(a if b.requires_grad else None, b if a.requires_grad else None, offs)
        out, start = a.new_empty(a.shape[0], b.shape[2]), 0
        for g, end in enumerate(offs.tolist()):
            out[start:end] = a[start:end] @ b[g]
            start = end
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, offs = ctx.saved_tensors
        grad_a = grad_b = None
        start = 0
        if ctx.needs_input_grad[0]:
            grad_a = grad.new_zeros(grad.shape[0], b.shape[1])
        if ctx.needs_input_grad[1]:
            grad_b = grad.new_zeros(len(offs), a.shape[1], grad.shape[1])
        for g, end in enumerate(offs.tolist()):
            if grad_a is not None:
                grad_a[start:end] = grad[start:end] @ b[g].t()
            if grad_b is not None:
                grad_b[g] = a[start:end].t() @ grad[start:end]
            start = end
        return grad_a, grad_b, None


class GroupedExperts(torch.nn.Module):
    """transformers 5's experts: gate_up_proj [E, 2F, H], down_proj [E, H, F], run by grouped_mm_experts_forward."""

    def __init__(self, experts, hidden, ffn):
        super().__init__()
        self.experts = experts
        self.gate_up_proj = torch.nn.Parameter(torch.randn(experts, 2 * ffn, hidden) * 0.02)
        self.down_proj = torch.nn.Parameter(torch.randn(experts, hidden, ffn) * 0.02)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        num_top_k, num_tokens, hidden = top_k_index.size(-1), hidden_states.size(0), hidden_states.size(-1)
        token_idx = torch.arange(num_tokens).unsqueeze(1).expand(-1, num_top_k).reshape(-1)
        sample_weights = top_k_weights.reshape(-1)
        expert_ids = top_k_index.reshape(-1)
        selected = hidden_states[token_idx]
        perm = torch.argsort(expert_ids)
        inv_perm = torch.empty_like(perm)
        inv_perm[perm] = torch.arange(perm.size(0))
        expert_ids_g = expert_ids[perm]
        sample_weights_g = sample_weights[perm]
        selected_g = selected[perm]
        tokens_per_expert = torch.histc(expert_ids_g.float(), bins=self.experts, min=0, max=self.experts - 1)
        offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
        gate_up = GroupedMM.apply(selected_g, self.gate_up_proj.transpose(-2, -1), offsets)
        gate, up = gate_up.chunk(2, dim=-1)
        out_g = GroupedMM.apply(F.silu(gate) * up, self.down_proj.transpose(-2, -1), offsets)
        out_g = out_g * sample_weights_g.unsqueeze(-1)
        out = out_g[inv_perm]
        return out.view(num_tokens, num_top_k, hidden).sum(dim=1).to(hidden_states.dtype)


class LinearExperts(torch.nn.Module):
    """transformers 4's MixtralBlockSparseTop2MLP per expert and MixtralSparseMoeBlock's loop."""

    def __init__(self, experts, hidden, ffn):
        super().__init__()
        self.experts = experts
        self.w1 = torch.nn.ModuleList(torch.nn.Linear(hidden, ffn, bias=False) for _ in range(experts))
        self.w3 = torch.nn.ModuleList(torch.nn.Linear(hidden, ffn, bias=False) for _ in range(experts))
        self.w2 = torch.nn.ModuleList(torch.nn.Linear(ffn, hidden, bias=False) for _ in range(experts))

    def forward(self, hidden_states, top_k_index, top_k_weights):
        routing_weights = top_k_weights.to(hidden_states.dtype)
        final = torch.zeros_like(hidden_states)
        expert_mask = F.one_hot(top_k_index, num_classes=self.experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            e = int(expert_idx)
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current = hidden_states[None, top_x].reshape(-1, hidden_states.size(-1))
            current = self.w2[e](F.silu(self.w1[e](current)) * self.w3[e](current)) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current.to(hidden_states.dtype))
        return final


class SharedExpert(torch.nn.Module):
    """Qwen2MoeSparseMoeBlock's shared_expert (Qwen2MoeMLP, SwiGLU of shared_expert_intermediate_size) and its
    shared_expert_gate, nn.Linear(h, 1) without bias: sigmoid(gate(x)) * down(silu(gate_proj(x)) * up_proj(x))."""

    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, ffn, bias=False)
        self.up_proj = torch.nn.Linear(hidden, ffn, bias=False)
        self.down_proj = torch.nn.Linear(ffn, hidden, bias=False)
        self.shared_expert_gate = torch.nn.Linear(hidden, 1, bias=False)

    def expert(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def measure(cfg):
    """Bytes the block saves for one micro-batch, its input (the norm's output, kept by the layer anyway) left out."""
    torch.manual_seed(cfg["seed"])
    dtype = torch.bfloat16
    n, h = cfg["seq_len"] * cfg["micro_batch"], cfg["hidden"]
    router = Router(cfg["experts"], h, cfg["top_k"], cfg["qwen"], cfg["renorm"]).to(dtype)
    experts = (LinearExperts if cfg["linears"] else GroupedExperts)(cfg["experts"], h, cfg["ffn"]).to(dtype)
    shared = SharedExpert(h, cfg["shared"] * cfg["ffn"]).to(dtype) if cfg["shared"] else None
    params = list(router.parameters()) + list(experts.parameters()) + (list(shared.parameters()) if shared else [])
    if cfg["frozen"]:
        for p in params:
            p.requires_grad_(False)
    x = torch.randn(n, h, dtype=dtype, requires_grad=True)

    def block():  # MixtralSparseMoeBlock.forward: _, top_k_weights, top_k_index = self.gate(...); self.experts(...)
        shared_output = shared.expert(x) if shared else None  # Qwen2MoeSparseMoeBlock.forward: the shared expert first
        _, top_k_weights, top_k_index = router(x)
        out = experts(x, top_k_index, top_k_weights)
        if shared:
            out += torch.sigmoid(shared.shared_expert_gate(x)) * shared_output
        return out

    saved, out = blocks.saved_bytes(block, [x] + params)
    out.float().sum().backward()
    return saved


def predict(binary, cfg, workdir):
    args = [binary, "estimate", "--json", "--hidden", str(cfg["hidden"]), "--layers", "2", "--heads", "4",
            "--ffn", str(cfg["ffn"]), "--vocab", "128", "--experts", str(cfg["experts"]),
            "--experts-per-token", str(cfg["top_k"]), "--expert-ffn", str(cfg["ffn"])]
    if cfg["qwen"]:  # a Qwen3-MoE (Qwen2-MoE with a shared expert) config.json of the same shape, read by --hf-config
        model_type = "qwen2_moe" if cfg["shared"] else "olmoe" if cfg["olmoe"] else "qwen3_moe"
        path = os.path.join(workdir, "%s_%d.json" % (model_type, cfg["seed"]))
        config = {"model_type": model_type, "hidden_size": cfg["hidden"], "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": cfg["hidden"] // 4,
                  "intermediate_size": cfg["ffn"], "moe_intermediate_size": cfg["ffn"], "vocab_size": 128,
                  "num_experts": cfg["experts"], "num_experts_per_tok": cfg["top_k"], "norm_topk_prob": cfg["renorm"],
                  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
        if cfg["shared"]:
            config["shared_expert_intermediate_size"] = cfg["shared"] * cfg["ffn"]
        with open(path, "w") as f:
            json.dump(config, f)
        args = [binary, "estimate", "--json", "--hf-config", path]
    args += ["--seq-len", str(cfg["seq_len"]), "--micro-batch", str(cfg["micro_batch"]), "--precision", "bf16",
             "--activation-dtype", "bf16", "--device", "cpu", "--torch-version", "1", "--implementation", "hf",
             "--attention", "eager"]
    if cfg["linears"]:
        args += ["--expert-linears"]
    if cfg["frozen"]:  # LoRA on the attention only: the experts and the router are frozen, the layer's input needs grad
        args += ["--lora-rank", "4", "--lora-targets", "q_proj"]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    return json.loads(run.stdout)["activations"]["per_layer_terms"]["mlp_hidden"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--configs", type=int, default=32)
    parser.add_argument("--seed", type=int, default=20261126)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    workdir = tempfile.mkdtemp(prefix="zeromem-moe-oracle-")
    failed = 0
    for i in range(opts.configs):
        experts = rng.choice([2, 4, 8, 16, 64, 128])
        cfg = {"experts": experts, "top_k": rng.randint(1, min(experts, 8)), "hidden": 4 * rng.randint(2, 24),
               "ffn": rng.randint(4, 96), "seq_len": rng.randint(1, 96), "micro_batch": rng.randint(1, 3),
               "frozen": i % 2 == 1, "linears": i % 4 >= 2, "seed": rng.randint(0, 10**6)}
        cfg["qwen"] = i % 8 >= 4
        # Qwen2-MoE (one config in four of Qwen's): a gated shared expert of 1-4 expert widths, norm_topk_prob false or true.
        cfg["shared"] = rng.randint(1, 4) if cfg["qwen"] and i % 16 >= 12 else 0
        cfg["renorm"] = not cfg["shared"] or rng.random() < 0.5
        # OLMoE (model_type olmoe): Qwen's router (OlmoeTopKRouter is Qwen2MoeTopKRouter) over MixtralExperts of
        # intermediate_size, norm_topk_prob false by default.
        cfg["olmoe"] = cfg["qwen"] and not cfg["shared"] and i % 16 in (5, 6)
        if cfg["olmoe"]:
            cfg["renorm"] = False
        measured = measure(cfg)
        predicted = predict(opts.binary, cfg, workdir)
        ok = measured == predicted
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {cfg}: measured {measured} B, zeromem {predicted} B")
    print(f"{opts.configs - failed} of {opts.configs} MoE blocks exact")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
