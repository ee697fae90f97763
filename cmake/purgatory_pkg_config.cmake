# purgatory-timer.pc and purgatory.pc, for build systems other than CMake:
#   c++ app.cpp $(pkg-config --cflags --libs purgatory)
# for either install, static or shared. Installed to ${libdir}/pkgconfig, relocatable (paths
# relative to ${pcfiledir}). A static install is what the archives need to link, so its files
# name fmt and the threads library in Requires and Libs themselves (not only in the .private
# fields, which a plain `pkg-config --libs` leaves out), and the static define of the export
# macros; a shared library brings its own dependencies, so they stay private there.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PURGATORY_PC_RELATIVE_PREFIX "")
  set(PURGATORY_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH PURGATORY_PC_RELATIVE_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" PURGATORY_PC_RELATIVE_PREFIX "${PURGATORY_PC_RELATIVE_PREFIX}")
  set(PURGATORY_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PURGATORY_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(PURGATORY_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# The headers need C++20; compilers that default to an older standard (g++ 12: gnu++17) need the
# flag. A consumer on a later standard passes its own -std after these flags.
set(PURGATORY_PC_CXX_STANDARD "-std=c++20")

# PURGATORY_PACKAGE_KIND (static or shared) is set by the top-level CMakeLists.txt.
set(PURGATORY_PC_KIND "${PURGATORY_PACKAGE_KIND}")
if(PURGATORY_PACKAGE_KIND STREQUAL "static")
  set(PURGATORY_PC_TIMER_DEFINES " -DPURGATORY_TIMER_STATIC_DEFINE")
  set(PURGATORY_PC_PURGATORY_DEFINES " -DPURGATORY_STATIC_DEFINE")
  # The archives call fmt, and the threads library if the platform has one apart from libc.
  set(PURGATORY_PC_TIMER_REQUIRES "Requires: fmt\n")
  set(PURGATORY_PC_PURGATORY_REQUIRES ", fmt")
  set(PURGATORY_PC_TIMER_LIBS "${CMAKE_THREAD_LIBS_INIT}")
  if(PURGATORY_PC_TIMER_LIBS)
    string(PREPEND PURGATORY_PC_TIMER_LIBS " ")
  endif()
else()
  set(PURGATORY_PC_TIMER_DEFINES "")
  set(PURGATORY_PC_PURGATORY_DEFINES "")
  set(PURGATORY_PC_TIMER_REQUIRES "")
  set(PURGATORY_PC_PURGATORY_REQUIRES "")
  set(PURGATORY_PC_TIMER_LIBS "")
endif()

configure_file(${CMAKE_CURRENT_LIST_DIR}/purgatory-timer.pc.in
               ${PROJECT_BINARY_DIR}/pkgconfig/purgatory-timer.pc @ONLY)
set(purgatory_pc_files ${PROJECT_BINARY_DIR}/pkgconfig/purgatory-timer.pc)
if(TARGET purgatory_purgatory)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/purgatory.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/purgatory.pc @ONLY)
  list(APPEND purgatory_pc_files ${PROJECT_BINARY_DIR}/pkgconfig/purgatory.pc)
endif()
install(FILES ${purgatory_pc_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
