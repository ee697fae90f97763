# Included after project() by the mingw-w64-wine.cmake toolchain (CMAKE_PROJECT_INCLUDE): see
# there. Finds the host's header-only Boost, doctest and fmt, keeps the host's /usr/include away
# from the cross compiler, and gives it those three libraries through a directory of links.

# Their CMake files sit under /usr/lib/<multiarch>/cmake, where a cross build does not look.
foreach(package IN ITEMS Boost doctest fmt)
  if(NOT ${package}_DIR)
    file(GLOB candidates LIST_DIRECTORIES true
         /usr/lib/cmake/${package} /usr/lib/cmake/${package}-* /usr/lib/*/cmake/${package}
         /usr/lib/*/cmake/${package}-*)
    if(candidates)
      list(GET candidates 0 found)
      set(${package}_DIR "${found}" CACHE PATH "The host's ${package} package (used header-only)")
    endif()
  endif()
endforeach()

# CMake leaves out the include directories it takes for the compiler's built-in ones.
list(APPEND CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES /usr/include)
file(MAKE_DIRECTORY "${PURGATORY_HOST_HEADERS}")
foreach(library IN ITEMS boost doctest fmt)
  if(EXISTS /usr/include/${library} AND NOT EXISTS "${PURGATORY_HOST_HEADERS}/${library}")
    file(CREATE_LINK /usr/include/${library} "${PURGATORY_HOST_HEADERS}/${library}" SYMBOLIC)
  endif()
endforeach()
include_directories(SYSTEM "${PURGATORY_HOST_HEADERS}")
