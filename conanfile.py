# Conan 2 recipe for zeromem, a header-only library. The version is read from include/zeromem/core/version.hpp.
import os
import re

from conan import ConanFile
from conan.tools.files import copy, load
from conan.tools.layout import basic_layout

required_conan_version = ">=2.0"


def read_version(folder):
    """The version string from include/zeromem/core/version.hpp under folder."""
    text = load(None, os.path.join(folder, "include", "zeromem", "core", "version.hpp"))
    match = re.search(r'#define ZEROMEM_VERSION_STRING "(\d+\.\d+\.\d+)"', text)
    if not match:
        raise ValueError("zeromem: ZEROMEM_VERSION_STRING not found in include/zeromem/core/version.hpp")
    return match.group(1)


class ZeromemConan(ConanFile):
    name = "zeromem"
    description = "Bytes per GPU, host RAM and NVMe of LLM training, inference and RLHF jobs, before launch"
    license = "MIT"
    topics = ("memory", "llm", "deepspeed", "zero", "units", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "include/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        self.version = read_version(self.recipe_folder)

    def requirements(self):
        # Boost.Units is header-only; zeromem needs only Boost's headers. nlohmann_json is for the hf_config
        # component (the config.json reader) only.
        self.requires("boost/[>=1.74 <2]", options={"header_only": True})
        self.requires("nlohmann_json/[>=3.2 <4]")

    def layout(self):
        basic_layout(self, src_folder=".")

    def package_id(self):
        self.info.clear()

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, "*.hpp", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.set_property("cmake_file_name", "zeromem")
        # Two components, as the CMake package has them: the library (zeromem::zeromem) and the optional config.json
        # reader (find_package(zeromem COMPONENTS hf_config) -> zeromem::hf_config, which brings nlohmann_json).
        # The root target aggregates both; consumers link the component they use.
        self.cpp_info.set_property("cmake_target_name", "zeromem::all")
        core = self.cpp_info.components["zeromem"]
        core.set_property("cmake_target_name", "zeromem::zeromem")
        core.set_property("pkg_config_name", "zeromem")
        core.bindirs = []
        core.libdirs = []
        core.requires = ["boost::headers"]
        hf = self.cpp_info.components["hf_config"]
        hf.set_property("cmake_target_name", "zeromem::hf_config")
        hf.bindirs = []
        hf.libdirs = []
        hf.requires = ["zeromem", "nlohmann_json::nlohmann_json"]
