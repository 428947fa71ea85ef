#!/bin/sh
# Regenerates src/gen from the contract (messages/agentstate/**.proto) with
# protoc and Buf's ES generator (protoc-gen-es, pinned in package.json's
# devDependencies: run `npm ci` first). `make ts-proto` runs this.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
plugin="$here/node_modules/.bin/protoc-gen-es"
if [ ! -x "$plugin" ]; then
  echo "generate.sh: $plugin is missing: run npm ci in clients/typescript" >&2
  exit 1
fi
rm -rf "$here/src/gen"
mkdir -p "$here/src/gen"
cd "$root/messages"
# shellcheck disable=SC2046 # the file list is meant to split
protoc -I . --plugin=protoc-gen-es="$plugin" \
  --es_out="$here/src/gen" --es_opt=target=ts,import_extension=js \
  $(find agentstate -name '*.proto' | LC_ALL=C sort)
