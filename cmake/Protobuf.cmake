# dtrain_proto_library(TARGET name PROTO path/in/repo.proto [DEPS targets...])
# Runs protoc during the build; the generated header is included as "path/in/repo.pb.h".
# Generated code gets no -Wall: it is not ours to fix.
function(dtrain_proto_library)
  cmake_parse_arguments(ARG "" "TARGET;PROTO" "DEPS" ${ARGN})
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
  add_library(${ARG_TARGET} STATIC ${_out}/${_name}.pb.cc)
  target_include_directories(${ARG_TARGET} PUBLIC ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${ARG_TARGET} PUBLIC protobuf::libprotobuf ${ARG_DEPS})
endfunction()
