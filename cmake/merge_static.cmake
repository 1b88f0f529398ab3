# Appends every member of the static libraries LIBS (";"-separated) to the archive OUT, so that
# libtrine.a is self-contained (the C API objects plus trine_core). Run with
#   cmake -DAR=<ar> -DOUT=<libtrine.a> -DLIBS=<a;b> -P merge_static.cmake
# The MRI mode of ar (GNU ar -M, llvm-ar -M) copies members of whole archives without extracting
# them, which keeps members of equal names from different folders apart. Only CREATE/ADDLIB/SAVE
# are used: llvm-ar has no OPEN, so the archive is rebuilt from a copy of itself.
get_filename_component(out_dir "${OUT}" DIRECTORY)
set(script "${out_dir}/merge_static.mri")
set(self "${OUT}.self")
file(COPY_FILE "${OUT}" "${self}")
set(mri "CREATE ${OUT}\nADDLIB ${self}\n")
foreach(lib IN LISTS LIBS)
  string(APPEND mri "ADDLIB ${lib}\n")
endforeach()
string(APPEND mri "SAVE\nEND\n")
file(WRITE "${script}" "${mri}")
execute_process(COMMAND "${AR}" -M INPUT_FILE "${script}" RESULT_VARIABLE rc ERROR_VARIABLE err)
file(REMOVE "${self}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merging ${LIBS} into ${OUT} failed: ${err}")
endif()
