"""The SVG charts are well-formed XML and carry the numbers they show.

usage: python3 check_svg.py ZEROMEM_BINARY WORK_DIR
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

binary, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
NS = "{http://www.w3.org/2000/svg}"


def texts(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == NS + "svg", root.tag
    return [t.text for t in root.iter(NS + "text") if t.text]


def gib(b):
    return f"{b / 2**30:.2f} GiB"


failures = 0
for scenario in ["orz-1.5b-ppo", "logic-rl-7b-grpo", "openrlhf-70b-ppo", "easyr1-vl-7b-grpo"]:
    svg = os.path.join(work, scenario + ".svg")
    data = json.loads(subprocess.run([binary, "scenario", scenario, "--json", "--svg", svg], check=True,
                                     capture_output=True, text=True).stdout)
    shown = texts(svg)
    for case in data["cases"]:
        want = gib(case["per_gpu"]["total_bytes"])
        if want not in shown:
            print(f"FAIL {scenario}: bar total {want} not in the SVG")
            failures += 1
    cap = "capacity " + gib(data["cases"][0]["per_gpu"]["capacity_bytes"])
    if cap not in shown:
        print(f"FAIL {scenario}: '{cap}' not in the SVG")
        failures += 1
    print(f"ok   {scenario}: {len(data['cases'])} bars, totals and capacity in the SVG")

svg = os.path.join(work, "plan.svg")
plan = json.loads(subprocess.run([binary, "plan", "--model", "llama-2-7b", "--gpu", "a100-80gb", "--seq-len", "4096", "--json",
                                  "--svg", svg], check=True, capture_output=True, text=True).stdout)
shown = texts(svg)
best = plan["configs"][0]
if gib(best["per_gpu_bytes"]) not in shown or "capacity " + gib(plan["capacity_bytes"]) not in shown:
    print("FAIL plan: the best configuration's per-GPU bytes or the capacity is not in the SVG")
    failures += 1
else:
    print(f"ok   plan: best configuration {gib(best['per_gpu_bytes'])} and capacity in the SVG")
print(f"svg: {6 - failures} passed, {failures} failed" if failures else "svg: all checks passed")
sys.exit(1 if failures else 0)
