#!/usr/bin/env python3
"""`zeromem job --explain` held to its word: random launches of the example jobs (a GPU, forward and update sizes,
verl's critic update and a reward model of its own),
each fix it names applied to the launch and the job run again. A fix said to fit must make every phase fit and one
said not to must not, and its JSON `set`, applied as a program would apply it, must give the same job to the byte;
where two or three changes are named together, no single fix may fit, nor any of those changes without one of the
others; where more nodes fit, half as many must not. Prints a summary; exits 1 on any mismatch.

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


def overrides_of_set(settings):
    """A fix's JSON `set` as overrides: a zeromem setting and its value; an OpenRLHF flag as key=value (a switch key=);
    a verl or EasyR1 key as key=value. Values as JSON writes them (true, 0.8), strings as they are."""
    text = lambda v: v if isinstance(v, str) else json.dumps(v)
    out = []
    for s in settings:
        if "setting" in s:
            out += [s["setting"], text(s["value"])]
        elif "flag" in s:
            out.append(s["flag"][2:] + "=" + ("" if s["value"] is True else text(s["value"])))
        else:
            out.append(s["key"] + "=" + text(s["value"]))
    return out


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


def is_nodes(key):
    return key.endswith("num_nodes") or key == "trainer.nnodes"


def halved_nodes(overrides):
    """A more-GPUs fix with its node and engine counts halved; None where it sets anything else (a batch size that
    follows the factor) or a count that does not halve."""
    out = []
    for o in overrides:
        key, _, value = o.partition("=")
        if not (is_nodes(key) or key.endswith("num_engines")) or int(value) % 2:
            return None
        out.append(f"{key}={int(value) // 2}")
    return out if any(is_nodes(o.partition("=")[0]) for o in out) else None


def launch(rng, jobs):
    name = rng.choice(sorted(os.listdir(jobs)))
    size = rng.choice([1, 2, 4, 8, 16, 32])
    extra = ["--gpu", rng.choice(GPUS)]
    if name.endswith(".args"):
        extra.append(rng.choice(["micro_rollout_batch_size", "micro_train_batch_size"]) + f"={size}")
    elif name.startswith("easyr1"):
        extra.append(rng.choice(["worker.actor.micro_batch_size_per_device_for_experience",
                                 "worker.actor.micro_batch_size_per_device_for_update"]) + f"={size}")
    else:
        if rng.random() < 0.5:
            for role in ("rollout", "ref"):
                extra += [f"actor_rollout_ref.{role}.log_prob_micro_batch_size=null",
                          f"actor_rollout_ref.{role}.log_prob_micro_batch_size_per_gpu={size * 8}"]
        if "ppo" in name and rng.random() < 0.3:  # the critic's update: its micro-batch, or its token budget
            extra.append(f"critic.ppo_max_token_len_per_gpu={size * 4096}" if "sglang" in name
                         else f"critic.ppo_micro_batch_size={size * 8}")
        if rng.random() < 0.3:  # a reward model of its own, with its forward's micro-batch
            extra += ["reward_model.enable=True", "reward_model.model.path=Qwen/Qwen2.5-7B",
                      f"reward_model.micro_batch_size_per_gpu={rng.choice([1, 4, 16, 64, 256])}"]
    return name, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("zeromem")
    ap.add_argument("jobs")
    ap.add_argument("--launches", type=int, default=60)
    ap.add_argument("--seed", type=int, default=20261206)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    counts = dict(launches=0, refused=0, breaking=0, fixes=0, sets=0, pairs=0, triples=0, fewer=0, halved=0, wrong=0)
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
            counts["pairs" if len(fixes[-1]["together"]) == 2 else "triples"] += 1
            if any(f["fits"] for f in fixes if "together" not in f):
                counts["wrong"] += 1
                print(f"WRONG {name} {' '.join(extra)}: changes named together where a single change fits")
        openrlhf = name.endswith(".args")
        for f in fixes:
            counts["fixes"] += 1
            again = run(a.zeromem, [path] + extra + overrides_of(f["change"], openrlhf))
            if again is None or again["fits"] != f["fits"]:
                counts["wrong"] += 1
                print(f"WRONG {name} {' '.join(extra)}: {f['change']} said {f['fits']}, "
                      f"gives {'refused' if again is None else again['fits']}")
            counts["sets"] += 1
            by_set = run(a.zeromem, [path] + extra + overrides_of_set(f["set"]))
            if by_set is None or again is None or by_set["phases"] != again["phases"]:
                counts["wrong"] += 1
                print(f"WRONG {name} {' '.join(extra)}: {f['change']} set as {f['set']} gives another job")
            parts = f.get("together", [])
            for left_out in range(len(parts)):  # the others without this one: refused or not fitting
                rest = [w for i, p in enumerate(parts) if i != left_out for w in overrides_of(p, openrlhf)]
                fewer = run(a.zeromem, [path] + extra + rest)
                counts["fewer"] += 1
                if fewer is not None and fewer["fits"]:
                    counts["wrong"] += 1
                    print(f"WRONG {name} {' '.join(extra)}: {f['change']} named together, but fits without {parts[left_out]}")
            half = halved_nodes(overrides_of(f["change"], openrlhf)) if f["fits"] and not parts else None
            if half is not None:
                counts["halved"] += 1
                fewer = run(a.zeromem, [path] + extra + half)
                if fewer is not None and fewer["fits"]:
                    counts["wrong"] += 1
                    print(f"WRONG {name} {' '.join(extra)}: {f['change']} named as the fewest nodes, but {' '.join(half)} fits")
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    return 1 if counts["wrong"] or counts["fixes"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
