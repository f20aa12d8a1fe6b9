"""Random real training steps: published configs of fifteen families with their shapes redrawn, run as measure_hf.py
runs its cases (one GPU, random weights, phases of one optimizer step), so that the step model meets shapes and
combinations nobody picked.  Two stages, so that zeromem's predictions exist before anything is measured:

  python3 random_steps.py draw --count N --seed S [--families F,G] [--zeromem BIN] CASES.json   # no torch: the cases, their configs
  python3 random_steps.py measure CASES.json OUT.json [--deadline SECONDS]
  python3 random_steps.py misses CASES.json OUT.json PERCENT [COUNT]   # the measured cases furthest from their prediction
  python3 random_steps.py draw --fsdp --count N --seed S [--zeromem BIN] CASES.json   # rank 0 of FSDP2 / DDP jobs
  python3 random_steps.py measure-fsdp CASES.json OUT.json [--deadline SECONDS] [--only NAME]   # as fsdp_fake.py runs them

With --fsdp, each draw becomes rank 0 of a data-parallel job as fsdp_fake.py runs one (PyTorch's fake process group on
one GPU): FSDP2 with FULL_SHARD or SHARD_GRAD_OP, or DDP, over 2-64 ranks, pure bf16 or (FSDP2 only) fp32 parameters
under MixedPrecisionPolicy(bf16, reduce fp32), SDPA, AdamW (foreach), one micro-batch a step; `measure-fsdp` measures
them in fsdp_fake.py's record shape (the calibration set's fsdp_rank0 section). Run it one case a process (--only NAME;
merge_measured.py joins the files): in one process a case's state can outlive it and spoil the next one's baseline.
With --zeromem, each draw is predicted first (as tests/unit/test_calibration.cpp asks, on an H200) and its phases
written beside it; a draw zeromem refuses is kept under "refused" with its message and not measured.
`measure` runs the cases in order until the deadline (seconds since it started; a case is not begun after it), writing
OUT.json in measure_hf.py's shape ({info, cases}) after each, every case carrying its config so that to_calibration.py
and the calibration test can read it (`configs/<config>/config.json`).  PYTORCH_CUDA_ALLOC_CONF is recorded per case.
"""
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "..", "..", "..", "tests", "data", "calibration", "configs")

# family: the calibration config its draws start from (a published config.json)
BASES = {"llama": "llama-2-7b", "qwen2": "qwen2.5-1.5b", "qwen3": "qwen3-8b", "mistral": "mistral-7b", "gemma": "gemma-2b",
         "gemma2": "gemma-2-2b", "gemma3_text": "gemma-3-1b", "olmo": "olmo-1b-hf", "olmo2": "olmo-2-0425-1b",
         "phi3": "phi-3-mini-4k", "phi": "phi-2", "gpt_neox": "pythia-1b", "stablelm": "stablelm-2-1.6b", "opt": "opt-350m",
         "gpt2": "gpt2", "mixtral": "mixtral-8x7b-2layers", "qwen3_moe": "qwen3-moe-2layers-vocab1024",
         "olmoe": "olmoe-1b-7b-2layers", "qwen2_moe": "qwen1.5-moe-2layers-vocab1024"}
# Families zeromem reads that no GPU has measured yet, drawn only when named (draw --families ...), so that the default
# draw of a seed stays the one committed: their configuration classes' defaults (transformers 5,
# configuration_<family>.py), no published config.json being kept here.
UNMEASURED = {"starcoder2": "starcoder2-defaults", "granite": "granite-defaults", "smollm3": "smollm3-defaults",
              "olmo3": "olmo3-defaults"}
MOE = ("mixtral", "qwen3_moe", "olmoe", "qwen2_moe")
OPTIMIZERS = ["adamw"] * 6 + ["adam", "sgd", "sgd-momentum", "rmsprop", "adagrad", "nadam", "adamax", "adafactor"]


def load(name):
    with open(os.path.join(CONFIGS, name, "config.json")) as f:
        return json.load(f)


