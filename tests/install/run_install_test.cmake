# The package as users consume it. Installs the build tree (static or shared, as it was built)
# into a temporary prefix. Builds the consumer project through add_subdirectory() on the sources,
# as the other kind (shared or static), runs it, and installs that build's purgatory into a second
# prefix (a project vendoring purgatory can install it): one more build of the libraries serves
# both. Then, against each prefix, builds and runs the consumer through find_package() and its
# main.cpp through pkg-config (`pkg-config --cflags --libs purgatory`, as the README writes it, for
# either kind), checking that a shared consumer really loads libpurgatory.so. Last, the CMake
# package's version rule: find_package(purgatory MAJOR.MINOR) is accepted (the consumers ask for
# it), a higher major or a later minor (0.x: each minor may break the ABI) refused. Fails on the
# first error.
# Variables: BUILD_DIR SOURCE_DIR WORK_DIR CXX CXX_FLAGS LINKER_FLAGS BUILD_TYPE GENERATOR VERSION
#            SHARED (the build tree's kind: ON or OFF) PKG_CONFIG READELF
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

# run_output(<var> <command>...): run() that returns the command's standard output, stripped.
function(run_output var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

foreach(tool IN ITEMS PKG_CONFIG READELF)
  if(NOT ${tool} OR NOT EXISTS "${${tool}}")
    message(FATAL_ERROR "${tool} not found (${${tool}}): apt-get install pkg-config binutils")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${VERSION}")
set(major ${CMAKE_MATCH_1})
set(minor ${CMAKE_MATCH_2})
if(major EQUAL 0)
  set(soname_suffix "${major}.${minor}")
else()
  set(soname_suffix "${major}")
endif()
set(common -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
           "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")

# The two installs: the build tree's, and the other kind's, built by the add_subdirectory() consumer.
if(SHARED)
  set(tree_kind shared)
  set(other_kind static)
  set(other_shared OFF)
else()
  set(tree_kind static)
  set(other_kind shared)
  set(other_shared ON)
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/${tree_kind})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/subdirectory
    ${common} -DPURGATORY_SOURCE_DIR=${SOURCE_DIR} -DBUILD_SHARED_LIBS=${other_shared}
    -DPURGATORY_INSTALL=ON)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/subdirectory)
run(${WORK_DIR}/subdirectory/consumer)
message(STATUS "add_subdirectory(purgatory) consumer (${other_kind} libraries): built and ran")
run(${CMAKE_COMMAND} --install ${WORK_DIR}/subdirectory --prefix ${WORK_DIR}/${other_kind})

foreach(kind IN ITEMS static shared)
  set(prefix ${WORK_DIR}/${kind})
  set(required lib/cmake/purgatory/purgatoryConfig.cmake
               lib/cmake/purgatory/purgatoryConfigVersion.cmake
               lib/pkgconfig/purgatory.pc lib/pkgconfig/purgatory-timer.pc
               include/purgatory/timer/system_timer.hpp include/purgatory/timer/export.hpp
               include/purgatory/delayed_operation_purgatory.hpp include/purgatory/export.hpp
               include/purgatory/version.hpp)
  if(kind STREQUAL "shared")
    list(APPEND required lib/libpurgatory.so.${soname_suffix} lib/libpurgatory_timer.so.${soname_suffix})
  else()
    list(APPEND required lib/libpurgatory.a lib/libpurgatory_timer.a)
  endif()
  foreach(file IN LISTS required)
    if(NOT EXISTS ${prefix}/${file})
      message(FATAL_ERROR "the ${kind} install lacks ${file}")
    endif()
  endforeach()

  # find_package(purgatory MAJOR.MINOR CONFIG REQUIRED), as a CMake user writes it.
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/${kind}-cmake
      ${common} -DCMAKE_PREFIX_PATH=${prefix} -DPURGATORY_REQUIRED_VERSION=${major}.${minor})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${kind}-cmake)
  run(${WORK_DIR}/${kind}-cmake/consumer)

  # pkg-config, as any other build system uses it.
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run_output(pc_version ${PKG_CONFIG} --modversion purgatory)
  if(NOT pc_version STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config --modversion purgatory says ${pc_version}, not ${VERSION}")
  endif()
  # Exactly as the README writes it, for both kinds.
  run_output(pc_flags ${PKG_CONFIG} --cflags --libs purgatory)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
  separate_arguments(linker_flags UNIX_COMMAND "${LINKER_FLAGS}")
  run(${CXX} ${cxx_flags} ${SOURCE_DIR}/tests/install/consumer/main.cpp ${pc_flags}
      ${linker_flags} -o ${WORK_DIR}/${kind}-pkg-config-consumer)
  run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib
      ${WORK_DIR}/${kind}-pkg-config-consumer)

  # A shared consumer loads the libraries (their SONAME: MAJOR.MINOR while 0.x); a static one not.
  foreach(consumer IN ITEMS ${kind}-cmake/consumer ${kind}-pkg-config-consumer)
    run_output(dynamic ${READELF} -d ${WORK_DIR}/${consumer})
    string(FIND "${dynamic}" "[libpurgatory.so.${soname_suffix}]" needs_purgatory)
    string(FIND "${dynamic}" "[libpurgatory_timer.so.${soname_suffix}]" needs_timer)
    if(kind STREQUAL "shared" AND (needs_purgatory EQUAL -1 OR needs_timer EQUAL -1))
      message(FATAL_ERROR "${consumer} does not load libpurgatory.so.${soname_suffix} and "
                          "libpurgatory_timer.so.${soname_suffix}:\n${dynamic}")
    elseif(kind STREQUAL "static" AND NOT (needs_purgatory EQUAL -1 AND needs_timer EQUAL -1))
      message(FATAL_ERROR "${consumer} of the static install loads a libpurgatory .so:\n${dynamic}")
    endif()
  endforeach()
  message(STATUS "${kind} install: find_package() and pkg-config consumers built and ran")
endforeach()

# The version rule: MAJOR.MINOR was accepted above; a higher major, or a later minor, is refused
# by purgatoryConfigVersion.cmake (and named in the error).
math(EXPR next_major "${major} + 1")
math(EXPR next_minor "${minor} + 1")
foreach(requested IN ITEMS ${next_major}.0 ${major}.${next_minor})
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/version_probe
            -B ${WORK_DIR}/version-probe-${requested} -DCMAKE_PREFIX_PATH=${WORK_DIR}/${tree_kind}
            -DREQUESTED=${requested}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "find_package(purgatory ${requested}) accepted version ${VERSION}")
  endif()
  string(FIND "${out}${err}" "version: ${VERSION}" named)
  if(named EQUAL -1)
    message(FATAL_ERROR "find_package(purgatory ${requested}) failed, but not because of the "
                        "version:\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "find_package(purgatory ${major}.${minor}) accepted; ${next_major}.0 and "
               "${major}.${next_minor} refused (version ${VERSION})")
