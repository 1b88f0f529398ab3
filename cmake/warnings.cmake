# Warning flags for project code only (third-party headers come in as SYSTEM includes).
set(TRINE_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter)
if(TRINE_WERROR)
  list(APPEND TRINE_WARNING_FLAGS -Werror)
endif()

# trine_set_warnings(target): applies the project warning set to one target.
function(trine_set_warnings target)
  target_compile_options(${target} PRIVATE ${TRINE_WARNING_FLAGS})
endfunction()
