#!/usr/bin/env python3
"""No public function of include/zeromem takes or returns a detail:: type: internals stay in the one `detail`
namespace (no units_detail, detail_ds, ...), and what an embedder can call names only public types. Only declarations at namespace or class scope
outside `detail` are read. Prints each offender; exits 1 if any."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
declaration = re.compile(r"^\s*(template\s*<.*>\s*)?((inline|constexpr|static|explicit|friend)\s+)*[\w:<>,&* ]+?\s+[\w:~]+\s*\(")
offenders = []


def code_of(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)  # string literals
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


for header in sorted(root.rglob("*.hpp")):
    lines = header.read_text().split("\n")
    stack = []  # ("ns", is_detail) | ("class", False) | ("block", False)
    i = 0
    while i < len(lines):
        code = code_of(lines[i])
        at_scope = all(kind != "block" for kind, _ in stack)
        in_detail = any(detail for _, detail in stack)
        if at_scope and not in_detail and declaration.match(code) and not code.strip().startswith(("return", "static_assert", "using")):
            text, j = code, i  # the whole signature: up to the body or the end of the declaration
            while "{" not in text and ";" not in text and j + 1 < len(lines):
                j += 1
                text += " " + code_of(lines[j]).strip()
            head, _, rest = text.partition("(")
            depth, end = 1, 0
            while end < len(rest) and depth:  # the parameter list ends at its matching parenthesis
                depth += {"(": 1, ")": -1}.get(rest[end], 0)
                end += 1
            params = re.sub(r"=[^,]*", "", rest[: end - 1])  # default arguments may call detail helpers
            if re.search(r"(^|[(,])\s*(const\s+)?detail::", params) or "detail::" in head:
                offenders.append(f"{header.name}:{i + 1}: {lines[i].strip()}")
        for spelled in re.findall(r"namespace\s+([\w:]+)", code):
            if any("detail" in part and part != "detail" for part in spelled.split("::")):
                offenders.append(f"{header.name}:{i + 1}: internals go in `detail`, not `{spelled}`")
        for match in re.finditer(r"namespace\s+([\w:]+)\s*\{|\b(struct|class|union|enum(\s+class)?)\s+\w+[^;{]*\{|\{|\}", code):
            token = match.group(0)
            if token == "}":
                if stack:
                    stack.pop()
            elif match.group(1):
                stack.append(("ns", match.group(1).split("::")[-1] == "detail"))
            elif match.group(2):
                stack.append(("class", False))
            else:
                stack.append(("block", False))
        i += 1
# Layers, bottom up: a header includes only its own layer's and lower layers' headers.
layers = ["core", "model", "training", "inference", "engines", "jobs", "report"]
for header in sorted(root.rglob("*.hpp")):
    own = header.parent.name
    if own not in layers:
        continue
    for used in re.findall(r'#include "zeromem/(\w+)/', header.read_text()):
        if used not in layers or layers.index(used) > layers.index(own):
            offenders.append(f"{own}/{header.name} includes a header of the {used} layer, above its own")
for o in offenders:
    print(o)
print(f"{len(offenders)} offences: public signatures naming a detail:: type, internals outside `detail`, layers included upward")
sys.exit(1 if offenders else 0)
