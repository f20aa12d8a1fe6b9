"""The SVG charts are well-formed XML and carry the numbers they show; with RSVG_CONVERT given, each is also
rendered by librsvg (as an image viewer or browser would) to a PNG of the SVG's own size with something drawn.

usage: python3 check_svg.py ZEROMEM_BINARY WORK_DIR [RSVG_CONVERT]
"""
import json
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

binary, work = sys.argv[1], sys.argv[2]
rsvg = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(work, exist_ok=True)
NS = "{http://www.w3.org/2000/svg}"


def texts(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == NS + "svg", root.tag
    return [t.text for t in root.iter(NS + "text") if t.text]


def rendered(svg):
    """Renders with librsvg; returns a failure message or None."""
    png = svg[:-4] + ".png"
    r = subprocess.run([rsvg, "--format", "png", "--output", png, svg], capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        return f"librsvg could not render it: {r.stderr.strip()}"
    data = open(png, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "librsvg wrote no PNG"
    width, height = struct.unpack(">II", data[16:24])
    root = ET.parse(svg).getroot()
    want = (int(float(root.get("width"))), int(float(root.get("height"))))
    if (width, height) != want:
        return f"rendered {width}x{height}, the SVG says {want[0]}x{want[1]}"
    idat, i = b"", 8
    while i < len(data):
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        if kind == b"IDAT":
            idat += data[i + 8:i + 8 + length]
        i += 12 + length
    if len(set(zlib.decompress(idat))) < 16:  # a blank or one-colour image has a handful of byte values
        return "the rendered image is (nearly) blank"
    return None


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

svg = os.path.join(work, "estimate.svg")
est = json.loads(subprocess.run([binary, "estimate", "--model", "qwen2.5-7b", "--zero-stage", "2", "--dp", "8", "--seq-len", "4096",
                                 "--gpu", "a100-80gb", "--json", "--svg", svg], check=True, capture_output=True, text=True).stdout)
shown = texts(svg)
# The tallest bar is the step's peak as the verdict sees it (reserved + CUDA context), under the capacity line.
if gib(est["verdict"]["needed_bytes"]) not in shown or "capacity " + gib(est["verdict"]["capacity_bytes"]) not in shown:
    print("FAIL estimate: the peak phase's bar is not the verdict's needed bytes, or the capacity is missing")
    failures += 1
else:
    print(f"ok   estimate: peak bar {gib(est['verdict']['needed_bytes'])} = the verdict's needed bytes, capacity shown")

# No left-aligned label runs past the right edge (7 px per character bounds 12 px sans-serif).
for name in ["orz-1.5b-ppo", "logic-rl-7b-grpo", "openrlhf-70b-ppo", "easyr1-vl-7b-grpo", "plan", "estimate"]:
    root = ET.parse(os.path.join(work, name + ".svg")).getroot()
    width = float(root.get("width"))
    for t in root.iter(NS + "text"):
        if t.text and t.get("text-anchor") is None and t.get("x") is not None and float(t.get("x")) + 7 * len(t.text) > width:
            print(f"FAIL {name}.svg: '{t.text}' at x={t.get('x')} runs past the width {width:.0f}")
            failures += 1
charts = [os.path.join(work, n + ".svg") for n in ["orz-1.5b-ppo", "logic-rl-7b-grpo", "openrlhf-70b-ppo", "easyr1-vl-7b-grpo", "plan",
                                                    "estimate"]]
if rsvg:
    for chart in charts:
        problem = rendered(chart)
        if problem:
            print(f"FAIL {os.path.basename(chart)}: {problem}")
            failures += 1
        else:
            print(f"ok   {os.path.basename(chart)}: rendered by librsvg to {os.path.basename(chart)[:-4]}.png")
print(f"svg: {failures} failed" if failures else "svg: all checks passed")
sys.exit(1 if failures else 0)
