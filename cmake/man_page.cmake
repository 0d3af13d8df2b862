# Writes OUTPUT, epochcast's man page: help2man on `epochcast --help`, with a COMMANDS section
# holding every command's own --help (the commands as `epochcast __complete` lists them).
# Run at build time: cmake -DEPOCHCAST=... -DHELP2MAN=... -DVERSION=... -DOUTPUT=... -P this file.
execute_process(COMMAND ${EPOCHCAST} __complete "" OUTPUT_VARIABLE listed RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${EPOCHCAST} __complete failed (${status})")
endif()
string(REPLACE "\n" ";" commands "${listed}")
set(sections "[COMMANDS]\n")
foreach(command IN LISTS commands)
  if(command STREQUAL "")
    continue()
  endif()
  execute_process(COMMAND ${EPOCHCAST} ${command} --help OUTPUT_VARIABLE help
    RESULT_VARIABLE status ERROR_QUIET)
  if(NOT status EQUAL 0)
    continue()  # run and bench in a build without the runtime
  endif()
  # As roff text: backslashes escaped, no line read as a request, the layout kept (.nf).
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  string(APPEND sections ".SS \"epochcast ${command}\"\n.nf\n${help}.fi\n")
endforeach()
set(include_file "${OUTPUT}.h2m")
file(WRITE "${include_file}" "${sections}")
execute_process(COMMAND ${HELP2MAN} --no-info --no-discard-stderr --version-string=${VERSION}
    "--name=predicts data-parallel training time against batch size and GPU count"
    --include=${include_file} --output=${OUTPUT} ${EPOCHCAST}
  RESULT_VARIABLE status)
file(REMOVE "${include_file}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "help2man failed (${status})")
endif()
