# Overlay port: builds the zeromem checkout this port lives in (vcpkg install zeromem --overlay-ports=ports).
set(VCPKG_BUILD_TYPE release)  # header-only
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DZEROMEM_BUILD_TESTS=OFF
    -DZEROMEM_BUILD_EXAMPLES=OFF
    -DZEROMEM_BUILD_TOOLS=OFF
    -DZEROMEM_INSTALL=ON)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/cmake/zeromem)
vcpkg_fixup_pkgconfig()
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug" "${CURRENT_PACKAGES_DIR}/share/doc")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
