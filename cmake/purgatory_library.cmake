# How the two installed libraries (purgatory_timer, purgatory_purgatory) are built, static or shared.
#
# Static is the default. With -DBUILD_SHARED_LIBS=ON each is a shared library whose ABI surface is
# the public API only: symbols are hidden by default (inline functions too), the public API carries
# an export macro from a header CMake generates (PURGATORY_TIMER_EXPORT in
# purgatory/timer/export.hpp, PURGATORY_EXPORT in purgatory/export.hpp: the same macros a Windows
# DLL build needs), and on ELF a linker version script keeps everything outside namespace purgatory
# local (template instantiations of the standard library would otherwise be exported weak).
#
# Versions: VERSION is the project's; SOVERSION is MAJOR.MINOR while the major version is 0 (0.x
# releases may break the ABI at each minor, as the CMake package's SameMinorVersion says), MAJOR
# from 1.0 on. So libpurgatory.so.0.1 is what a program built against 0.1.z asks for.
include(GenerateExportHeader)
include(CheckLinkerFlag)
include(CheckCXXCompilerFlag)

if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(PURGATORY_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(PURGATORY_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()

# Generated public headers (export macros, version.hpp) land here, mirroring the installed layout.
set(PURGATORY_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)

set(purgatory_version_script ${CMAKE_CURRENT_LIST_DIR}/purgatory_exports.map)
check_linker_flag(CXX "-Wl,--version-script=${purgatory_version_script}"
                  PURGATORY_HAS_VERSION_SCRIPT)
check_cxx_compiler_flag(-fno-semantic-interposition PURGATORY_HAS_NO_SEMANTIC_INTERPOSITION)

# purgatory_library(<target> BASE_NAME <MACRO_BASE> EXPORT_HEADER <path under include/>)
# Versions and hides the symbols of <target>, generates its export header, and for a static
# library defines <MACRO_BASE>_STATIC_DEFINE for the library and its users (the macro is then
# empty, as a static library on Windows needs).
function(purgatory_library target)
  cmake_parse_arguments(ARG "" "BASE_NAME;EXPORT_HEADER" "" ${ARGN})
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PURGATORY_SOVERSION}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  generate_export_header(${target}
    BASE_NAME ${ARG_BASE_NAME}
    EXPORT_FILE_NAME ${PURGATORY_GENERATED_INCLUDE_DIR}/${ARG_EXPORT_HEADER})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PURGATORY_GENERATED_INCLUDE_DIR}>)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    target_compile_definitions(${target} PUBLIC ${ARG_BASE_NAME}_STATIC_DEFINE)
  else()
    if(PURGATORY_HAS_VERSION_SCRIPT)
      target_link_options(${target} PRIVATE "LINKER:--version-script=${purgatory_version_script}")
      set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${purgatory_version_script})
    endif()
    # Calls inside the library to its own exported functions may then be inlined, as in a static
    # build (no one interposes them).
    if(PURGATORY_HAS_NO_SEMANTIC_INTERPOSITION)
      target_compile_options(${target} PRIVATE -fno-semantic-interposition)
    endif()
  endif()
endfunction()

# purgatory_hooked_copy(<copy> SOURCES ... BASE_NAME <macro prefix> INCLUDE <dir>
#                       [PRIVATE_INCLUDE <dir>...] [PUBLIC_LINKS <target>...])
# A test-only copy of a library with the race points live (detail/race_point.hpp): always static,
# the same sources and headers, no exports, never installed. Race tests, the sweeps and the
# concurrent fuzzer link it to stop threads at named points; the library itself has no race points.
function(purgatory_hooked_copy copy)
  cmake_parse_arguments(ARG "" "BASE_NAME;INCLUDE" "SOURCES;PRIVATE_INCLUDE;PUBLIC_LINKS" ${ARGN})
  if(NOT (PURGATORY_BUILD_TESTS OR PURGATORY_BUILD_FUZZERS))
    return()
  endif()
  add_library(${copy} STATIC ${ARG_SOURCES})
  target_compile_features(${copy} PUBLIC cxx_std_20)
  target_compile_definitions(${copy} PUBLIC PURGATORY_RACE_HOOKS=1 ${ARG_BASE_NAME}_STATIC_DEFINE)
  target_include_directories(${copy}
    PUBLIC ${ARG_INCLUDE} ${PURGATORY_GENERATED_INCLUDE_DIR}
    PRIVATE ${ARG_PRIVATE_INCLUDE})
  target_link_libraries(${copy} PUBLIC ${ARG_PUBLIC_LINKS} PRIVATE ${PURGATORY_FMT} purgatory_warnings)
endfunction()
