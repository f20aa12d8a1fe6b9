// zeromem version. The single source of truth: CMake, Conan and vcpkg read it from here.
#pragma once

#define ZEROMEM_VERSION_MAJOR 0
#define ZEROMEM_VERSION_MINOR 1
#define ZEROMEM_VERSION_PATCH 0
#define ZEROMEM_VERSION_STRING "0.1.0"

namespace zeromem {
inline constexpr int version_major = ZEROMEM_VERSION_MAJOR;
inline constexpr int version_minor = ZEROMEM_VERSION_MINOR;
inline constexpr int version_patch = ZEROMEM_VERSION_PATCH;
inline constexpr const char* version_string = ZEROMEM_VERSION_STRING;
}  // namespace zeromem
