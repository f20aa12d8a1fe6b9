#!/usr/bin/env python3
"""`zeromem job --explain` held to its word: random launches of the example jobs (a GPU, forward and update sizes),
each fix it names applied to the launch and the job run again. A fix said to fit must make every phase fit and one
said not to must not; where a pair is named, no single fix may fit. Prints a summary; exits 1 on any mismatch.

usage: explain_fixes.py ZEROMEM JOBS_DIR [--launches N] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys

GPUS = ["a100-40gb", "a100-80gb", "h100-80gb", "h200", "l40s"]


def run(zeromem, args):
    p = subprocess.run([zeromem, "job"] + args + ["--json"], capture_output=True, text=True, timeout=120)
    if p.returncode not in (0, 2):
        raise SystemExit(f"exit {p.returncode}: {' '.join(args)}\n{p.stderr}")
    return json.loads(p.stdout) if p.returncode == 0 else None


def overrides_of(change, openrlhf):
    """A change as --explain shows it, as overrides: OpenRLHF's `--key value` / `--flag` as key=value / flag=; a
    zeromem setting (a hyphenated --flag value) as it is; verl's key=value as it is."""
    words, out, i = change.split(" "), [], 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "-" in w[2:]:  # a zeromem setting, such as --deepspeed-version 0.17.0
            out += [w, words[i + 1]]
            i += 2
        elif openrlhf and w.startswith("--"):
            bare = i + 1 == len(words) or words[i + 1].startswith("--")
            out.append(w[2:] + "=" + ("" if bare else words[i + 1]))
            i += 1 if bare else 2
        else:
            out.append(w)
            i += 1
    return out


def launch(rng, jobs):
    name = rng.choice(sorted(os.listdir(jobs)))
    size = rng.choice([1, 2, 4, 8, 16, 32])
    extra = ["--gpu", rng.choice(GPUS)]
    if name.endswith(".args"):
        extra.append(rng.choice(["micro_rollout_batch_size", "micro_train_batch_size"]) + f"={size}")
    elif name.startswith("easyr1"):
        extra.append(rng.choice(["worker.actor.micro_batch_size_per_device_for_experience",
                                 "worker.actor.micro_batch_size_per_device_for_update"]) + f"={size}")
    elif rng.random() < 0.5:
        for role in ("rollout", "ref"):
            extra += [f"actor_rollout_ref.{role}.log_prob_micro_batch_size=null",
                      f"actor_rollout_ref.{role}.log_prob_micro_batch_size_per_gpu={size * 8}"]
    return name, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("zeromem")
    ap.add_argument("jobs")
    ap.add_argument("--launches", type=int, default=60)
    ap.add_argument("--seed", type=int, default=20261206)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    counts = dict(launches=0, refused=0, breaking=0, fixes=0, pairs=0, wrong=0)
    for _ in range(a.launches):
        name, extra = launch(rng, a.jobs)
        path = os.path.join(a.jobs, name)
        counts["launches"] += 1
        j = run(a.zeromem, [path] + extra + ["--explain"])
        if j is None:
            counts["refused"] += 1
            continue
        if j["fits"]:
            continue
        counts["breaking"] += 1
        fixes = j["fixes"]
        if any("together" in f for f in fixes):
            counts["pairs"] += 1
            if any(f["fits"] for f in fixes if "together" not in f):
                counts["wrong"] += 1
                print(f"WRONG {name} {' '.join(extra)}: a pair named where a single change fits")
        for f in fixes:
            counts["fixes"] += 1
            again = run(a.zeromem, [path] + extra + overrides_of(f["change"], name.endswith(".args")))
            if again is None or again["fits"] != f["fits"]:
                counts["wrong"] += 1
                print(f"WRONG {name} {' '.join(extra)}: {f['change']} said {f['fits']}, "
                      f"gives {'refused' if again is None else again['fits']}")
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    return 1 if counts["wrong"] or counts["fixes"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
