# xsimd, the header-only SIMD wrapper (Debian 12: libxsimd-dev 8.1), for the element-wise kernels
# written once in kernels/simd/ and compiled per ISA. Sets TRINE_XSIMD_VIEW to a folder that holds
# only a link to the xsimd/ headers (empty when they are missing or not 8.x, whose API the kernels
# use): a cross build includes that folder, never the host's /usr/include, whose other headers are
# the host's. Without it the element-wise steps run their scalar forms (src/runtime/ops.cc).
find_path(TRINE_XSIMD_INCLUDE xsimd/xsimd.hpp)
set(TRINE_XSIMD_VIEW "")
if(TRINE_XSIMD_INCLUDE)
  file(STRINGS ${TRINE_XSIMD_INCLUDE}/xsimd/config/xsimd_config.hpp TRINE_XSIMD_MAJOR_LINE
    REGEX "#define XSIMD_VERSION_MAJOR ")
  string(REGEX REPLACE ".*XSIMD_VERSION_MAJOR ([0-9]+).*" "\\1" TRINE_XSIMD_MAJOR "${TRINE_XSIMD_MAJOR_LINE}")
  if(TRINE_XSIMD_MAJOR STREQUAL "8")
    set(TRINE_XSIMD_VIEW ${CMAKE_BINARY_DIR}/xsimd_include)
    file(MAKE_DIRECTORY ${TRINE_XSIMD_VIEW})
    file(CREATE_LINK ${TRINE_XSIMD_INCLUDE}/xsimd ${TRINE_XSIMD_VIEW}/xsimd SYMBOLIC)
  else()
    message(STATUS "trine: xsimd ${TRINE_XSIMD_MAJOR} found, the kernels are written for 8.x: "
      "element-wise steps use their scalar forms")
  endif()
else()
  message(STATUS "trine: xsimd not found (libxsimd-dev): element-wise steps use their scalar forms")
endif()
