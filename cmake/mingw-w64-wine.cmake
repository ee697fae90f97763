# Toolchain of the `windows` preset: a cross build for Windows x86-64 with Debian's MinGW-w64 g++
# (g++-mingw-w64-x86-64-posix: the posix thread model, which std::thread and std::mutex need), whose
# test programs run under Wine (wine64) as CMAKE_CROSSCOMPILING_EMULATOR, through wine-run.sh: a
# Wine prefix inside the build directory, made on first use, and one wineserver kept alive while
# the tests run. Nothing is downloaded.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)

set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # build tools (python3, wine) are the host's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Boost, doctest and fmt are used header-only and come from the host's Debian packages.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# Their CMake files point at /usr/include, which must never reach the cross compiler: glibc's
# headers there would shadow MinGW's own. CMake leaves out the include directories it takes for
# the compiler's built-in ones, so /usr/include is declared one (after project(), when CMake has
# detected the compiler), and a directory holding just those three libraries goes in instead.
set(PURGATORY_HOST_HEADERS "${CMAKE_BINARY_DIR}/host-headers")
set(CMAKE_PROJECT_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/mingw-w64-host-headers.cmake")

# Statically linked (libstdc++, libgcc, winpthreads): the test programs need no MinGW DLL on
# Wine's path.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(PURGATORY_WINE64 NAMES wine64 PATHS /usr/lib/wine NO_DEFAULT_PATH)
if(NOT PURGATORY_WINE64)
  find_program(PURGATORY_WINE64 NAMES wine64 wine)
endif()
if(PURGATORY_WINE64)
  set(CMAKE_CROSSCOMPILING_EMULATOR
      "/bin/sh;${CMAKE_CURRENT_LIST_DIR}/wine-run.sh;${PURGATORY_WINE64};${CMAKE_BINARY_DIR}/wine-prefix")
endif()
