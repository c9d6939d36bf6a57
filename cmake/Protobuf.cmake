# dtrain_proto_library(TARGET name PROTO path/in/repo.proto [DEPS targets...] [EMBED_COMMENTS])
# Runs protoc during the build; the generated header is included as "path/in/repo.pb.h".
# Generated code gets no -Wall: it is not ours to fix.
# EMBED_COMMENTS: also embed the file's descriptor set with its comments (flag help reads them).
function(dtrain_proto_library)
  cmake_parse_arguments(ARG "EMBED_COMMENTS" "TARGET;PROTO" "DEPS" ${ARGN})
  get_filename_component(_dir "${ARG_PROTO}" DIRECTORY)
  get_filename_component(_name "${ARG_PROTO}" NAME_WE)
  set(_out ${PROJECT_BINARY_DIR}/generated/${_dir})
  add_custom_command(
    OUTPUT ${_out}/${_name}.pb.cc ${_out}/${_name}.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/generated
    COMMAND protobuf::protoc --cpp_out=${PROJECT_BINARY_DIR}/generated -I ${PROJECT_SOURCE_DIR}
            ${PROJECT_SOURCE_DIR}/${ARG_PROTO}
    DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_PROTO} protobuf::protoc
    COMMENT "protoc ${ARG_PROTO}"
    VERBATIM)
  set(_sources ${_out}/${_name}.pb.cc)
  if(ARG_EMBED_COMMENTS)
    # The message's comments, for --help: a descriptor set with source info, embedded as
    # dtrain::generated::<name>_descriptor_set() (cmake/EmbedFile.cmake).
    add_custom_command(
      OUTPUT ${_out}/${_name}_descriptor_set.cc
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
      COMMAND protobuf::protoc --include_source_info --descriptor_set_out=${_out}/${_name}.desc -I ${PROJECT_SOURCE_DIR}
              ${PROJECT_SOURCE_DIR}/${ARG_PROTO}
      COMMAND ${CMAKE_COMMAND} -DINPUT=${_out}/${_name}.desc -DOUTPUT=${_out}/${_name}_descriptor_set.cc
              -DSYMBOL=${_name}_descriptor_set -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
      DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_PROTO} protobuf::protoc ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
      COMMENT "protoc ${ARG_PROTO} (descriptor set with comments)"
      VERBATIM)
    list(APPEND _sources ${_out}/${_name}_descriptor_set.cc)
  endif()
  add_library(${ARG_TARGET} STATIC ${_sources})
  target_include_directories(${ARG_TARGET} PUBLIC ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${ARG_TARGET} PUBLIC protobuf::libprotobuf ${ARG_DEPS})
endfunction()
