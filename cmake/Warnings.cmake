# The build is clean under -Wall -Wextra; dtrain_warnings(target) applies them to our own code only.
function(dtrain_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wno-missing-field-initializers>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endfunction()

# Error messages carry file:line; print paths relative to the source tree, not the build machine's.
add_compile_options(-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=)
