# Runs a fuzz target in an empty working directory and fails if it exits non-zero or leaves any file there: a fuzzed
# command line must not create files where it runs (fuzz_cli.cpp sends --svg to /dev/null).
# Usage: cmake -DFUZZER=<binary> -DDIR=<scratch directory> "-DARGS=<arg;arg;...>" -P run_in_empty_dir.cmake
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND "${FUZZER}" ${ARGS} WORKING_DIRECTORY "${DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} exited with ${rc}")
endif()
file(GLOB_RECURSE left RELATIVE "${DIR}" LIST_DIRECTORIES true "${DIR}/*")
if(left)
  message(FATAL_ERROR "${FUZZER} left files in its working directory ${DIR}: ${left}")
endif()
message(STATUS "${FUZZER} exited 0 and left its working directory empty")
