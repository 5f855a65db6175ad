# goro_grpc_generate(<target> PROTOS a.proto ... [IMPORT_DIRS dir ...] [OUT_DIR dir])
#
# Generates the protobuf messages (protoc --cpp_out) and the goro::grpc services and
# stubs (protoc-gen-goro, --goro_out) of each .proto, adds the generated sources to
# <target>, the output folder to its include path, and links it with goro::grpc:
#
#   find_package(goro REQUIRED COMPONENTS grpc)
#   add_executable(greeter_server greeter_server.cpp)
#   goro_grpc_generate(greeter_server PROTOS helloworld.proto)
#   // greeter_server.cpp: #include "helloworld.goro.grpc.hpp"
#
# PROTOS are relative to the current source folder (or absolute). IMPORT_DIRS are the
# protoc -I roots (default: the current source folder); each proto must lie under one,
# and its path below that root names the generated files (-I proto, proto/a/b.proto ->
# a/b.pb.h, a/b.goro.grpc.hpp). OUT_DIR defaults to a folder of the current binary
# folder named after the target, so that two targets may generate the same proto.
# protobuf's own .proto files (google/protobuf/*.proto) are always importable.
#
# Works in goro's own build (the plugin is the target protoc-gen-goro, built first) and
# for a find_package(goro) user (the installed goro::protoc-gen-goro). protoc is
# protobuf::protoc (find_package(Protobuf), which goroConfig.cmake runs for grpc).
include_guard(GLOBAL)

function(goro_grpc_generate target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUT_DIR" "PROTOS;IMPORT_DIRS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "goro_grpc_generate(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "goro_grpc_generate(${target}): no such target")
  endif()
  if(NOT arg_PROTOS)
    message(FATAL_ERROR "goro_grpc_generate(${target}): PROTOS names no .proto file")
  endif()

  # protoc, and the plugin with what the command must wait for.
  if(TARGET protobuf::protoc)
    set(protoc $<TARGET_FILE:protobuf::protoc>)
  elseif(Protobuf_PROTOC_EXECUTABLE)
    set(protoc ${Protobuf_PROTOC_EXECUTABLE})
  else()
    message(FATAL_ERROR "goro_grpc_generate(${target}): protoc not found "
                        "(find_package(Protobuf); Debian: protobuf-compiler)")
  endif()
  if(NOT TARGET goro::protoc-gen-goro)
    message(FATAL_ERROR "goro_grpc_generate(${target}): goro::protoc-gen-goro not found "
                        "(find_package(goro COMPONENTS grpc))")
  endif()
  get_target_property(plugin_target goro::protoc-gen-goro ALIASED_TARGET)
  if(NOT plugin_target)
    set(plugin_target goro::protoc-gen-goro)
  endif()
  set(plugin $<TARGET_FILE:${plugin_target}>)

  set(out_dir ${arg_OUT_DIR})
  if(NOT out_dir)
    set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_goro_grpc)
  endif()
  cmake_path(ABSOLUTE_PATH out_dir BASE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} NORMALIZE)

  set(import_dirs ${arg_IMPORT_DIRS})
  if(NOT import_dirs)
    set(import_dirs ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  set(import_flags "")
  set(absolute_import_dirs "")
  foreach(dir IN LISTS import_dirs)
    cmake_path(ABSOLUTE_PATH dir BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    string(REGEX REPLACE "/$" "" dir "${dir}")
    list(APPEND absolute_import_dirs ${dir})
    list(APPEND import_flags -I${dir})
  endforeach()
  foreach(dir IN LISTS Protobuf_INCLUDE_DIRS)
    list(APPEND import_flags -I${dir})
  endforeach()

  set(generated "")
  foreach(proto IN LISTS arg_PROTOS)
    cmake_path(ABSOLUTE_PATH proto BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    if(NOT EXISTS ${proto})
      message(FATAL_ERROR "goro_grpc_generate(${target}): ${proto} does not exist")
    endif()
    # Its name under the first import root that holds it, as protoc names its outputs.
    set(relative "")
    foreach(dir IN LISTS absolute_import_dirs)
      cmake_path(IS_PREFIX dir ${proto} NORMALIZE under)
      if(under)
        cmake_path(RELATIVE_PATH proto BASE_DIRECTORY ${dir} OUTPUT_VARIABLE relative)
        break()
      endif()
    endforeach()
    if(relative STREQUAL "")
      message(FATAL_ERROR "goro_grpc_generate(${target}): ${proto} is under none of the "
                          "IMPORT_DIRS (${absolute_import_dirs})")
    endif()
    string(REGEX REPLACE "\\.proto$" "" stem ${relative})
    set(outputs ${out_dir}/${stem}.pb.h ${out_dir}/${stem}.pb.cc
                ${out_dir}/${stem}.goro.grpc.hpp ${out_dir}/${stem}.goro.grpc.cpp)
    # The depfile makes a change to an imported .proto regenerate too.
    set(depfile ${out_dir}/${stem}.proto.d)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
      COMMAND ${protoc} ${import_flags} --cpp_out=${out_dir}
              --plugin=protoc-gen-goro=${plugin} --goro_out=${out_dir}
              --dependency_out=${depfile} ${proto}
      DEPENDS ${proto} ${plugin_target}
      DEPFILE ${depfile}
      COMMENT "protoc-gen-goro: ${relative}"
      VERBATIM COMMAND_EXPAND_LISTS)
    list(APPEND generated ${outputs})
  endforeach()

  target_sources(${target} PRIVATE ${generated})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${out_dir}>)
  # goro's own library generates its services (health, reflection) with this too.
  get_target_property(real_target ${target} ALIASED_TARGET)
  if(NOT real_target)
    set(real_target ${target})
  endif()
  if(NOT real_target STREQUAL "goro_grpc")
    target_link_libraries(${target} PUBLIC goro::grpc)
  endif()
endfunction()
