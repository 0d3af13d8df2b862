# Runs epochcast with ARGS (a ;-list) from the source tree and compares stdout with EXPECTED,
# paths under the source tree made relative to it (as tools/update_golden.sh writes them).
separate_arguments(arg_list UNIX_COMMAND "${ARGS}")
# Tables follow COLUMNS where it is set: the goldens are the unlimited layout of a pipe.
unset(ENV{COLUMNS})
execute_process(COMMAND ${EPOCHCAST} ${arg_list}
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "epochcast ${ARGS} exited ${code}:\n${errors}")
endif()
get_filename_component(real_source_dir ${SOURCE_DIR} REALPATH)
string(REPLACE "${SOURCE_DIR}/" "" actual "${actual}")
string(REPLACE "${real_source_dir}/" "" actual "${actual}")
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  file(WRITE ${ACTUAL} "${actual}")
  message(FATAL_ERROR "output of 'epochcast ${ARGS}' differs from ${EXPECTED}\n"
    "see: diff ${EXPECTED} ${ACTUAL}\n"
    "if the change is intended, run tools/update_golden.sh and commit the diff")
endif()
