# Appends every member of the static libraries LIBS (";"-separated) to the archive OUT, so that
# libtrine.a is self-contained (the C API objects plus trine_core). Run with
#   cmake -DAR=<ar> -DOUT=<libtrine.a> -DLIBS=<a;b> -P merge_static.cmake
# GNU ar's MRI mode (ar -M) copies members of whole archives without extracting them, which keeps
# members of equal names from different folders apart.
get_filename_component(out_dir "${OUT}" DIRECTORY)
set(script "${out_dir}/merge_static.mri")
set(mri "OPEN ${OUT}\n")
foreach(lib IN LISTS LIBS)
  string(APPEND mri "ADDLIB ${lib}\n")
endforeach()
string(APPEND mri "SAVE\nEND\n")
file(WRITE "${script}" "${mri}")
execute_process(COMMAND "${AR}" -M INPUT_FILE "${script}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merging ${LIBS} into ${OUT} failed: ${err}")
endif()
