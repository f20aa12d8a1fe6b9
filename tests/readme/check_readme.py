#!/usr/bin/env python3
"""Every example in README.md (or another markdown file of the project), as a new user would copy it.

- each ```cpp block is compiled as a whole program against include/ and run;
- each `zeromem ...` line of a ```sh or ```console block is run (optional parts in [brackets] once left out and
  once put in), from a scratch directory holding the config.json files the examples name; it must exit 0;
- the output a ```console block shows must be what the command prints, line for line.

usage: check_readme.py SOURCE_DIR ZEROMEM_BINARY CXX_COMPILER [MARKDOWN, relative to SOURCE_DIR; default README.md]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

source, binary, cxx = (os.path.abspath(a) if i < 2 else a for i, a in enumerate(sys.argv[1:4]))
document = sys.argv[4] if len(sys.argv) > 4 else "README.md"
readme = open(os.path.join(source, document), encoding="utf-8").read()
blocks = re.findall(r"^```(\w+)\n(.*?)^```", readme, flags=re.S | re.M)
failures = []
checked = {"cpp": 0, "commands": 0, "output lines": 0}

scratch = tempfile.mkdtemp(prefix="zeromem-readme-")
# The config.json files the examples name, as a user would have them next to their shell.
llama3 = os.path.join(source, "tests/data/calibration/configs/llama-3-8b/config.json")
os.makedirs(os.path.join(scratch, "llama-3-8b"))
shutil.copy(llama3, os.path.join(scratch, "llama-3-8b/config.json"))
shutil.copy(llama3, os.path.join(scratch, "config.json"))


def variants(command):
    """The command without its [optional] parts, and with all of them."""
    if "[" not in command:
        return [command]
    bare = re.sub(r"\s*\[[^\]]*\]", "", command)
    full = re.sub(r"\[([^\]]*)\]", r"\1", command)
    return [bare, full]


def run(command):
    argv = command.split()
    assert argv[0] == "zeromem"
    # Outputs go to a scratch directory; files the repository ships (examples/) are named from its root.
    argv = [os.path.join(source, a) if a.startswith("examples/") else a for a in argv]
    return subprocess.run([binary] + argv[1:], cwd=scratch, capture_output=True, text=True)


for kind, body in blocks:
    if kind == "cpp":
        checked["cpp"] += 1
        path = os.path.join(scratch, "readme_%d.cpp" % checked["cpp"])
        open(path, "w").write(body)
        exe = path[:-4]
        build = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(source, "include"), path, "-o", exe],
                               capture_output=True, text=True)
        if build.returncode != 0:
            failures.append("cpp block %d does not compile:\n%s" % (checked["cpp"], build.stderr[:2000]))
            continue
        ran = subprocess.run([exe], capture_output=True, text=True)
        if ran.returncode != 0:
            failures.append("cpp block %d exits %d" % (checked["cpp"], ran.returncode))
        # A trailing "// output" comment on a printf line states what it prints.
        for shown in re.findall(r"//\s*(.+ per GPU)$", body, flags=re.M):
            if shown.strip() not in ran.stdout:
                failures.append("cpp block %d prints %r, README says %r" % (checked["cpp"], ran.stdout.strip(), shown.strip()))
    elif kind in ("sh", "console"):
        lines = body.replace("\\\n", " ").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            i += 1
            command = line[2:] if line.startswith("$ ") else line
            command = command.split("  #")[0].strip()
            if not command.startswith("zeromem "):
                continue
            shown = []
            if kind == "console":
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
            for v in variants(command):
                checked["commands"] += 1
                r = run(v)
                if r.returncode != 0:
                    failures.append("%s\n  exits %d: %s" % (v, r.returncode, r.stderr.strip()))
                    continue
                printed = r.stdout.splitlines()
                for s in shown:
                    checked["output lines"] += 1
                    if s not in printed:
                        failures.append("%s\n  README shows a line it does not print:\n  %s" % (v, s))

shutil.rmtree(scratch)
print("%s: %d cpp blocks, %d commands, %d output lines checked" % (document, checked["cpp"], checked["commands"], checked["output lines"]))
for f in failures:
    print("FAIL " + f)
# The README has both kinds of example; another document at least one.
if (document == "README.md" and (checked["cpp"] == 0 or checked["commands"] == 0)) or checked["cpp"] + checked["commands"] == 0:
    print("FAIL: no examples found in " + document)
    sys.exit(1)
sys.exit(1 if failures else 0)
