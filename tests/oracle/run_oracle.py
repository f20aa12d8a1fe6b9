"""The PyTorch oracle: random GPT-style, Llama-style (OLMo, OLMo-2, Granite and SmolLM3's NoPE layers among them) and
GPT-NeoX/Phi/OPT/StarCoder2/StableLM-style configurations, a third of them frozen with LoRA adapters,
each measured with autograd's saved tensors (blocks.py) and predicted by `zeromem estimate --json`. Parameter counts must match exactly and
per-layer activation bytes within 1%.

usage: python3 run_oracle.py ZEROMEM_BINARY [--configs N] [--seed S]
"""
import argparse
import json
import random
import subprocess
import sys

import blocks


def estimate_args(binary, kind, cfg, layers, vocab):
    """`zeromem estimate --json` with the flags that describe this block family's model."""
    args = [binary, "estimate", "--json", "--hidden", str(cfg["hidden"]), "--layers", str(layers),
            "--heads", str(cfg["heads"]), "--ffn", str(cfg["ffn"]), "--vocab", str(vocab),
            "--seq-len", str(cfg["seq_len"]), "--micro-batch", str(cfg["micro_batch"]),
            "--activation-dtype", "bf16", "--device", "cpu", "--recompute", cfg["recompute"]]
    if kind != "gpt":  # torch 1's RMSNorm is transformers' code; the GPT blocks run zeromem's eager profile
        args += ["--torch-version", "1"]
    if kind == "gpt":
        args += ["--mlp", "gelu", "--norm", "layernorm", "--tied-embeddings", "--max-positions", str(cfg["max_positions"]),
                 "--dropout", str(cfg["dropout"]), "--implementation", "eager", "--attention", "eager"]
    elif kind == "neox" and cfg["family"] == "starcoder2":
        args += ["--mlp", "gelu", "--norm", "layernorm", "--tied-embeddings", "--kv-heads", str(cfg["kv_heads"]),
                 "--dropout", str(cfg["dropout"]), "--implementation", "hf", "--attention", "eager"]
        if cfg["gelu_new"]:
            args.append("--gelu-new")
    elif kind == "neox" and cfg["family"] == "opt":
        args += ["--mlp", "relu", "--norm", "layernorm", "--tied-embeddings", "--max-positions", str(cfg["max_positions"] + 2),
                 "--dropout", str(cfg["dropout"]), "--implementation", "hf", "--attention", "eager"]
        if cfg.get("post_ln"):
            args.append("--post-residual-norms")
        if cfg.get("embed_width"):
            args += ["--embedding-width", str(cfg["embed_width"])]
    elif kind == "neox" and cfg["family"] == "stablelm":
        args += ["--mlp", "swiglu", "--norm", "layernorm", "--kv-heads", str(cfg["kv_heads"]), "--implementation", "hf",
                 "--attention", "eager"]
        if cfg["qkv_bias"]:
            args.append("--qkv-bias")
        if cfg["parallel"]:
            args += ["--parallel-residual", "--residual-added-first", "--shared-layer-norm"]
    elif kind == "neox":
        args += ["--mlp", "gelu", "--norm", "layernorm", "--kv-heads", str(cfg["kv_heads"]), "--dropout", str(cfg["dropout"]),
                 "--implementation", "hf", "--attention", "eager"]
        args += ["--shared-layer-norm", "--lm-head-bias"] if cfg["shared"] else ["--fused-qkv", "--qkv-per-head"]
        if cfg["parallel"]:
            args.append("--parallel-residual")
        if cfg["gelu_new"]:
            args.append("--gelu-new")
        if cfg.get("gelu_fast"):
            args.append("--gelu-fast")
    else:
        norm = ["layernorm", "--no-norm-weights", "--norm-input-fp32", "--rope-fp32"] if cfg.get("olmo") else ["rmsnorm"]
        if cfg.get("clip"):
            norm.append("--clip-qkv")
        args += ["--mlp", "swiglu", "--norm", *norm, "--kv-heads", str(cfg["kv_heads"]), "--implementation", "hf", "--attention", "eager"]
        if cfg["qkv_bias"]:
            args.append("--qkv-bias")
        if cfg.get("qk_norm"):
            args.append("--qk-norm")
        if cfg.get("fused"):
            args += ["--fused-qkv", "--fused-gate-up"]
        if cfg.get("cache"):
            args.append("--use-cache")
        if cfg.get("gemma_norm"):
            args.append("--norm-scale-fp32")
        if cfg.get("sandwich"):
            args.append("--sandwich-norms")
        if cfg.get("softcap"):
            args += ["--attention-softcap", str(cfg["softcap"])]
        if cfg.get("olmo2"):
            args += ["--qk-norm", "--qk-norm-whole", "--norm-weight-fp32", "--post-norms"]
        if cfg.get("qk_whole"):
            args += ["--qk-norm", "--qk-norm-whole"]
        if cfg.get("nope"):
            args += ["--nope-period", "1"]
        if cfg.get("granite"):
            args += ["--scaled-residual", "--scaled-logits", "--embedding-multiplier"]
    if cfg.get("lora"):
        lora = cfg["lora"]
        args += ["--precision", "bf16", "--lora-rank", str(lora["rank"]), "--lora-dropout", str(lora["dropout"]),
                 "--lora-targets", ",".join(blocks.HF_NAMES[t] for t in lora["targets"]), "--lora-dtype", lora["adapter_dtype"]]
    return args


