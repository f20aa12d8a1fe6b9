#!/usr/bin/env python3
"""`zeromem estimate --explain` held to its word: random training jobs that do not fit their card, and the change,
pair, three changes or GPU count --explain names, applied and estimated again. Each fix is applied twice: as printed,
to the command line, where the job has no DeepSpeed config (it must fit at the bytes and margin printed, to the
0.01 GiB shown), and as JSON `fixes[].set` says, to the command line and to the DeepSpeed config half the ZeRO
jobs carry (it must give the fix's bytes exactly; the config's batch keys are drawn numeric, "auto" or absent, so a
named micro-batch or GPU count must keep its train_batch_size); with --host-memory, drawn for 30% of them, it must
fit the node's host RAM too (a fifth of the ZeRO jobs offload their optimizer already, a third of ZeRO-3's to NVMe), and
with --nvme-capacity, drawn for half of those, the node's NVMe. For a GPU count, half as many data-parallel ranks
(where that is still more than the job's) must not fit; for two or three changes, or a GPU count with one or two, the
others without any one of them must not fit. Prints a summary; exits 1 on any mismatch.

usage: estimate_explain_fixes.py ZEROMEM [--jobs N] [--seed S]
"""
import argparse
import json
import random
import re
import shutil
import os
import subprocess
import sys
import tempfile

MODELS = ["qwen2.5-1.5b", "qwen2.5-7b", "llama-2-7b", "llama-3-8b", "llama-3-70b", "gemma-2-9b", "mixtral-8x7b", "pythia-1b"]
CARDS = ["8GiB", "16GiB", "24GiB", "40GiB", "48GiB", "80GiB"]
MARKERS = ["smallest change that fits: ", "two changes that fit together: ", "three changes that fit together: ",
           "the fewest GPUs that fit: ",
           "fewer GPUs with ", "the fewest GPUs that fit, with "]


def estimate(zeromem, flags):
    p = subprocess.run([zeromem, "estimate"] + flags, capture_output=True, text=True, timeout=120)
    if p.returncode not in (0, 2):
        raise SystemExit(f"exit {p.returncode}: {' '.join(flags)}\n{p.stderr}")
    return p.stdout if p.returncode == 0 else None


def fits(report):
    """Whether an estimate's JSON report fits: its GPU, and a node's host RAM (NVMe) where --host-memory (--nvme-capacity)
    gave one."""
    if report is None:
        return False
    j = json.loads(report)
    return j["verdict"]["fits"] and node_fits(j)


def node_fits(j):
    return j["per_node_host"].get("fits", True) and j["per_node_nvme"].get("fits", True)


def as_flags(flags):
    out = []
    for k, v in flags.items():
        out += [k] if v is None else [k, v]
    return out


def apply(base, change):
    """The flags of a change as --explain prints it, over the base's: parenthesised notes dropped, FSDP in place of
    --ddp taking --ddp away, later values replacing earlier ones."""
    flags = dict(base)
    if "(in place of --ddp" in change:
        flags.pop("--ddp", None)
        flags.pop("--gradient-as-bucket-view", None)
    words = re.sub(r"\([^()]*\)", " ", change).split()
    i = 0
    while i < len(words):
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            flags[words[i]] = words[i + 1]
            i += 2
        else:
            flags[words[i]] = None
            i += 1
    return flags


