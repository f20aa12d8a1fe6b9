#!/usr/bin/env python3
"""A hostile run of the zeromem program: every flag of every subcommand with hostile values, the reproducers of
past crashes, hangs and silent clamps, and random flag combinations. Each invocation must exit 0 (empty stderr) or
2 (stdout empty, exactly one stderr line "zeromem: ...", at most 600 characters), within the time limit, with no
sanitizer report. Inputs that must be refused are checked to be refused. Prints one table; exits 1 on any failure.

usage: hostile.py ZEROMEM [--random N] [--seed S] [--timeout SECONDS] [--jobs J]
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

I64_MAX = str(2**63 - 1)
HOSTILE = ["", " ", "0", "-0", "1", "-1", "-5", "3", "1.5", "1e3", "32K", "7B", "abc", "0x10", "+7", "1,000",
           I64_MAX, str(2**63), str(-2**63), str(-2**63 - 1), "9" * 40, "nan", "inf", "-inf", "1e308",
           "x" * 100_000, "\x01\x02", "\u00e9\u4e2d", "80GiB", "-80GB", "9223372036854775807B", "/dev/zero"]

# A valid base command per subcommand: hostile values are tried one flag at a time on top of it.
BASES = {
    "estimate": ["estimate", "--model", "llama-2-7b", "--seq-len", "512"],
    "kv": ["kv", "--model", "llama-2-7b", "--tokens", "4096"],
    "plan": ["plan", "--model", "qwen2.5-1.5b", "--gpu", "h100-80gb", "--seq-len", "512", "--gpus", "2"],
    "deepspeed": ["deepspeed", "zero3", "--params", "2B", "--largest-layer-params", "100M"],
    "scenario": ["scenario", "orz-1.5b-ppo"],
}

# Reproducers from the reliability issue, each of which once crashed, hung, ran out of memory or clamped silently.
MUST_REJECT = [
    ["plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--gpus", "4611686018427387904", "--seq-len", "128", "--global-batch", "1"],
    ["estimate", "--params", "7B", "--dp", "9223372036854775808"],
    ["estimate", "--params", "7B", "--dp", "-9223372036854775809"],
    ["plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--top", "-1"],
    ["plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--top", "0"],
    ["plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--host-memory", "0B"],
    ["estimate", "--params", "7B", "--zero-stage", "-5"],
    ["estimate", "--model", "llama-2-7b", "--seq-len", "0"],
    ["estimate", "--model", "llama-2-7b", "--seq-len", ""],
    ["estimate", "--model", "llama-2-7b", "--layers", "3", "--heads", "7"],
    ["kv", "--model", "llama-2-7b", "--layers", "3", "--tokens", "10"],
    ["estimate", "--model", "llama-2-7b", "--tp", "64"],
    ["estimate", "--model", "llama-2-7b", "--tp", "1099511627776"],
    ["kv", "--heads", "32", "--tp", "3", "--layers", "2", "--hidden", "4096", "--tokens", "10"],
    ["kv", "--heads", "32", "--kv-heads", "5", "--layers", "2", "--hidden", "4096", "--tokens", "10"],
    ["estimate", "--params", "7B", "--dp", "100000000000", "--zero-stage", "3"],
    ["estimate", "--params", "7B", "--offload-optimizer", "cpu"],
    ["estimate", "--hf-config", "/dev/zero"],
    ["estimate", "--params", "7B", "--pin-memory"],
    # transformers 5's 3D experts are no nn.Linear: neither LoRA nor bitsandbytes reaches them
    ["estimate", "--model", "mixtral-8x7b", "--lora-rank", "8", "--lora-targets", "q_proj,gate_proj,down_proj", "--quantize", "int8",
     "--seq-len", "1024"],
    ["estimate", "--model", "llama-2-7b", "--expert-linears"],
]
MUST_RUN = [
    ["plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--gpus", "1", "--seq-len", "128", "--global-batch", "1",
     "--max-micro-batch", I64_MAX],
    ["estimate", "--params", "100T", "--svg", "huge.svg"],
    ["estimate", "--params", "500T", "--svg", "huge.svg"],
    ["estimate", "--model", "llama-3-70b", "--fsdp", "HYBRID_SHARD", "--dp", "64", "--seq-len", "4096", "--recompute", "full",
     "--gpu", "a100-80gb", "--explain"],
    ["kv", "--model", "llama-2-7b", "--tokens", "32K"],
    ["estimate", "--model", "qwen2.5-vl-7b", "--precision", "bf16", "--lora-rank", "64", "--lora-targets", "all-linear",
     "--lora-dropout", "0.05", "--quantize", "nf4", "--paged-optimizer", "--seq-len", "2048", "--gpu-memory", "24GiB", "--explain"],
    ["estimate", "--model", "mixtral-8x7b", "--expert-linears", "--lora-rank", "8", "--lora-targets", "q_proj,gate_proj,down_proj",
     "--quantize", "int8", "--seq-len", "1024", "--tp", "2", "--pp", "2", "--zero-stage", "1", "--dp", "2"],
    ["estimate", "--model", "qwen2.5-vl-7b", "--freeze", "vision,embeddings", "--fsdp", "FULL_SHARD", "--dp", "8", "--seq-len", "4096"],
    ["estimate", "--model", "qwen2.5-7b", "--forward-only", "--seq-len", "8192", "--micro-batch", "4", "--forward-output", "log-probs",
     "--quantize", "nf4", "--gpu", "a100-40gb"],
    ["plan", "--model", "llama-3-8b", "--gpu-memory", "24GiB", "--gpus", "1", "--seq-len", "2048", "--allow-lora", "--lora-rank", "8"],
]


def flags_of(program, sub):
    text = subprocess.run([program, sub, "--help"], capture_output=True, text=True, check=True).stdout
    return sorted(set(re.findall(r"^\s+(--[a-z0-9-]+)", text, re.M)) - {"--help"})


def run(program, args, timeout, cwd):
    try:
        p = subprocess.run([program] + args, capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "hang", ""
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer", err[:300]
    if p.returncode < 0 or p.returncode not in (0, 2):
        return "crash", f"exit {p.returncode}: {err[:300]}"
    if p.returncode == 0:
        return ("ok", "") if err == "" else ("bad-error", f"exit 0 with stderr: {err[:200]}")
    lines = err.count("\n")
    if out or lines != 1 or not err.startswith("zeromem: ") or len(err) > 600:
        return "bad-error", f"exit 2, {lines} lines, {len(err)} chars, stdout {len(out)}: {err[:200]}"
    return "rejected", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--random", type=int, default=600)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    a.program = os.path.abspath(a.program)

    cases = []  # (args, expectation: None | "reject" | "run")
    flags = {sub: flags_of(a.program, sub) for sub in BASES}
    boolean = {"--json", "--explain", "--sp", "--pin-memory", "--fp32-grad-copy", "--tied-embeddings", "--qkv-bias", "--pre-2024",
               "--no-double-quant", "--paged-optimizer", "--allow-lora", "--ddp", "--gradient-as-bucket-view", "--forward-only", "--no-cache",
               "--expert-linears"}
    for sub, base in BASES.items():
        for flag in flags[sub]:
            if flag in boolean:
                cases.append((base + [flag], None))
                continue
            for value in HOSTILE:
                cases.append((base + [flag, value], None))
        cases.append((base + ["--no-such-flag"], "reject"))
        cases.append((base + ["x" * 100_000], "reject"))
    cases += [(c, "reject") for c in MUST_REJECT] + [(c, "run") for c in MUST_RUN]
    rng = random.Random(a.seed)
    for _ in range(a.random):
        sub = rng.choice(list(BASES))
        args = list(BASES[sub])
        for flag in rng.sample(flags[sub], k=min(len(flags[sub]), rng.randint(1, 4))):
            args += [flag] if flag in boolean else [flag, rng.choice(HOSTILE[:26])]
        cases.append((args, None))
    cases += [([], "reject"), (["nonsense"], "reject"), (["--help"], "run"), (["--version"], "run")]

    tally = {k: 0 for k in ("ok", "rejected", "crash", "hang", "sanitizer", "bad-error", "expectation")}
    failures = []
    with tempfile.TemporaryDirectory() as cwd, ThreadPoolExecutor(a.jobs) as pool:
        results = list(pool.map(lambda c: run(a.program, c[0], a.timeout, cwd), cases))
    for (args, expect), (kind, detail) in zip(cases, results):
        tally[kind] += 1
        shown = " ".join(x if len(x) < 40 else x[:20] + f"...({len(x)} chars)" for x in args)
        if kind not in ("ok", "rejected"):
            failures.append(f"{kind}: zeromem {shown}: {detail}")
        elif (expect == "reject" and kind != "rejected") or (expect == "run" and kind != "ok"):
            tally["expectation"] += 1
            failures.append(f"expected {expect}, got {kind}: zeromem {shown}")
    print(f"zeromem hostile run: {len(cases)} invocations (seed {a.seed})")
    print("| inputs tried | exit 0 | rejected cleanly (exit 2, one line) | crashes | hangs | sanitizer reports | malformed errors | expectations missed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(cases)} | {tally['ok']} | {tally['rejected']} | {tally['crash']} | {tally['hang']} | {tally['sanitizer']} | "
          f"{tally['bad-error']} | {tally['expectation']} |")
    for f in failures[:40]:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
