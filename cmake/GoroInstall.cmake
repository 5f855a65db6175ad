# Installs the CMake package so that another project can say
#
#   find_package(goro 0.1 REQUIRED)            # or: COMPONENTS base scheduler net http framework
#   target_link_libraries(app PRIVATE goro::framework)   # or goro::http, goro::scheduler ...
#   target_link_libraries(app_test PRIVATE goro::httptest)   # component httptest
#   target_link_libraries(app PRIVATE goro::json)            # component json
#   target_link_libraries(app PRIVATE goro::hooks)           # component hooks
#   goro_grpc_generate(app PROTOS a.proto)                    # component grpc
#
# Each layer installs its own library into the export set `goroTargets`
# (install(TARGETS goro_<layer> EXPORT goroTargets) in <layer>/CMakeLists.txt) and its
# headers under include/goro/<layer>/; goro::httptest (http/httptest/) installs its
# library the same way, its header being among goro::http's. This file, included last
# by the top-level CMakeLists.txt, writes goroTargets.cmake, goroConfig.cmake and
# goroConfigVersion.cmake into <prefix>/lib/cmake/goro. goro::json (http/json/), built
# only where nlohmann_json was found, has an export set of its own, goroJsonTargets,
# which goroConfig.cmake loads only where it finds nlohmann_json again. goro::grpc
# (grpc/, built only where protobuf was found) and its code generator
# goro::protoc-gen-goro are in goroTargets; goroConfig.cmake then finds protobuf first
# (goro::grpc names protobuf::libprotobuf, goro_grpc_generate runs protobuf::protoc) and
# includes GoroGrpc.cmake, installed beside it, for goro_grpc_generate.
include(CMakePackageConfigHelpers)

set(GORO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/goro CACHE STRING
  "Where goroConfig.cmake is installed, relative to the prefix")

# Which layers are in this build (goroConfig.cmake reports them as components), and
# which external packages their exported link interfaces name (goroConfig.cmake finds
# those again in the consumer).
set(GORO_INSTALLED_COMPONENTS "")
set(GORO_CONFIG_NEEDS_OPENSSL OFF)
set(GORO_CONFIG_NEEDS_ZLIB OFF)
set(GORO_CONFIG_NEEDS_NGHTTP2 OFF)
set(GORO_CONFIG_NEEDS_COMPRESSION OFF)
set(GORO_CONFIG_NEEDS_LIBPQ OFF)
foreach(layer base scheduler net redis pg hooks http httptest json framework grpc)
  if(TARGET goro_${layer})
    list(APPEND GORO_INSTALLED_COMPONENTS ${layer})
    get_target_property(_goro_iface goro_${layer} INTERFACE_LINK_LIBRARIES)
    if(_goro_iface MATCHES "OpenSSL::")
      set(GORO_CONFIG_NEEDS_OPENSSL ON)
    endif()
    # A static goro_http names zlib (WebSocket compression) as a link-only dependency.
    if(_goro_iface MATCHES "ZLIB::")
      set(GORO_CONFIG_NEEDS_ZLIB ON)
    endif()
    # ... and nghttp2 (HTTP/2), as the imported target pkg-config made.
    if(_goro_iface MATCHES "PkgConfig::NGHTTP2")
      set(GORO_CONFIG_NEEDS_NGHTTP2 ON)
    endif()
    # ... and brotli and zstd (compression), the same way.
    if(_goro_iface MATCHES "PkgConfig::BROTLI|PkgConfig::ZSTD")
      set(GORO_CONFIG_NEEDS_COMPRESSION ON)
    endif()
    # goro::pg links libpq through the imported target pkg-config made.
    if(_goro_iface MATCHES "PkgConfig::LIBPQ")
      set(GORO_CONFIG_NEEDS_LIBPQ ON)
    endif()
  endif()
endforeach()
unset(_goro_iface)

install(EXPORT goroTargets
  NAMESPACE goro::
  FILE goroTargets.cmake
  DESTINATION ${GORO_INSTALL_CMAKEDIR})
set(GORO_CONFIG_HAS_GRPC OFF)
if(TARGET goro_grpc)
  set(GORO_CONFIG_HAS_GRPC ON)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/GoroGrpc.cmake DESTINATION ${GORO_INSTALL_CMAKEDIR})
endif()
set(GORO_CONFIG_HAS_JSON OFF)
if(TARGET goro_json)
  set(GORO_CONFIG_HAS_JSON ON)
  install(EXPORT goroJsonTargets
    NAMESPACE goro::
    FILE goroJsonTargets.cmake
    DESTINATION ${GORO_INSTALL_CMAKEDIR})
endif()

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/goroConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/goroConfig.cmake
  INSTALL_DESTINATION ${GORO_INSTALL_CMAKEDIR})

# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/goroConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/goroConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/goroConfigVersion.cmake
  DESTINATION ${GORO_INSTALL_CMAKEDIR})
