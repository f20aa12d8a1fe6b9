# Runs ports/zeromem/portfile.cmake without a vcpkg client (none can be installed here). The vcpkg helpers the
# port calls are replaced by minimal stand-ins that do what vcpkg documents for them; then the port's output is
# compared with a plain `cmake --install`, and a consumer finds the package in the port's layout.
cmake_minimum_required(VERSION 3.23)
set(PORT zeromem)
set(CURRENT_PACKAGES_DIR "${WORK_DIR}/packages")
file(REMOVE_RECURSE "${WORK_DIR}")

function(checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}${err}")
  endif()
endfunction()

# vcpkg_cmake_configure / vcpkg_cmake_install: configure and install the source into CURRENT_PACKAGES_DIR.
function(vcpkg_cmake_configure)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS")
  checked(${CMAKE_COMMAND} -S "${arg_SOURCE_PATH}" -B "${WORK_DIR}/port-build" -DCMAKE_CXX_COMPILER=${CXX}
          -DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR} ${arg_OPTIONS})
endfunction()
function(vcpkg_cmake_install)
  checked(${CMAKE_COMMAND} --build "${WORK_DIR}/port-build" --target install)
endfunction()
# vcpkg_cmake_config_fixup(CONFIG_PATH p): moves the CMake package files to share/${PORT}.
function(vcpkg_cmake_config_fixup)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CONFIG_PATH" "")
  file(GLOB files "${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}/*")
  file(MAKE_DIRECTORY "${CURRENT_PACKAGES_DIR}/share/${PORT}")
  foreach(f IN LISTS files)
    get_filename_component(n "${f}" NAME)
    file(RENAME "${f}" "${CURRENT_PACKAGES_DIR}/share/${PORT}/${n}")
  endforeach()
  file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}")
  # Like vcpkg, re-root the prefix the moved files compute: share/cmake/zeromem -> share/zeromem is one level less.
  string(REGEX MATCHALL "/" old_levels "${arg_CONFIG_PATH}")
  if(NOT old_levels)
    return()
  endif()
  file(GLOB moved "${CURRENT_PACKAGES_DIR}/share/${PORT}/*.cmake")
  foreach(f IN LISTS moved)
    file(READ "${f}" text)
    string(REPLACE "get_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n" "" text "${text}")
    string(REPLACE "get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_FILE}\" PATH)\n"
           "get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_FILE}\" PATH)\nget_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\nget_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n"
           text "${text}")
    string(REPLACE "/../../../\"" "/../../\"" text "${text}")
    file(WRITE "${f}" "${text}")
  endforeach()
endfunction()
function(vcpkg_fixup_pkgconfig)
endfunction()
function(vcpkg_install_copyright)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "FILE_LIST")
  file(READ "${arg_FILE_LIST}" text)
  file(WRITE "${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright" "${text}")
endfunction()

include("${SOURCE_DIR}/ports/zeromem/portfile.cmake")

# The reference: a plain install of the same source.
checked(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/plain-build" -DCMAKE_CXX_COMPILER=${CXX}
        -DZEROMEM_BUILD_TESTS=OFF -DZEROMEM_BUILD_EXAMPLES=OFF -DZEROMEM_BUILD_TOOLS=OFF -DZEROMEM_INSTALL=ON)
checked(${CMAKE_COMMAND} --install "${WORK_DIR}/plain-build" --prefix "${WORK_DIR}/plain")

file(GLOB_RECURSE plain_headers RELATIVE "${WORK_DIR}/plain" "${WORK_DIR}/plain/include/*")
file(GLOB_RECURSE port_headers RELATIVE "${CURRENT_PACKAGES_DIR}" "${CURRENT_PACKAGES_DIR}/include/*")
if(NOT plain_headers STREQUAL port_headers OR plain_headers STREQUAL "")
  message(FATAL_ERROR "port headers differ from cmake --install:\nport: ${port_headers}\nplain: ${plain_headers}")
endif()
foreach(f zeromemConfig.cmake zeromemConfigVersion.cmake zeromemTargets.cmake usage copyright)
  if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/share/zeromem/${f}")
    message(FATAL_ERROR "port did not install share/zeromem/${f}")
  endif()
endforeach()
if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/share/pkgconfig/zeromem.pc")
  message(FATAL_ERROR "port did not install the pkg-config file")
endif()
list(LENGTH port_headers n)
message("port installs the same ${n} headers as cmake --install, and the package files")

# A consumer finds the port's layout (share/zeromem) with find_package.
checked(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer/find_package" -B "${WORK_DIR}/consumer"
        -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${CURRENT_PACKAGES_DIR})
checked(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
checked("${WORK_DIR}/consumer/consumer")
message("consumer built against the port's files: OK")
