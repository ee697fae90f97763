# Sourced by scripts/demo and scripts/test: installs the Debian 12 packages the project uses.
# As root it runs `apt-get update` then `apt-get install -y` for whatever is missing; otherwise it
# prints the exact command to run and stops.

# Everything a build and the full test suite need (compilers, libraries, Kafka clients for the
# end-to-end tests, chromium for the live view's browser test, gnuplot for the benchmark report,
# doxygen for the API reference, pkg-config for the install test's pkg-config consumer, curl for
# the long-poll example's test). node and npm, for the kafka-ts and KafkaJS end-to-end tests,
# come through ensure_npm below.
PURGATORY_PACKAGES=(
  cmake ninja-build g++ clang libclang-rt-14-dev
  libboost1.81-dev libfmt-dev doctest-dev libbenchmark-dev libcli11-dev
  kcat python3 python3-kafka python3-confluent-kafka curl procps gnuplot-nox chromium
  doxygen pkg-config
  # The gRPC example (examples/grpc/), their only user: gRPC's C++ library and its CMake package,
  # protoc and grpc_cpp_plugin to generate the code at build time, libprotobuf-dev for the
  # generated code (libgrpc++-dev does not bring it), and Debian's Python gRPC client for the test.
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio
  python3-protobuf
)
# What the portability builds add (scripts/test installs them only for those presets): clang's
# libc++ for `libcxx`; the MinGW-w64 cross compiler (posix threads) and Wine to run its tests for
# `windows` (Boost, doctest and fmt come from the packages above, header-only).
PURGATORY_PACKAGES_LIBCXX=(clang libc++-14-dev libc++abi-14-dev)
PURGATORY_PACKAGES_WINDOWS=(g++-mingw-w64-x86-64-posix wine64 util-linux)

# The kafka-ts and KafkaJS end-to-end tests run node, and npm installs both into the build tree
# at test time. A machine may already have both from elsewhere (nodesource's nodejs bundles npm, and
# conflicts with Debian's npm package), so the commands are checked, not the Debian packages.
ensure_npm() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    return 0
  fi
  ensure_packages nodejs npm
}

ensure_packages() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "==> installing missing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "Not root. Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}
