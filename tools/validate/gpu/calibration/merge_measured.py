"""Joins per-case measurement files ({info, cases}, as random_steps.py measure-fsdp --only writes them) into one, in
the order of the cases file.  usage: python3 merge_measured.py CASES.json OUT.json PART.json ..."""
import json
import sys


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    order = [c["name"] for c in json.load(open(sys.argv[1]))["cases"]]
    parts = [json.load(open(p)) for p in sys.argv[3:]]
    cases = {c["name"]: c for p in parts for c in p["cases"]}
    merged = {"info": parts[0]["info"], "cases": [cases[n] for n in order if n in cases]}
    with open(sys.argv[2], "w") as f:
        json.dump(merged, f, indent=1)
    print(f"{len(merged['cases'])} of {len(order)} cases measured")


if __name__ == "__main__":
    main()
