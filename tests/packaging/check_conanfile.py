"""Checks the Conan recipe without a Conan client (none can be installed here): the recipe is loaded with
stand-ins for the three conan modules it imports, and its set_version() must read the version that
include/zeromem/core/version.hpp, CMake's project() and the vcpkg port all carry."""
import importlib.util
import json
import os
import re
import sys
import types

root = sys.argv[1]


def stub_modules():
    conan = types.ModuleType("conan")

    class ConanFile:  # the attributes the recipe touches
        recipe_folder = root

    conan.ConanFile = ConanFile
    files = types.ModuleType("conan.tools.files")
    files.load = lambda _self, path: open(path, encoding="utf-8").read()
    files.copy = lambda *a, **k: None
    layout = types.ModuleType("conan.tools.layout")
    layout.basic_layout = lambda *a, **k: None
    tools = types.ModuleType("conan.tools")
    for name, mod in {"conan": conan, "conan.tools": tools, "conan.tools.files": files,
                      "conan.tools.layout": layout}.items():
        sys.modules[name] = mod


stub_modules()
spec = importlib.util.spec_from_file_location("zeromem_conanfile", os.path.join(root, "conanfile.py"))
recipe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recipe)

conanfile = recipe.ZeromemConan()
conanfile.set_version()

header = open(os.path.join(root, "include/zeromem/core/version.hpp"), encoding="utf-8").read()
parts = [re.search(rf"#define ZEROMEM_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
header_version = ".".join(parts)
string_version = re.search(r'#define ZEROMEM_VERSION_STRING "([^"]+)"', header).group(1)
vcpkg_version = json.load(open(os.path.join(root, "ports/zeromem/vcpkg.json"), encoding="utf-8"))["version"]

versions = {"MAJOR.MINOR.PATCH macros": header_version, "ZEROMEM_VERSION_STRING": string_version,
            "conanfile set_version()": conanfile.version, "ports/zeromem/vcpkg.json": vcpkg_version}
print("\n".join(f"{k}: {v}" for k, v in versions.items()))
if len(set(versions.values())) != 1:
    sys.exit("zeromem: versions disagree")
assert conanfile.package_type == "header-library", "the recipe must declare a header library"
assert os.path.isfile(os.path.join(root, "test_package", "conanfile.py")), "test_package/conanfile.py missing"
print("conanfile: OK")