def split_changes(text):
    """The changes of "A, B and C" (or "A and B"), split outside the parenthesised notes, which stay with their change."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        sep = next((x for x in (", ", " and ") if depth == 0 and text.startswith(x, i)), None)
        if sep:
            parts.append(text[start:i])
            i = start = i + len(sep)
        else:
            i += 1
    return parts + [text[start:]]


def random_config(rng, flags):
    """A DeepSpeed config for a ZeRO job, its batch keys numeric, "auto" or absent, and the flags it then takes."""
    stage = flags.pop("--zero-stage")
    flags.pop("--precision")
    micro, accum, dp = int(flags["--micro-batch"]), rng.choice([1, 2, 4]), int(flags["--dp"])
    config = {"bf16": {"enabled": True}, "zero_optimization": {}}
    if stage != "0" or rng.random() < 0.5:
        config["zero_optimization"]["stage"] = int(stage)
    if stage in ("1", "2") and rng.random() < 0.5:
        config["zero_optimization"]["overlap_comm"] = rng.random() < 0.7
    if flags.pop("--offload-optimizer", None):
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": False}
    batch = rng.choice(["auto", "all", "micro", "accum", "none"])
    if batch == "auto":  # Hugging Face Trainer fills them from its arguments: the micro-batch from --micro-batch
        config.update(train_batch_size="auto", train_micro_batch_size_per_gpu="auto", gradient_accumulation_steps="auto")
        if accum > 1:
            flags["--grad-accum-steps"] = str(accum)
        return config
    del flags["--micro-batch"]
    if batch == "none":
        config["train_micro_batch_size_per_gpu"] = micro
        return config
    config["train_batch_size"] = micro * accum * dp
    if batch in ("all", "micro"):
        config["train_micro_batch_size_per_gpu"] = micro
    if batch in ("all", "accum"):
        config["gradient_accumulation_steps"] = accum
    if batch == "all" and rng.random() < 0.5:
        del flags["--dp"]  # DeepSpeed derives it from the other three
    return config


def random_job(rng):
    """The flags of a random job, and a DeepSpeed config for some ZeRO jobs (None for the others)."""
    flags = {"--model": rng.choice(MODELS), "--seq-len": str(rng.choice([512, 1024, 2048, 4096, 8192])),
             "--micro-batch": str(rng.choice([1, 2, 4, 8])), "--gpu-memory": rng.choice(CARDS)}
    dp = rng.choice([1, 2, 4, 8])
    flags["--dp"] = str(dp)
    sharding = rng.choice(["none", "zero", "fsdp", "ddp"])
    if sharding == "zero":
        flags["--zero-stage"] = str(rng.choice([0, 1, 2, 3]))
        if flags["--zero-stage"] != "0" and rng.random() < 0.2:
            flags["--offload-optimizer"] = "nvme" if flags["--zero-stage"] == "3" and rng.random() < 0.3 else "cpu"
    elif sharding == "fsdp" and dp > 1:
        flags["--fsdp"] = rng.choice(["FULL_SHARD", "SHARD_GRAD_OP"])
    elif sharding == "ddp" and dp > 1:
        flags["--ddp"] = None
    flags["--precision"] = rng.choice(["mixed-bf16", "bf16", "amp-bf16"])
    if rng.random() < 0.3:
        flags["--recompute"] = "full"
    if rng.random() < 0.2:
        flags["--lora-rank"] = "16"
        flags["--lora-targets"] = "q_proj,v_proj"
    if rng.random() < 0.3:  # a node's host RAM, which offloading fixes must fit
        flags["--host-memory"] = rng.choice(["128GB", "256GB", "512GB", "1TB", "2TB"])
        if rng.random() < 0.5:  # and its NVMe, which fixes to NVMe must fit
            flags["--nvme-capacity"] = rng.choice(["500GB", "1TB", "2TB", "4TB"])
    config = random_config(rng, flags) if sharding == "zero" and rng.random() < 0.5 else None
    return flags, config


def applied_settings(flags, config, settings):
    """The flags and config with a fix's JSON `set` made: a flag's value (a switch: True adds it, False drops it), or
    a config key (dotted, as DeepSpeed nests it) set to its value."""
    flags, config = dict(flags), json.loads(json.dumps(config))
    for s in settings:
        if "config" in s:
            *path, last = s["key"].split(".")
            node = config
            for k in path:
                node = node.setdefault(k, {})
            node[last] = s["value"]
        elif s["value"] is True:
            flags[s["flag"]] = None
        elif s["value"] is False:
            flags.pop(s["flag"], None)
        else:
            flags[s["flag"]] = s["value"]
    return flags, config


def with_config(flags, config, directory, name):
    """The flags with the config written to a file named as the job's (--explain names the config's file)."""
    if config is None:
        return as_flags(flags)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(config, f)
    return as_flags(flags) + ["--deepspeed-config", path]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("zeromem")
    ap.add_argument("--jobs", type=int, default=80)
    ap.add_argument("--seed", type=int, default=20261206)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    counts = dict(jobs=0, configs=0, config_fixes=0, batch_kept=0, offloads=0, to_nvme=0, nvme_given=0, node_short=0, refused=0, fit=0, named=0, threes=0, gpu_pairs=0, fewer=0, gpu_counts=0, nothing=0, wrong=0)
    directory = tempfile.mkdtemp(prefix="zeromem-explain-")
    for _ in range(a.jobs):
        base, config = random_job(rng)
        counts["jobs"] += 1
        counts["configs"] += config is not None
        counts["nvme_given"] += "--nvme-capacity" in base
        job = with_config(base, config, directory, "ds.json")
        got = estimate(a.zeromem, job + ["--explain", "--json"])
        if got is None:
            counts["refused"] += 1
            continue
        report = json.loads(got)
        out = report["explain"]
        counts["node_short"] += "DOES NOT FIT" in out
        if "-> fits\n" in out and "DOES NOT FIT" not in out:  # the GPU, and a node's host RAM and NVMe where given
            counts["fit"] += 1
            continue
        lines = [l.strip() for l in out.splitlines() if any(l.strip().startswith(m) for m in MARKERS)]
        if not lines:
            counts["nothing"] += 1
            continue
        if len(report["fixes"]) != len(lines):
            counts["wrong"] += 1
            print(f"WRONG {' '.join(job)}: {len(lines)} fixes printed, {len(report['fixes'])} in JSON")
            continue
        for line, fix in zip(lines, report["fixes"]):
            counts["named"] += 1
            counts["threes"] += fix["kind"] == "three changes"
            counts["gpu_pairs"] += fix["kind"] == "gpus with two changes"
            counts["offloads"] += any(st["flag"].startswith("--offload") for st in fix["set"])
            counts["to_nvme"] += any(st["value"] == "nvme" for st in fix["set"])
            flags, changed = applied_settings(base, config, fix["set"])
            got = estimate(a.zeromem, with_config(flags, changed, directory, "ds.json.fixed") + ["--json"])
            verdict = json.loads(got)["verdict"] if got else None
            if not verdict or not verdict["fits"] or (verdict["needed_bytes"], verdict["margin_bytes"]) != (fix["needed_bytes"], fix["margin_bytes"]) \
                    or not node_fits(json.loads(got)):
                counts["wrong"] += 1
                print(f"WRONG {' '.join(job)} {config}: {fix['set']} gives {verdict}, not {fix}")
            if config is not None:
                counts["config_fixes"] += 1
                counts["batch_kept"] += isinstance(config.get("train_batch_size"), int) and any(
                    st["flag"] in ("--micro-batch", "--dp") for st in fix["set"])
                continue
            m = re.match(r"(.*) -> ([0-9.]+ GiB) \(margin ([0-9.-]+ GiB)\)$", line)
            marker = next(k for k in MARKERS if line.startswith(k))
            told = m.group(1)[len(marker):]
            if marker in ("fewer GPUs with ", "the fewest GPUs that fit, with "):
                change, gpus = told.split(": ", 1)
                changes = split_changes(change) + [gpus]
            elif marker in ("two changes that fit together: ", "three changes that fit together: "):
                changes = split_changes(told)
            else:
                changes = [told]
            flags = base
            for c in changes:
                flags = apply(flags, c)
            got = estimate(a.zeromem, as_flags(flags) + ["--json"])
            verdict = json.loads(got)["verdict"] if got else None
            gib = lambda b: f"{b / 2**30:.2f} GiB"
            if not verdict or not verdict["fits"] or (gib(verdict["needed_bytes"]), gib(verdict["margin_bytes"])) != (m.group(2), m.group(3)) \
                    or not node_fits(json.loads(got)):
                counts["wrong"] += 1
                print(f"WRONG {' '.join(as_flags(base))}: {line} gives {verdict}")
            if len(changes) > 1:
                for left_out in range(len(changes)):  # each part is needed (a GPU count too): the others without it do not fit
                    rest = base
                    for i, c in enumerate(changes):
                        rest = rest if i == left_out else apply(rest, c)
                    counts["fewer"] += 1
                    fewer = estimate(a.zeromem, as_flags(rest) + ["--json"])
                    if fits(fewer):
                        counts["wrong"] += 1
                        print(f"WRONG {' '.join(as_flags(base))}: {line}, but fits without {changes[left_out]}")
            if "--dp" in changes[-1] and "GPUs" in marker:
                counts["gpu_counts"] += 1
                half = int(flags["--dp"]) // 2
                if half > int(base["--dp"]):
                    fewer = estimate(a.zeromem, as_flags(dict(flags, **{"--dp": str(half)})) + ["--json"])
                    if fits(fewer):
                        counts["wrong"] += 1
                        print(f"WRONG {' '.join(as_flags(base))}: {line}, but --dp {half} fits too")
    shutil.rmtree(directory)
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    return 1 if counts["wrong"] or counts["named"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
