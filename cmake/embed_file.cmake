# cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DNAMESPACE=<ns> -DFUNCTION=<name> -DHEADER=<header>
#       -P embed_file.cmake
# Writes a C++ source defining `std::string_view NAMESPACE::FUNCTION() noexcept` that returns the
# bytes of INPUT, so a file (the live view's page) is compiled into the binary. It includes HEADER,
# which declares FUNCTION, first: the compiler checks that the two agree.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# One line per 32 bytes keeps the generated file readable in a diff viewer.
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by cmake/embed_file.cmake: do not edit.
#include \"${HEADER}\"

#include <string_view>

namespace ${NAMESPACE} {
namespace {
constexpr char kBytes[] = {
${bytes}'\\0'};
}  // namespace

std::string_view ${FUNCTION}() noexcept {
  return std::string_view(kBytes, ${size});
}

}  // namespace ${NAMESPACE}
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
