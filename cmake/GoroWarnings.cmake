# goro_warnings(target): the warnings every target of ours is compiled with (g++ 12 and
# clang 14), PRIVATE so that they never reach a target that links ours, in this build or
# through an installed goroConfig.cmake.
#
# GORO_WERROR turns those warnings into errors. It is OFF by default: a user who builds
# goro, or adds it with add_subdirectory/FetchContent, must never see the build fail
# because a newer compiler warns about something new. goro's own builds turn it on
# (scripts/run-tests.sh, scripts/run-demo.sh and the other scripts), so in CI and in a
# developer's build every warning is still an error.
option(GORO_WERROR "Treat compiler warnings as errors in goro's own targets" OFF)

function(goro_warnings target)
  set(flags -Wall -Wextra -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    # g++ 12 reports -Wrestrict inside libstdc++'s std::string (char_traits::copy under
    # basic_string::_M_replace) at -O2/-O3 for code with no overlap at all: GCC bugs
    # 105329 and 105651. It fires in ordinary string concatenation (examples/json_api,
    # the parameterised test names), so it says nothing about our code.
    list(APPEND flags -Wno-restrict)
  endif()
  if(GORO_WERROR)
    list(APPEND flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${flags}>")
endfunction()
