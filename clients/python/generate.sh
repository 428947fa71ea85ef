#!/usr/bin/env bash
# Regenerates the Python stubs of clients/python from the repository's .proto
# files (`make python-proto`).
#
# The generated modules must live in the Python package named by each file's
# proto package (agentstate.session.v1, ...), which protoc derives from the
# file's path under its include root. The repository keeps the files either
# in messages/<x>/v1/<x>.proto (path and package disagree; imports read
# "messages/common/v1/common.proto") or in messages/agentstate/<x>/v1/<x>.proto
# with messages/ as include root. The first layout is staged into a
# temporary agentstate/<x>/v1/ tree with its imports rewritten; the second is
# used as it is.
#
# Needs protoc (Debian: protobuf-compiler) and a gRPC Python plugin: Debian's
# grpc_python_plugin (protobuf-compiler-grpc) or grpc_tools (python -m
# grpc_tools.protoc). PYTHON names the interpreter for grpc_tools.
#
# Which tools matter: generated code runs on protobuf/grpcio runtimes as new
# as or newer than the tools that generated it, never older. The committed
# stubs come from Debian 12's protoc 3.21.12 and grpc_python_plugin 1.51 (the
# floors in pyproject.toml); protoc 26+ (protobuf 5.26+) and grpcio-tools
# 1.63+ also write a check into each module that refuses, or warns about, an
# older runtime. So regenerate with Debian's tools: stubs from newer ones fail
# tests/test_units.py StubCompatibilityTest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/src"
PYTHON="${PYTHON:-/usr/bin/python3}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

services=(common session plan audit feed)
if [ -d "$repo/messages/agentstate" ]; then
  root="$repo/messages"
else
  root="$stage"
  for x in "${services[@]}"; do
    src="$repo/messages/$x/v1/$x.proto"
    [ -f "$src" ] || { echo "generate.sh: $src not found" >&2; exit 1; }
    mkdir -p "$stage/agentstate/$x/v1"
    sed -E 's#^(import[[:space:]]+(public[[:space:]]+|weak[[:space:]]+)?")messages/#\1agentstate/#' \
      "$src" >"$stage/agentstate/$x/v1/$x.proto"
  done
fi

files=()
for x in "${services[@]}"; do
  f="agentstate/$x/v1/$x.proto"
  [ -f "$root/$f" ] || { echo "generate.sh: $root/$f not found" >&2; exit 1; }
  # Fail rather than generate modules that import a package that does not exist.
  if grep -Eq '^import[[:space:]]+.*"messages/' "$root/$f"; then
    echo "generate.sh: $f still imports messages/...; expected agentstate/..." >&2
    exit 1
  fi
  files+=("$f")
done

gen="$stage/out"
mkdir -p "$gen"
if command -v grpc_python_plugin >/dev/null 2>&1; then
  protoc -I "$root" --python_out="$gen" --pyi_out="$gen" \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" --grpc_python_out="$gen" \
    "${files[@]}"
elif "$PYTHON" -c 'import grpc_tools' >/dev/null 2>&1; then
  # grpc_tools bundles its own protoc and well-known types.
  "$PYTHON" -m grpc_tools.protoc -I "$root" --python_out="$gen" --pyi_out="$gen" \
    --grpc_python_out="$gen" "${files[@]}"
else
  echo "generate.sh: need grpc_python_plugin (Debian: protobuf-compiler-grpc) or grpc_tools" >&2
  exit 1
fi

for x in "${services[@]}"; do
  dst="$out/agentstate/$x/v1"
  mkdir -p "$dst"
  rm -f "$dst"/*_pb2.py "$dst"/*_pb2.pyi "$dst"/*_pb2_grpc.py
  cp "$gen/agentstate/$x/v1/"* "$dst/"
  # common has no service: its empty gRPC module is noise.
  if [ "$x" = common ]; then rm -f "$dst/${x}_pb2_grpc.py"; fi
  touch "$out/agentstate/$x/__init__.py" "$dst/__init__.py"
done
echo "generate.sh: wrote ${files[*]} into $out/agentstate"
