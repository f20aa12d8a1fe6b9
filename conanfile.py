# Conan 2 recipe for zeromem, a header-only library. The version is read from include/zeromem/version.hpp.
import os
import re

from conan import ConanFile
from conan.tools.files import copy, load
from conan.tools.layout import basic_layout

required_conan_version = ">=2.0"


def read_version(folder):
    """The version string from include/zeromem/version.hpp under folder."""
    text = load(None, os.path.join(folder, "include", "zeromem", "version.hpp"))
    match = re.search(r'#define ZEROMEM_VERSION_STRING "(\d+\.\d+\.\d+)"', text)
    if not match:
        raise ValueError("zeromem: ZEROMEM_VERSION_STRING not found in include/zeromem/version.hpp")
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
        # Boost.Units is header-only; zeromem needs only Boost's headers.
        self.requires("boost/[>=1.74 <2]", options={"header_only": True})

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
        self.cpp_info.set_property("cmake_target_name", "zeromem::zeromem")
        self.cpp_info.set_property("pkg_config_name", "zeromem")
        self.cpp_info.requires = ["boost::headers"]
