# Installs the build tree into WORK_DIR and checks its install manifest: every installed header
# is public or included by a public one (check_installed_headers.py).
# Variables: BUILD_DIR WORK_DIR PYTHON CHECKER
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc})")
endif()
execute_process(COMMAND ${PYTHON} ${CHECKER} ${BUILD_DIR}/install_manifest.txt ${WORK_DIR}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the install holds headers no public header includes (above)")
endif()