def zeromem(binary, kind, cfg, layers, vocab):
    out = subprocess.run(estimate_args(binary, kind, cfg, layers, vocab), check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def random_config(rng, kind):
    heads = rng.choice([1, 2, 4, 8])
    d = rng.choice([8, 16, 32])
    cfg = {"hidden": heads * d, "heads": heads, "seq_len": rng.randint(1, 96), "micro_batch": rng.randint(1, 3),
           "seed": rng.randint(0, 10**6), "layers": rng.randint(1, 3), "vocab": rng.randint(50, 1000),
           "recompute": rng.choice(["none", "none", "selective", "full"])}
    if kind == "gpt":
        cfg["ffn"] = 4 * cfg["hidden"] if rng.random() < 0.5 else rng.randint(8, 512)
        cfg["dropout"] = rng.choice([0.0, 0.1, 0.25])
        cfg["max_positions"] = rng.randint(cfg["seq_len"], 512)
    elif kind == "neox":  # GPT-NeoX (fused qkv, two LayerNorms) or Phi (shared norm, separate q/k/v, lm_head bias)
        cfg["shared"] = rng.random() < 0.4
        cfg["parallel"] = cfg["shared"] or rng.random() < 0.75
        cfg["kv_heads"] = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0]) if cfg["shared"] else heads
        cfg["lm_head_bias"] = cfg["shared"]
        cfg["ffn"] = 4 * cfg["hidden"] if rng.random() < 0.5 else rng.randint(8, 512)
        cfg["rotary"] = rng.choice([r for r in (2, 4, d // 4, d // 2, d) if r % 2 == 0 and 0 < r <= d])  # rotary_pct 0.25 etc.
        cfg["gelu_new"] = rng.random() < 0.4
        cfg["gelu_fast"] = not cfg["gelu_new"] and rng.random() < 0.3  # GPT-NeoX-20B's FastGELUActivation
        cfg["dropout"] = rng.choice([0.0, 0.0, 0.1])
        if rng.random() < 0.1:  # one token: GPT-NeoX's per-head layout leaves V a view of the projection's output
            cfg["seq_len"] = 1
        cfg["family"] = "phi" if cfg["shared"] else "neox"
        if rng.random() < 0.3:  # OPT: separate q, k, v, no RoPE, norms in sequence, ReLU
            cfg.update(family="opt", shared=False, parallel=False, kv_heads=heads, lm_head_bias=False, rotary=0,
                       gelu_new=False, gelu_fast=False, max_positions=rng.randint(cfg["seq_len"], 512),
                       post_ln=rng.random() < 0.4, embed_width=rng.choice([0, 0, 8, cfg["hidden"] // 2, 2 * cfg["hidden"]]))
        elif rng.random() < 0.3:  # StarCoder2: separate q, k, v with GQA, full RoPE, norms in sequence, biased GELU MLP
            cfg.update(family="starcoder2", shared=False, parallel=False, lm_head_bias=False, rotary=d, gelu_fast=False,
                       kv_heads=rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0]))
        elif rng.random() < 0.35:  # StableLM: separate q, k, v (MHA), partial RoPE, SwiGLU, parallel behind one norm or not
            parallel = rng.random() < 0.4
            cfg.update(family="stablelm", shared=parallel, parallel=parallel, kv_heads=heads, lm_head_bias=False,
                       gelu_new=False, gelu_fast=False, dropout=0.0, qkv_bias=rng.random() < 0.5)
    else:
        cfg["kv_heads"] = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0])
        cfg["ffn"] = rng.randint(8, 512)
        cfg["qkv_bias"] = rng.random() < 0.5
        cfg["qk_norm"] = rng.random() < 0.3  # Qwen3's per-head q_norm / k_norm
        cfg["fused"] = not cfg["qk_norm"] and rng.random() < 0.35  # Phi-3's qkv_proj and gate_up_proj
        cfg["cache"] = rng.random() < 0.3  # config.json use_cache: a DynamicCache in the training forward
        cfg["gemma_norm"] = rng.random() < 0.3  # GemmaRMSNorm
        cfg["sandwich"] = cfg["gemma_norm"] and rng.random() < 0.5  # Gemma-2's post-branch norms
        cfg["softcap"] = rng.choice([0.0, 0.0, 50.0])  # Gemma-2's attention soft-cap (eager)
        if rng.random() < 0.25:  # OLMo-2's post-norm layer
            cfg.update(olmo2=True, qk_norm=False, fused=False, gemma_norm=False, sandwich=False)
        cfg["nope"] = rng.random() < 0.2  # SmolLM3's NoPE layer: no rotation (zeromem: --nope-period 1, every layer)
        cfg["granite"] = not cfg.get("olmo2") and not cfg["sandwich"] and rng.random() < 0.2  # Granite's residual_multiplier
        if not cfg.get("olmo2") and rng.random() < 0.2:  # OLMo's OlmoLayerNorm (fp32 copy, no weights) and fp32 RoPE tables
            cfg.update(olmo=True, qkv_bias=False, qk_norm=False, fused=False, gemma_norm=False, sandwich=False,
                       clip=rng.choice([0.0, 8.0]))  # clip_qkv: q, k, v clamped in place
        # OLMoE's attention: Llama's pre-norm layer with q_norm / k_norm over the whole projections, then clip_qkv (drawn
        # from the config's own seed, so that the other configs stay as they were).
        own = random.Random(cfg["seed"])
        if not cfg.get("olmo2") and not cfg.get("olmo") and not cfg["fused"] and not cfg["gemma_norm"] and own.random() < 0.2:
            cfg.update(qk_whole=True, qk_norm=False, clip=own.choice([0.0, 8.0]))
    # A third of the blocks are frozen with LoRA adapters on a random subset of their linears (PEFT's layout).
    if rng.random() < 0.35:
        if kind == "neox":
            names = (["q", "k", "v"] if cfg["family"] != "neox" else ["qkv"]) + ["o"]
            names += ["gate", "up", "down"] if cfg["family"] == "stablelm" else ["fc1", "fc2"]  # starcoder2's c_fc, c_proj
        elif cfg.get("fused"):
            names = ["qkv", "o", "gate_up", "down"]
        else:
            names = ["q", "k", "v", "o"] + (["fc1", "fc2"] if kind == "gpt" else ["gate", "up", "down"])
        targets = [n for n in names if rng.random() < 0.5] or [rng.choice(names)]
        cfg["lora"] = {"rank": rng.choice([1, 2, 4, 8, 16]), "targets": targets, "dropout": rng.choice([0.0, 0.0, 0.1]),
                       "adapter_dtype": rng.choice(["fp32", "bf16"])}  # PEFT's default fp32, or adapters in the base's bf16
    return cfg


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--configs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261122)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    passed = failed = 0
    worst = 0.0
    for kind in ("gpt", "llama", "neox"):
        for i in range(opts.configs):
            cfg = random_config(rng, kind)
            saved, layer_params = blocks.measure_layer(kind, cfg)
            model_params = blocks.count_model_parameters(kind, cfg)
            j = zeromem(opts.binary, kind, cfg, cfg["layers"], cfg["vocab"])
            predicted = j["activations"]["per_layer_bytes"]
            error = abs(predicted - saved) / saved
            worst = max(worst, error)
            ok = (error <= 0.01 and j["model"]["params_per_layer"] == layer_params and j["model"]["params"] == model_params)
            status = "ok  " if ok else "FAIL"
            print(f"{status} {kind:5} #{i:02d} {json.dumps(cfg, sort_keys=True)}: saved {saved} B, zeromem {predicted} B "
                  f"({100 * error:.3f}%); params {model_params} vs {j['model']['params']}, "
                  f"layer {layer_params} vs {j['model']['params_per_layer']}")
            passed += ok
            failed += not ok
    print(f"oracle: largest activation error {100 * worst:.4f}% over {passed + failed} configurations")
    print(f"oracle: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