def rough_bytes(f, cfg):
    """An upper guess of the step (bf16 weights + fp32 AdamW states and gradients, the logits' fp32 copies, eager
    scores), only to keep draws on the card; zeromem's estimate is what gets compared."""
    h, L, V, n = cfg["h"], cfg["layers"], cfg["vocab"], cfg["heads"]
    experts = cfg.get("experts", 1)
    params = L * (4 * h * h + 3 * h * cfg["ffn"] * experts) + 2 * V * h
    tokens = cfg["s"] * cfg["b"]
    eager = cfg["attn"] == "eager"
    acts = L * tokens * h * 40 + (L * cfg["b"] * n * cfg["s"] ** 2 * 8 if eager else 0) + tokens * V * 16
    return params * (18 if f != "amp" else 20) + acts


def draw_one(rng, index, seed, families=None):
    family = rng.choice(families or list(BASES))
    c = load({**BASES, **UNMEASURED}[family])
    moe = family in MOE
    d = rng.choice([64, 128]) if family not in ("gemma", "gemma2", "gemma3_text") else rng.choice([64, 128, 256])
    heads = rng.choice([2, 4, 8, 12, 16, 32])
    kv = rng.choice([k for k in (1, 2, 4, 8, heads) if heads % k == 0]) if family != "stablelm" else heads  # zeromem refuses GQA there
    independent_head_dim = family in ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text")
    h = rng.choice([512, 768, 1024, 1536, 2048, 3072, 4096]) if independent_head_dim else heads * d
    if family in ("gemma2", "gemma3_text") and h % heads:  # their configs require a hidden size their heads divide
        h = heads * d
    ffn = rng.choice([h, 2 * h, 3 * h, 4 * h, 8 * h // 3 // 64 * 64 or h])
    if moe:
        ffn = rng.choice([256, 512, 768, 1024, 1408])
    shape = {"h": h, "heads": heads, "layers": rng.choice([1, 2, 3, 4, 6, 8]), "ffn": ffn,
             "vocab": rng.choice([1024, 8192, 32000, 50304, 128256, 151936]), "s": rng.choice([128, 256, 512, 1024, 2048, 4096]),
             "b": rng.choice([1, 2, 4, 8]), "attn": "eager" if rng.random() < 0.2 else "sdpa"}
    if family in ("gpt2",):
        shape["s"] = min(shape["s"], 1024)
    if family in ("opt", "phi", "gpt_neox"):
        shape["s"] = min(shape["s"], 2048)
    precision = "amp" if (rng.random() < 0.15 and not moe) else "bf16"
    ckpt = rng.random() < 0.35
    accum = rng.choice([2, 3]) if rng.random() < 0.15 else 1
    algorithm = rng.choice(OPTIMIZERS)
    if moe:
        shape["experts"] = rng.choice([4, 8, 16, 32, 64])
        shape["top_k"] = rng.choice([k for k in (1, 2, 4, 8) if k <= shape["experts"]])
    if rough_bytes(precision, shape) > 110e9:
        return None
    s, L, V = shape["s"], shape["layers"], shape["vocab"]
    c.update({"vocab_size": V, "num_hidden_layers": L, "use_cache": rng.random() < 0.5})
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(c.get(key), int) and c[key] >= V:
            c[key] = 1 if key != "pad_token_id" else 0
    for key in ("layer_types", "max_window_layers", "torch_dtype", "_name_or_path", "transformers_version"):
        c.pop(key, None)
    if family == "gpt2":
        c.update({"n_embd": h, "n_head": heads, "n_layer": L, "n_inner": ffn, "n_positions": 1024, "n_ctx": 1024})
        c.pop("num_hidden_layers")
    else:
        c.update({"hidden_size": h, "num_attention_heads": heads, "intermediate_size": ffn})
        if family not in ("gpt_neox", "opt"):
            c["num_key_value_heads"] = kv
        if independent_head_dim:
            c["head_dim"] = d
        if "max_position_embeddings" in c and family not in ("opt", "phi", "gpt_neox"):
            c["max_position_embeddings"] = max(c["max_position_embeddings"], s)
    if family == "opt":
        c.update({"ffn_dim": ffn, "word_embed_proj_dim": rng.choice([h, 512]), "do_layer_norm_before": rng.random() < 0.5})
        c.pop("intermediate_size")
    if family in ("gemma", "gemma2", "gemma3_text"):
        c["query_pre_attn_scalar"] = d
    if family in ("gemma2", "gemma3_text", "mistral", "phi3", "olmo3"):
        c["sliding_window"] = rng.choice([128, 512, 4096])
    if family == "starcoder2":  # bigcode's released configs drop out 0.1 on the residual, embeddings and probabilities
        p = rng.choice([0.0, 0.1])
        c.update({"residual_dropout": p, "embedding_dropout": p, "attention_dropout": p, "use_bias": rng.random() < 0.8,
                  "sliding_window": rng.choice([None, 512, 4096])})
    if family == "granite":  # ibm-granite 3.x's multipliers: no size changes with them, but their products are tensors
        c.update({"embedding_multiplier": 12.0, "logits_scaling": 8.0, "residual_multiplier": 0.22,
                  "attention_multiplier": 0.015625, "attention_bias": rng.random() < 0.3})
    if family == "phi":
        c["partial_rotary_factor"] = rng.choice([0.25, 0.5])  # 0.4 of a 64- or 128-wide head is no whole dimension
    if family == "gpt_neox":
        c["rotary_pct"] = rng.choice([0.25, 0.5, 1.0])
    if family in ("llama", "qwen2", "qwen3", "mistral", "olmo2", "phi3", "stablelm", "granite", "olmo3") and rng.random() < 0.3:
        c["tie_word_embeddings"] = True
    if moe:
        experts = "num_local_experts" if family == "mixtral" else "num_experts"
        c.update({experts: shape["experts"], "num_experts_per_tok": shape["top_k"]})
        if family in ("qwen3_moe", "qwen2_moe"):
            c["moe_intermediate_size"] = ffn
        if family == "qwen2_moe":
            c["shared_expert_intermediate_size"] = rng.choice([ffn, 4 * ffn])
        if family in ("qwen3_moe", "olmoe", "qwen2_moe"):
            c["norm_topk_prob"] = rng.random() < 0.5
    config = f"random-{seed}-{index:03d}-{family}"
    name = (f"{config}-{precision}-{shape['attn']}-s{s}-b{shape['b']}" + ("-ckpt" if ckpt else "") +
            (f"-accum{accum}" if accum > 1 else "") + (f"-{algorithm}" if algorithm != "adamw" else ""))
    case = {"name": name, "config": config, "precision": precision, "attention": shape["attn"], "seq": s,
            "micro_batch": shape["b"], "checkpointing": ckpt}
    if accum > 1:
        case["accumulation_steps"] = accum
    if algorithm != "adamw":
        case["algorithm"] = algorithm
    return case, c


def as_data_parallel(rng, case):
    """A single-GPU draw as rank 0 of a data-parallel job (fsdp_fake.py's record fields)."""
    mode = rng.choice(["full", "full", "grad_op", "ddp"])
    mixed = mode != "ddp" and rng.random() < 0.5  # fsdp_fake.py's DDP steps run without autocast: pure bf16 only
    world = rng.choice([2, 4, 8, 16, 32, 64])
    name = (f"{case['config']}-{'ddp' if mode == 'ddp' else 'fsdp-' + mode}-w{world}-{'mixed' if mixed else 'bf16'}"
            f"-s{case['seq']}-b{case['micro_batch']}" + ("-ckpt" if case["checkpointing"] else ""))
    return {"name": name, "config": case["config"], "world": world, "mode": mode, "mixed": mixed, "seq": case["seq"],
            "micro_batch": case["micro_batch"], "checkpointing": case["checkpointing"], "foreach": True}


def draw(count, seed, data_parallel=False, families=None):
    rng = random.Random(seed)
    drawn = []
    while len(drawn) < count:
        one = draw_one(rng, len(drawn), seed, families)
        if one:
            case, config = one
            if data_parallel:
                case = as_data_parallel(rng, case)
            drawn.append(dict(case, config_json=config))
    return drawn


H200 = ["--gpu-memory", "150109880320B", "--cuda-context", "650969088B"]  # h200-training-steps.json's measured_on


def predict(binary, case, first):
    """zeromem's phases for one case, with the flags test_calibration.cpp's flags_of passes; None and the message if refused."""
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(case["config_json"], f)
    args = [binary, "estimate", "--hf-config", f.name, "--seq-len", str(case["seq"]), "--micro-batch", str(case["micro_batch"]),
            "--precision", "amp-bf16" if case.get("precision") == "amp" else case.get("precision", "bf16"),
            "--attention", case.get("attention", "sdpa"),
            "--implementation", "hf", "--json"] + H200
    if "world" in case:  # rank 0 of a data-parallel job, flagged as test_calibration.cpp's flags_of flags one
        args[args.index("--precision") + 1] = "mixed-bf16" if case["mixed"] else "bf16"
        args[args.index("--attention") + 1] = "sdpa"
        args += (["--ddp", "--dp", str(case["world"])] if case["mode"] == "ddp" else
                 ["--fsdp", "FULL_SHARD" if case["mode"] == "full" else "SHARD_GRAD_OP", "--dp", str(case["world"])])
    if case["checkpointing"]:
        args += ["--recompute", "full"]
    args += ["--optimizer", case["algorithm"]] if "algorithm" in case else ["--optimizer-impl", "foreach"]
    if case.get("accumulation_steps", 1) > 1:
        args += ["--grad-accum-steps", str(case["accumulation_steps"])]
    if not first:
        args += ["--blas-workspaces", "0B"]
    run = subprocess.run(args, capture_output=True, text=True)
    os.unlink(f.name)
    if run.returncode != 0:
        return None, run.stderr.strip()
    j = json.loads(run.stdout)
    return {"peak": j["per_gpu"]["peak_bytes"], "peak_phase": j["per_gpu"]["peak_phase"], "fits": j["verdict"]["fits"],
            **{p: j["phases"][p]["peak_bytes"] for p in ("forward", "backward", "optimizer_step")}}, None


def write_configs(cases):
    """Each draw's config.json in a temporary directory, configs/<config>/config.json, where measure_hf.build looks."""
    import tempfile
    configs = tempfile.mkdtemp()
    for c in cases:
        os.makedirs(os.path.join(configs, c["config"]), exist_ok=True)
        with open(os.path.join(configs, c["config"], "config.json"), "w") as f:
            json.dump(c["config_json"], f)
    return configs


def measure(cases_file, out_file, deadline):
    sys.path.insert(0, HERE)
    import measure_hf
    import torch
    import transformers
    with open(cases_file) as f:
        cases = json.load(f)["cases"]
    configs = write_configs(cases)
    measure_hf.config_path = lambda name: os.path.join(configs, name)
    info = dict(torch=torch.__version__, transformers=transformers.__version__, device=torch.cuda.get_device_name(0),
                total=torch.cuda.mem_get_info()[1])
    x = torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    info["context_used"] = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
    del x
    alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    start, results = time.time(), dict(info=info, cases=[])
    for c in cases:
        if time.time() - start > deadline:
            print(f"deadline: {len(results['cases'])} of {len(cases)} cases measured", flush=True)
            break
        rec = measure_hf.one_case((c["name"], c["config"], c["precision"], c["attention"], c["seq"], c["micro_batch"],
                                   c["checkpointing"], c.get("accumulation_steps", 1), c.get("algorithm", "adamw")))
        rec["config_json"] = c["config_json"]
        if alloc_conf:
            rec["alloc_conf"] = alloc_conf
        print(json.dumps({k: v for k, v in rec.items() if k != "config_json"}), flush=True)
        results["cases"].append(rec)
        with open(out_file, "w") as f:
            json.dump(results, f, indent=1)


def measure_data_parallel(cases_file, out_file, deadline, only=None):
    """The data-parallel draws, each as fsdp_fake.py's run() measures it (its fake group made and destroyed per case),
    written after each case as {info, cases}; with `only`, that one case. Run one case a process (--only NAME), as
    fsdp_fake.py does: in one process a case's FSDP2 or DDP state can outlive it, so that the next case's baseline holds
    it and its peak above that baseline is wrong (an H200, 2026-11-28: 44 of 60 steps held 0.07-2.97 GB before they
    began)."""
    sys.path.insert(0, HERE)
    import measure_hf
    import fsdp_fake
    import torch
    import transformers
    with open(cases_file) as f:
        cases = [c for c in json.load(f)["cases"] if only is None or c["name"] == only]
    if not cases:
        raise SystemExit(f"no case named {only} in {cases_file}")
    configs = write_configs(cases)
    measure_hf.config_path = lambda name: os.path.join(configs, name)  # fsdp_fake's build looks it up here
    x = torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    info = dict(torch=torch.__version__, transformers=transformers.__version__, device=torch.cuda.get_device_name(0),
                total=torch.cuda.mem_get_info()[1], context_used=torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0])
    del x
    start, results = time.time(), dict(info=info, cases=[])
    for c in cases:
        if time.time() - start > deadline:
            print(f"deadline: {len(results['cases'])} of {len(cases)} cases measured", flush=True)
            break
        rec = fsdp_fake.run((c["name"], c["config"], c["world"], c["mode"], c["mixed"], c["seq"], c["micro_batch"],
                             c["checkpointing"], c["foreach"]))
        rec["config_json"] = c["config_json"]
        print(json.dumps({k: v for k, v in rec.items() if k != "config_json"}), flush=True)
        results["cases"].append(rec)
        with open(out_file, "w") as f:
            json.dump(results, f, indent=1)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "draw":
        count, seed = int(sys.argv[sys.argv.index("--count") + 1]), int(sys.argv[sys.argv.index("--seed") + 1])
        families = sys.argv[sys.argv.index("--families") + 1].split(",") if "--families" in sys.argv else None
        unknown = [f for f in families or [] if f not in BASES and f not in UNMEASURED]
        if unknown:
            raise SystemExit(f"unknown families {unknown}; known: {', '.join(list(BASES) + list(UNMEASURED))}")
        cases, refused = draw(count, seed, data_parallel="--fsdp" in sys.argv, families=families), []
        if "--zeromem" in sys.argv:
            binary, kept = sys.argv[sys.argv.index("--zeromem") + 1], []
            for c in cases:
                prediction, message = predict(binary, c, first=not kept)
                if prediction:
                    kept.append(dict(c, zeromem=prediction))
                else:
                    refused.append(dict(c, refused=message))
            cases = kept
        with open(sys.argv[-1], "w") as f:
            json.dump({"seed": seed, "cases": cases, "refused": refused}, f, indent=1)
            f.write("\n")
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "measure":
        deadline = float(sys.argv[sys.argv.index("--deadline") + 1]) if "--deadline" in sys.argv else float("inf")
        measure(sys.argv[2], sys.argv[3], deadline)
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "measure-fsdp":
        deadline = float(sys.argv[sys.argv.index("--deadline") + 1]) if "--deadline" in sys.argv else float("inf")
        measure_data_parallel(sys.argv[2], sys.argv[3], deadline,
                              sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None)
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "misses":  # names, for step_anatomy.py, of the worst predicted peaks
        predicted = {c["name"]: c["zeromem"]["peak"] for c in json.load(open(sys.argv[2]))["cases"]}
        errors = [(abs(predicted[r["name"]] / r["peak"] - 1), r["name"]) for r in json.load(open(sys.argv[3]))["cases"]
                  if r.get("peak") and not r.get("oom") and r["name"] in predicted and r.get("base_bytes", 0) > 0]
        worst = sorted((e for e in errors if e[0] * 100 > float(sys.argv[4])), reverse=True)
        print(" ".join(n for _, n in worst[:int(sys.argv[5]) if len(sys.argv) > 5 else 8]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
