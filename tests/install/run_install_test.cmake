# Installs the build tree into a temporary prefix, then configures, builds and runs the consumer
# project against it; then does the same through add_subdirectory. Fails on the first error.
# Variables: BUILD_DIR SOURCE_DIR WORK_DIR CXX CXX_FLAGS LINKER_FLAGS BUILD_TYPE GENERATOR
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(required lib/cmake/purgatory/purgatoryConfig.cmake
                 lib/cmake/purgatory/purgatoryConfigVersion.cmake
                 include/purgatory/timer/system_timer.hpp
                 include/purgatory/delayed_operation_purgatory.hpp)
  if(NOT EXISTS ${prefix}/${required})
    message(FATAL_ERROR "the install lacks ${required}")
  endif()
endforeach()

set(common -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
           "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/installed
    ${common} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/installed)
run(${WORK_DIR}/installed/consumer)
message(STATUS "find_package(purgatory) consumer: built and ran")

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/subdirectory
    ${common} -DPURGATORY_SOURCE_DIR=${SOURCE_DIR})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/subdirectory)
run(${WORK_DIR}/subdirectory/consumer)
message(STATUS "add_subdirectory(purgatory) consumer: built and ran")
