# Warnings are errors, for every compiler we support (g++ 12, clang 14).
function(goro_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-missing-field-initializers>)
endfunction()
