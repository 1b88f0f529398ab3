# Builds TARGET in BUILD_DIR and succeeds only if the build fails because HEADER was not found
# (any other failure, or a build that succeeds, fails the test).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(APPEND out "${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled: the layer can include ${HEADER}")
endif()
string(FIND "${out}" "${HEADER}" at)
string(REGEX MATCH "No such file|file not found" missing "${out}")
if(at EQUAL -1 OR NOT missing)
  message(FATAL_ERROR "${TARGET} failed for another reason than a missing ${HEADER}:\n${out}")
endif()
message(STATUS "${TARGET}: ${HEADER} is out of reach, as it should be")
