#!/usr/bin/env bash
# Installs kafka-ts (npm) into a folder of the build tree for the demo_broker end-to-end tests, at
# the version they were written against; run by CTest as the fixture of the kafka-ts cases, never
# at build time, never into the source tree. Already installed at that version: nothing to do, so
# later runs work offline.
#   bash install_kafka_ts.sh <build>/npm
set -euo pipefail
prefix=${1:?usage: install_kafka_ts.sh <folder in the build tree>}
version=1.5.0
manifest="$prefix/node_modules/kafka-ts/package.json"
if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
  echo "kafka-ts $version already installed in $prefix"
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
if ! npm install --prefix "$prefix" --no-audit --no-fund --no-save "kafka-ts@$version"; then
  echo "FAIL npm could not install kafka-ts@$version into $prefix (is the npm registry" \
       "reachable?): the kafka-ts end-to-end tests cannot run" >&2
  exit 1
fi
grep -q "\"version\": \"$version\"" "$manifest" || {
  echo "FAIL npm ran, but $manifest is not kafka-ts $version" >&2
  exit 1
}
echo "kafka-ts $version installed in $prefix"
