# The zeromem program as a process: bad input prints exactly one line on stderr, nothing on stdout, exit 2.
foreach(args "estimate;--params;abc" "estimate;--params;7B;--zero-stage;4" "estimate;--params;7B;--dp;-3"
             "deepspeed;zero3;--params;1B" "estimate;--bogus" "nonsense")
  execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines n)
  if(NOT rc EQUAL 2 OR NOT n EQUAL 1 OR NOT out STREQUAL "" OR NOT err MATCHES "^zeromem: ")
    message(FATAL_ERROR "zeromem ${args}: exit ${rc}, stderr '${err}', stdout '${out}'")
  endif()
  message("zeromem ${args} -> exit 2: ${err}")
endforeach()
