# Installs everything (`cmake --install`: the libtrine and tools components) from BUILD_DIR into
# WORK_DIR/prefix, runs the installed bin/trine, then builds examples/simple.c against the installed
# files three ways and runs each on MODEL, with no LD_LIBRARY_PATH (the run paths find libtrine.so):
#   1. pkg-config: cc -std=c99 simple.c $(pkg-config --cflags --libs trine)
#   2. CMake:      find_package(trine) -> trine::trine (libtrine.so)
#   3. CMake:      trine::trine_static (libtrine.a), in the same build as 2
# All three must print the same text, starting with the bundled model's known greedy story.
# Usage: cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK_DIR= -DC_COMPILER= -DCXX_COMPILER= -DMODEL=
#        [-DSANITIZE_FLAGS="-fsanitize=... ..."] -P install_test.cmake
# SANITIZE_FLAGS (a TRINE_SANITIZE build) are added to the example builds, since a library built
# with the sanitizers needs their runtime linked into the program.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER MODEL)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
unset(ENV{LD_LIBRARY_PATH})
if(NOT EXISTS ${prefix}/bin/trine)
  message(FATAL_ERROR "not installed: ${prefix}/bin/trine")
endif()
run(${prefix}/bin/trine generate -m ${MODEL} -p "Once upon a time" -n 12 --temp 0)
string(FIND "${run_out}" "Once upon a time, there was a little girl" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the installed trine printed:\n${run_out}")
endif()

file(GLOB_RECURSE pc_files ${prefix}/*/trine.pc)
list(LENGTH pc_files n_pc)
if(NOT n_pc EQUAL 1)
  message(FATAL_ERROR "expected one installed trine.pc under ${prefix}, found: ${pc_files}")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
get_filename_component(lib_dir ${pc_dir} DIRECTORY)
foreach(f ${prefix}/include/trine/trine.h ${lib_dir}/libtrine.so ${lib_dir}/libtrine.a ${lib_dir}/cmake/trine/trineConfig.cmake)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# 1. pkg-config (the .pc file is relocatable: its prefix comes from its own folder).
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(${PKG_CONFIG} --cflags --libs trine)
string(STRIP "${run_out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(sanitize_args UNIX_COMMAND "${SANITIZE_FLAGS}")
run(${C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror ${sanitize_args} ${SOURCE_DIR}/examples/simple.c
    ${pc_flags} -o ${WORK_DIR}/simple_pkgconfig)
run(${WORK_DIR}/simple_pkgconfig ${MODEL} "Once upon a time" 32)
set(text_pkgconfig "${run_out}")

# 2 and 3. CMake package: simple (trine::trine, libtrine.so) and simple-static (trine::trine_static).
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/build-cmake -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_BUILD_TYPE=Release -DTRINE_EXAMPLE_STATIC=ON
    "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build-cmake)
find_program(OBJDUMP objdump)
foreach(kind shared static)
  set(exe ${WORK_DIR}/build-cmake/simple)
  if(kind STREQUAL "static")
    set(exe ${exe}-static)
  endif()
  if(OBJDUMP)
    run(${OBJDUMP} -p ${exe})
    string(FIND "${run_out}" "libtrine.so" needs_so)
    if(kind STREQUAL "shared" AND needs_so EQUAL -1)
      message(FATAL_ERROR "${exe} does not link libtrine.so")
    elseif(kind STREQUAL "static" AND NOT needs_so EQUAL -1)
      message(FATAL_ERROR "${exe} links libtrine.so, expected libtrine.a")
    endif()
  endif()
  run(${exe} ${MODEL} "Once upon a time" 32)
  set(text_${kind} "${run_out}")
endforeach()

set(want "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.")
string(FIND "${text_pkgconfig}" "${want}" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "simple (pkg-config) printed:\n${text_pkgconfig}\nexpected it to start with:\n${want}")
endif()
foreach(kind shared static)
  if(NOT text_${kind} STREQUAL text_pkgconfig)
    message(FATAL_ERROR "simple (CMake, ${kind}) printed:\n${text_${kind}}\nbut the pkg-config build printed:\n${text_pkgconfig}")
  endif()
endforeach()
message(STATUS "installed package OK: ${text_pkgconfig}")
