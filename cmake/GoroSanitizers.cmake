# GORO_SANITIZE=address : ASan + UBSan;  GORO_SANITIZE=thread : TSan.
# The scheduler annotates its context switches for both (see scheduler/src/context.hpp),
# so sanitizer builds run the real M:N scheduler.
if(GORO_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(GORO_ASAN=1)
elseif(GORO_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  add_compile_definitions(GORO_TSAN=1)
elseif(NOT GORO_SANITIZE STREQUAL "")
  message(FATAL_ERROR "GORO_SANITIZE must be empty, 'address' or 'thread'")
endif()
