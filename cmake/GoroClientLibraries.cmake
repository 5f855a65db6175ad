# The C client libraries that examples/clients/ runs on goroutines, found through
# pkg-config, each optional: a target is defined only where its library is installed
# (Debian: libpq-dev, libhiredis-dev, libcurl4-openssl-dev, in scripts/deps.sh's test
# group), and what needs a missing one is simply not built.
#
#   goro_clients_pg     examples/clients/pg.hpp     + libpq
#   goro_clients_redis  examples/clients/redis.hpp  + hiredis
#   goro_clients_curl   examples/clients/curl.hpp   + libcurl
#
# Each is an INTERFACE library that also links goro::net. Included by every folder that
# uses them (tests/clibs, loadtest/clibs), defined once.
include_guard(GLOBAL)

find_package(PkgConfig QUIET)
set(_goro_clients_dir ${PROJECT_SOURCE_DIR}/examples/clients)

# goro_client_library(name pkg-config-module)
function(goro_client_library name module)
  if(NOT PKG_CONFIG_FOUND)
    return()
  endif()
  string(TOUPPER "GORO_PC_${name}" prefix)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(STATUS "goro: ${module} not found (pkg-config): goro_clients_${name} and what uses it are not built")
    return()
  endif()
  add_library(goro_clients_${name} INTERFACE)
  target_include_directories(goro_clients_${name} INTERFACE ${_goro_clients_dir})
  target_link_libraries(goro_clients_${name} INTERFACE goro::net PkgConfig::${prefix})
endfunction()

goro_client_library(pg libpq)
goro_client_library(redis hiredis)
goro_client_library(curl libcurl)
