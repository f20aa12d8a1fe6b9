"""Writes the calibration set's JSON shape (tests/data/calibration/*.json) from what the measuring scripts wrote.
usage: python3 to_calibration.py OUT.json --hf hf_measured.json [--fsdp fsdp_fake.jsonl] [--anatomy anatomy.json]
                                 --driver VERSION --date YYYY-MM-DD
Cases that raised anything but out-of-memory (no `peak`) are left out and named on stderr."""
import argparse
import json
import sys


def usable(cases, section):
    kept = []
    for c in cases:
        if "peak" in c and "oom" in c:
            kept.append(c)
        else:
            print(f"{section}: {c.get('name')} left out: {c.get('error', 'no peak recorded')}", file=sys.stderr)
    return kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hf", required=True, help="measure_hf.py's hf_measured.json (its info names the device)")
    ap.add_argument("--fsdp", help="fsdp_fake.py's fsdp_fake.jsonl")
    ap.add_argument("--anatomy", help="peak_anatomy.py's output")
    ap.add_argument("--driver", required=True, help="nvidia-smi's driver_version")
    ap.add_argument("--date", required=True)
    o = ap.parse_args()
    hf = json.load(open(o.hf))
    info = hf["info"]
    d = {"measured_on": {"device": info["device"], "device_total_bytes": info["total"], "driver": o.driver,
                         "torch": info["torch"], "transformers": info["transformers"],
                         "cuda_context_bytes": info["context_used"], "date": o.date}}
    d["phases"] = usable(hf["cases"], "phases")
    if o.anatomy:
        anatomy = json.load(open(o.anatomy))
        if "peft" in anatomy.get("info", {}):
            d["measured_on"]["peft"] = anatomy["info"]["peft"]
        d["anatomy"] = usable(anatomy["cases"], "anatomy")
    if o.fsdp:
        d["fsdp_rank0"] = usable([json.loads(line) for line in open(o.fsdp) if line.strip()], "fsdp_rank0")
    with open(o.out, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
