"""The forward-only oracle: random Llama-style models (OLMo, OLMo-2, SmolLM3's NoPE layers and Phi-3's fused projections among them)
and StarCoder2, Phi, StableLM, GPT-2, OPT and GPT-NeoX models run forward under torch.no_grad on the CPU (forward.py,
eager attention), their peak above the weights and token ids measured op by op and compared with
`zeromem estimate --forward-only --json` (peak_bytes - weights_bytes - the token ids). Target: within 1%.

usage: python3 run_forward_oracle.py ZEROMEM_BINARY [--configs N] [--seed S] [--stablelm-configs N] [--opt-configs N]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import forward

def read_as_config(args, config):
    """The estimate's arguments with the shape flags replaced by a config.json of the model (written to a temporary
    file), so that zeromem's reading of the family's config is checked too; on the CPU (LayerNorm statistics in the
    input's dtype)."""
    config_path = os.path.join(tempfile.gettempdir(), f"zeromem-forward-oracle-{config['model_type']}-{os.getpid()}.json")
    with open(config_path, "w") as out:
        json.dump(config, out)
    shape = {"--hidden", "--layers", "--heads", "--kv-heads", "--ffn", "--vocab"}
    args = [a for k, a in enumerate(args) if a not in shape and (k == 0 or args[k - 1] not in shape)]
    return args + ["--hf-config", config_path, "--device", "cpu"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--stablelm-configs", type=int, default=12)
    parser.add_argument("--opt-configs", type=int, default=12)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    passed = failed = 0
    worst = 0.0
    configs = []
    for i in range(opts.configs):
        heads = rng.choice([1, 2, 4, 8])
        cfg = {"hidden": heads * rng.choice([8, 16, 32]), "heads": heads, "seq_len": rng.randint(1, 96),
               "micro_batch": rng.randint(1, 3), "layers": rng.randint(1, 3), "vocab": rng.randint(50, 1000),
               "ffn": rng.randint(8, 512), "use_cache": rng.random() < 0.5, "seed": rng.randint(0, 10**6),
               "output": rng.choice(["hidden-states", "logits", "log-probs"])}
        cfg["kv_heads"] = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0])
        if rng.random() < 0.25:  # config.json head_dim: heads x d other than hidden (Gemma-7B, Qwen3)
            cfg["head_dim"] = rng.choice([4, 8, 16, 32, 64])
        cfg["qk_norm"] = rng.random() < 0.3  # Qwen3's per-head q_norm / k_norm
        cfg["gemma"] = rng.random() < 0.3  # GemmaRMSNorm, the scaled embedding
        cfg["sandwich"] = cfg["gemma"] and rng.random() < 0.5  # Gemma-2's sandwich norms and soft-caps
        cfg["softcap"] = 50.0 if cfg["sandwich"] and rng.random() < 0.5 else 0.0
        cfg["final_softcap"] = 30.0 if cfg["sandwich"] and rng.random() < 0.5 else 0.0
        if cfg["sandwich"]:  # Gemma-2 (every other layer slides) or Gemma-3 (five of six, a second rotary pair)
            cfg["pattern"] = rng.choice([2, 6])
            cfg["window"] = rng.randint(1, 64)
            cfg["local_rope"] = cfg["pattern"] == 6
        if rng.random() < 0.25:  # OLMo-2: post-norms, whole-projection q_norm / k_norm, fp32 rotary tables
            cfg.update(olmo2=True, qk_norm=False, gemma=False, sandwich=False, softcap=0.0, final_softcap=0.0)
            cfg.pop("pattern", None), cfg.pop("window", None), cfg.pop("local_rope", None)
        if not cfg.get("olmo2") and not cfg["sandwich"] and rng.random() < 0.2:  # Granite: scalar multipliers, new tensors
            cfg["granite"] = True
        if not cfg.get("olmo2") and rng.random() < 0.2:  # OLMo: OlmoLayerNorm (an fp32 copy, no weights), fp32 rotary tables
            cfg.update(olmo=True, qk_norm=False, gemma=False, sandwich=False, softcap=0.0, final_softcap=0.0)
            cfg.pop("pattern", None), cfg.pop("window", None), cfg.pop("local_rope", None)
        if rng.random() < 0.25:  # SmolLM3: every N-th layer skips RoPE (N = 1: none rotates)
            cfg["nope_period"] = rng.randint(1, 3)
            if rng.random() < 0.5:  # short sequences and a narrow MLP, where the rotation's moment can set a layer's peak
                cfg.update(seq_len=rng.randint(1, 8), ffn=rng.randint(8, 32), layers=rng.randint(2, 4), vocab=rng.randint(50, 100),
                           output="hidden-states")
        plain = not (cfg["qk_norm"] or cfg["gemma"] or cfg.get("olmo") or cfg.get("olmo2") or cfg.get("granite") or cfg.get("nope_period"))
        if plain and rng.random() < 0.4:  # Phi-3: one qkv_proj and one gate_up_proj, RoPE joined by torch.cat
            cfg["fused"] = True
            d = cfg.get("head_dim") or cfg["hidden"] // heads
            if d >= 4 and rng.random() < 0.5:  # Phi-4-mini's partial_rotary_factor: the first r of each head's values
                cfg["rotary_dims"] = 2 * rng.randint(1, d // 2 - 1)
        if rng.random() < 0.25:  # GPT-NeoX: LayerNorms, the per-head [q | k | v] projection, partial RoPE, a GELU MLP
            cfg = {k: cfg[k] for k in ("hidden", "heads", "seq_len", "micro_batch", "layers", "vocab", "ffn", "use_cache", "seed", "output")}
            d = cfg["hidden"] // heads
            cfg.update(neox=True, kv_heads=heads, qk_norm=False, gemma=False, sandwich=False, parallel=rng.random() < 0.7,
                       act=rng.choice(["gelu", "gelu", "gelu_new", "gelu_fast"]), rotary_dims=2 * rng.randint(1, d // 2))
        elif rng.random() < 0.25:  # GPT-2: learned positions, one c_attn, the softmax in the model's dtype, a GELU or ReLU MLP
            cfg = {k: cfg[k] for k in ("hidden", "heads", "seq_len", "micro_batch", "layers", "vocab", "ffn", "use_cache", "seed", "output")}
            cfg.update(gpt2=True, kv_heads=heads, qk_norm=False, gemma=False, sandwich=False, max_positions=cfg["seq_len"] + rng.randint(0, 64),
                       act=rng.choice(["gelu_new", "gelu_new", "gelu", "gelu_pytorch_tanh", "gelu_fast", "relu"]))
        elif rng.random() < 0.25:  # Phi: one LayerNorm for both parallel branches, partial RoPE, a GELU MLP
            cfg = {k: cfg[k] for k in ("hidden", "heads", "kv_heads", "seq_len", "micro_batch", "layers", "vocab", "ffn", "use_cache", "seed",
                                       "output")}
            d = cfg["hidden"] // heads
            cfg.update(phi=True, qk_norm=False, gemma=False, sandwich=False, act=rng.choice(["gelu_new", "gelu_new", "gelu"]),
                       rotary_dims=2 * rng.randint(1, d // 2))
        elif rng.random() < 0.25:  # StarCoder2: Llama's frames with LayerNorms, biases and a GELU MLP
            cfg = {k: cfg[k] for k in ("hidden", "heads", "kv_heads", "seq_len", "micro_batch", "layers", "vocab", "ffn", "use_cache", "seed",
                                       "output", "softcap", "final_softcap")}
            cfg.update(qk_norm=False, gemma=False, sandwich=False, softcap=0.0, final_softcap=0.0,
                       starcoder2=rng.choice(["gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu_new"]))
        cfg["fp32"] = rng.random() < 0.2  # an fp32 model: no upcast copies (Tensor.to returns self)
        configs.append(cfg)
    # StableLM, drawn apart so that the draws above stay as they were: LayerNorms, Phi's attention frame with
    # use_qkv_bias or not, a SwiGLU MLP, in sequence or in parallel behind one norm.
    rng = random.Random(opts.seed + 1)
    for i in range(opts.stablelm_configs):
        heads = rng.choice([1, 2, 4, 8])
        cfg = {"hidden": heads * rng.choice([8, 16, 32]), "heads": heads, "seq_len": rng.randint(1, 96),
               "micro_batch": rng.randint(1, 3), "layers": rng.randint(1, 3), "vocab": rng.randint(50, 1000),
               "ffn": rng.randint(8, 512), "use_cache": rng.random() < 0.5, "seed": rng.randint(0, 10**6),
               "output": rng.choice(["hidden-states", "logits", "log-probs"]), "qk_norm": False, "gemma": False, "sandwich": False}
        d = cfg["hidden"] // heads
        cfg.update(stablelm=True, kv_heads=heads, parallel=rng.random() < 0.5, qkv_bias=rng.random() < 0.5,
                   rotary_dims=2 * rng.randint(1, d // 2), fp32=rng.random() < 0.2)
        configs.append(cfg)
    # OPT, drawn apart as StableLM is, read through an OPT config.json (the mapping checked too): LayerNorms before the
    # branches or after each residual add (OPT-350M), a narrower embedding with project_in / project_out, biases or not.
    rng = random.Random(opts.seed + 2)
    for i in range(opts.opt_configs):
        heads = rng.choice([1, 2, 4, 8])
        hidden = heads * rng.choice([8, 16, 32])
        cfg = {"hidden": hidden, "heads": heads, "kv_heads": heads, "seq_len": rng.randint(1, 96), "micro_batch": rng.randint(1, 3),
               "layers": rng.randint(1, 3), "vocab": rng.randint(50, 1000), "ffn": rng.randint(8, 512), "use_cache": rng.random() < 0.5,
               "seed": rng.randint(0, 10**6), "output": rng.choice(["hidden-states", "logits", "log-probs"]), "qk_norm": False,
               "gemma": False, "sandwich": False, "opt": True, "before": rng.random() < 0.6, "bias": rng.random() < 0.8,
               "embed_width": rng.choice([hidden, hidden, hidden // 2, 2 * hidden]), "fp32": rng.random() < 0.2}
        cfg["max_positions"] = cfg["seq_len"] + rng.randint(0, 64)
        configs.append(cfg)
    for i, cfg in enumerate(configs):
        measured = forward.measure_forward_model(cfg, forward.torch.float32 if cfg["fp32"] else forward.torch.bfloat16)
        args = [opts.binary, "estimate", "--json", "--forward-only", "--hidden", str(cfg["hidden"]), "--layers", str(cfg["layers"]),
                "--heads", str(cfg["heads"]), "--kv-heads", str(cfg["kv_heads"]), "--ffn", str(cfg["ffn"]), "--vocab", str(cfg["vocab"]),
                "--seq-len", str(cfg["seq_len"]), "--micro-batch", str(cfg["micro_batch"]), "--precision", "fp32" if cfg["fp32"] else "bf16",
                "--attention", "eager", "--forward-output", cfg["output"],
                "--blas-workspaces", "0B"]  # measured on the CPU: no cuBLAS workspace
        if not cfg["use_cache"]:
            args.append("--no-cache")
        if cfg.get("starcoder2"):  # the CPU's LayerNorm statistics are in the input's dtype
            args += ["--norm", "layernorm", "--mlp", "gelu", "--qkv-bias", "--device", "cpu"]
            args += ["--gelu-new"] if cfg["starcoder2"] == "gelu_new" else []
        if cfg.get("gpt2"):  # read as a GPT-2 config.json; the CPU's LayerNorm statistics are in the input's dtype
            args = read_as_config(args, {"model_type": "gpt2", "n_embd": cfg["hidden"], "n_layer": cfg["layers"], "n_head": cfg["heads"],
                                         "n_inner": cfg["ffn"], "vocab_size": cfg["vocab"], "n_positions": cfg["max_positions"],
                                         "activation_function": cfg["act"]})
        if cfg.get("opt"):  # read as an OPT config.json; the CPU's LayerNorm statistics are in the input's dtype
            args = read_as_config(args, {"model_type": "opt", "hidden_size": cfg["hidden"], "num_hidden_layers": cfg["layers"],
                                         "num_attention_heads": cfg["heads"], "ffn_dim": cfg["ffn"], "vocab_size": cfg["vocab"],
                                         "max_position_embeddings": cfg["max_positions"], "do_layer_norm_before": cfg["before"],
                                         "enable_bias": cfg["bias"], "word_embed_proj_dim": cfg["embed_width"]})
        if cfg.get("phi"):  # the CPU's LayerNorm statistics are in the input's dtype
            args += ["--norm", "layernorm", "--mlp", "gelu", "--parallel-residual", "--shared-layer-norm", "--rope-concat",
                     "--rotary-dims", str(cfg["rotary_dims"]), "--qkv-bias", "--lm-head-bias", "--device", "cpu"]
            args += ["--gelu-new"] if cfg["act"] == "gelu_new" else []
        if cfg.get("neox"):  # the CPU's LayerNorm statistics are in the input's dtype
            args += ["--norm", "layernorm", "--mlp", "gelu", "--fused-qkv", "--qkv-per-head", "--rope-concat", "--rotary-dims",
                     str(cfg["rotary_dims"]), "--qkv-bias", "--device", "cpu"]
            args += ["--parallel-residual"] if cfg["parallel"] else []
            args += {"gelu_new": ["--gelu-new"], "gelu_fast": ["--gelu-fast"]}.get(cfg["act"], [])
        if cfg.get("stablelm"):  # the CPU's LayerNorm statistics are in the input's dtype
            args += ["--norm", "layernorm", "--rope-concat", "--rotary-dims", str(cfg["rotary_dims"]), "--device", "cpu"]
            args += (["--qkv-bias"] if cfg["qkv_bias"] else []) + (["--parallel-residual", "--residual-added-first", "--shared-layer-norm"] if cfg["parallel"] else [])
        if cfg.get("nope_period"):
            args += ["--nope-period", str(cfg["nope_period"])]
        if cfg.get("head_dim"):
            args += ["--head-dim", str(cfg["head_dim"])]
        if cfg.get("granite"):
            args += ["--scaled-residual", "--scaled-logits", "--embedding-multiplier"]
        if cfg["qk_norm"]:
            args.append("--qk-norm")
        if cfg.get("fused"):
            args += ["--fused-qkv", "--fused-gate-up", "--rope-concat"]
            if cfg.get("rotary_dims"):
                args += ["--rotary-dims", str(cfg["rotary_dims"])]
        if cfg["gemma"]:
            args.append("--norm-scale-fp32")
            if not cfg.get("local_rope"):  # Gemma-3 scales inside its embedding module (Gemma3TextScaledWordEmbedding)
                args.append("--scaled-embedding")
        if cfg.get("olmo"):
            args += ["--norm", "layernorm", "--no-norm-weights", "--norm-input-fp32", "--rope-fp32"]
        if cfg.get("olmo2"):
            args += ["--qk-norm", "--qk-norm-whole", "--norm-weight-fp32", "--post-norms", "--rope-fp32"]
        if cfg["sandwich"]:
            args += ["--sandwich-norms", "--attention-softcap", str(cfg["softcap"]), "--final-logit-softcap", str(cfg["final_softcap"]),
                     "--sliding-window", str(cfg["window"]), "--sliding-window-pattern", str(cfg["pattern"])]
            if cfg["local_rope"]:
                args.append("--local-rope")
        j = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["forward_only"]
        predicted = j["peak_bytes"] - j["weights_bytes"] - 8 * cfg["seq_len"] * cfg["micro_batch"]
        error = abs(predicted - measured) / measured
        worst = max(worst, error)
        ok = error <= 0.01
        print(f"{'ok  ' if ok else 'FAIL'} #{i:02d} {json.dumps(cfg, sort_keys=True)}: measured {measured} B, zeromem {predicted} B "
              f"({100 * error:.3f}%)")
        passed += ok
        failed += not ok
    print(f"forward oracle: largest error {100 * worst:.4f}% over {passed + failed} configurations")
    print(f"forward oracle: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
