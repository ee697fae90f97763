#!/usr/bin/env bash
# Installs the Node.js Kafka clients of the demo_broker end-to-end tests (kafka-ts, KafkaJS) into a
# folder of the build tree, at the versions the tests were written against; run by CTest as the
# fixture of their cases, never at build time, never into the source tree. Already installed at
# those versions: nothing to do, so later runs work offline.
#   bash install_npm_clients.sh <build>/npm
set -euo pipefail
prefix=${1:?usage: install_npm_clients.sh <folder in the build tree>}
packages=(kafka-ts@1.5.0 kafkajs@2.2.4)

installed() {  # name@version: is that version in $prefix?
  local manifest="$prefix/node_modules/${1%@*}/package.json"
  [ -f "$manifest" ] && grep -q "\"version\": \"${1##*@}\"" "$manifest"
}

missing=()
for package in "${packages[@]}"; do
  installed "$package" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "${packages[*]} already installed in $prefix"
  exit 0
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL $tool is not installed: scripts/packages.sh installs Debian's nodejs and npm" \
         "(bash scripts/test does it as root)" >&2
    exit 1
  fi
done
mkdir -p "$prefix"
# All at once: npm install with --no-save removes what the same folder got from an earlier call.
if ! npm install --prefix "$prefix" --no-audit --no-fund --no-save "${packages[@]}"; then
  echo "FAIL npm could not install ${missing[*]} into $prefix (is the npm registry reachable?):" \
       "their end-to-end tests cannot run" >&2
  exit 1
fi
for package in "${packages[@]}"; do
  installed "$package" || {
    echo "FAIL npm ran, but $prefix/node_modules holds no $package" >&2
    exit 1
  }
done
echo "${packages[*]} installed in $prefix"
