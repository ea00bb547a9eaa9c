#!/usr/bin/env bash
# Generates the TypeScript protobuf code in shared/gen/ from proto/, the
# agent's own policy service in agent/gen/, and the policy type registries
# (proto/policy_registries.ts) from the Policy.typed_content oneof.
#
#   bash proto/generate.sh          regenerate shared/gen/ and agent/gen/
#                                   (deno task proto)
#   bash proto/generate.sh --check  fail if either differs from what proto/
#                                   generates (used by CI)
#
# agent/gen/ is svc/policy/v1/policy.proto with every member of the
# Policy.typed_content oneof declared `bytes` instead of its type's message (the
# same wire encoding) and without the type imports: an agent then holds only
# the schemas of the types it enforces, each decoded by its enforcer when it
# loads (agent/sync/content.ts), not every type's messages from the start.
#
# Needs protoc (with the google/protobuf well-known .proto files) and
# @bufbuild/protoc-gen-es, which `deno install` puts into node_modules.
# Output depends only on the .proto files, the protoc-gen-es version pinned
# in deno.json and the protoc version, so the same checkout always produces
# the same bytes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out_dir="$root/shared/gen"
agent_out_dir="$root/agent/gen"
plugin_opts="target=ts,import_extension=ts"

mode="generate"
case "${1:-}" in
  "") ;;
  --check) mode="check" ;;
  *)
    echo "usage: bash proto/generate.sh [--check]" >&2
    exit 2
    ;;
esac

die() {
  echo "proto/generate.sh: $*" >&2
  exit 1
}

protoc_bin="${PROTOC:-protoc}"
command -v "$protoc_bin" >/dev/null 2>&1 ||
  die "protoc not found; install it (Debian: apt-get install protobuf-compiler) or set PROTOC"

# The well-known types (struct.proto, timestamp.proto) ship next to protoc:
# /usr/include on Debian, <prefix>/include for release archives.
wkt_include=""
protoc_dir="$(dirname "$(command -v "$protoc_bin")")"
for dir in "${PROTOC_INCLUDE:-}" "$protoc_dir/../include" /usr/include /usr/local/include; do
  if [[ -n "$dir" && -f "$dir/google/protobuf/struct.proto" ]]; then
    wkt_include="$(cd "$dir" && pwd)"
    break
  fi
done
[[ -n "$wkt_include" ]] ||
  die "google/protobuf/struct.proto not found next to protoc; set PROTOC_INCLUDE to its include directory"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Prefer the installed plugin when node can run it; otherwise run the same
# package through Deno (version pinned by deno.json and deno.lock).
plugin="$root/node_modules/.bin/protoc-gen-es"
if [[ ! -x "$plugin" ]] || ! command -v node >/dev/null 2>&1; then
  version="$(sed -n 's#.*"npm:@bufbuild/protoc-gen-es@\([^"]*\)".*#\1#p' "$root/deno.json")"
  [[ -n "$version" ]] || die "deno.json has no npm:@bufbuild/protoc-gen-es@<version> import"
  command -v deno >/dev/null 2>&1 || die "neither node nor deno is available to run protoc-gen-es"
  plugin="$work/protoc-gen-es"
  cat >"$plugin" <<EOF
#!/bin/sh
cd "$root" && exec deno run -A --quiet "npm:@bufbuild/protoc-gen-es@$version" "\$@"
EOF
  chmod +x "$plugin"
fi

mapfile -t protos < <(cd "$root/proto" && find svc -name '*.proto' | LC_ALL=C sort)
[[ ${#protos[@]} -gt 0 ]] || die "no .proto files under proto/svc"

generated="$work/gen"
mkdir -p "$generated"
(
  cd "$root/proto"
  "$protoc_bin" \
    -I . \
    -I "$wkt_include" \
    --plugin=protoc-gen-es="$plugin" \
    --es_out="$generated" \
    --es_opt="$plugin_opts" \
    "${protos[@]}"
) || die "protoc failed (see the messages above)"

# The agent's policy.proto: typed_content members become bytes, type imports go.
agent_proto="$work/agent_proto"
mkdir -p "$agent_proto/svc/policy/v1"
awk '
  /^import "svc\/policy\/v1\// { next }
  /^  oneof typed_content \{/ { inside = 1; print; next }
  inside && /^  \}/ { inside = 0 }
  inside && /^    [A-Z][A-Za-z0-9]* [a-z_0-9]+ = [0-9]+;/ { sub(/^    [A-Z][A-Za-z0-9]* /, "    bytes "); members++ }
  { print }
  END { if (members == 0) exit 3 }
' "$root/proto/svc/policy/v1/policy.proto" >"$agent_proto/svc/policy/v1/policy.proto" ||
  die "no member of Policy.typed_content found in svc/policy/v1/policy.proto for the agent's copy"
agent_generated="$work/agent_gen"
mkdir -p "$agent_generated"
(
  cd "$agent_proto"
  "$protoc_bin" \
    -I . \
    -I "$wkt_include" \
    --plugin=protoc-gen-es="$plugin" \
    --es_out="$agent_generated" \
    --es_opt="$plugin_opts" \
    svc/policy/v1/policy.proto
) || die "protoc failed on the agent's policy.proto (see the messages above)"

if [[ "$mode" == "check" ]]; then
  stale=0
  for pair in "$out_dir:$generated" "$agent_out_dir:$agent_generated"; do
    dir="${pair%%:*}"
    fresh="${pair#*:}"
    if ! diff -r -q "$dir" "$fresh" >"$work/diff" 2>&1; then
      stale=1
      echo "proto/generate.sh: ${dir#"$root/"}/ is out of date with proto/." >&2
      echo "Run 'deno task proto' and commit the result (this run used $("$protoc_bin" --version);" >&2
      echo "a different protoc version can also cause differences). Differences:" >&2
      sed -e "s#$fresh#<generated>#g" -e "s#$root/##g" "$work/diff" >&2
      diff -r -u "$dir" "$fresh" 2>/dev/null | head -n 40 |
        sed -e "s#$fresh#<generated>#g" -e "s#$root/##g" >&2 || true
    fi
  done
  [[ $stale -eq 0 ]] || exit 1
  echo "shared/gen/ and agent/gen/ are up to date (${#protos[@]} proto files, $("$protoc_bin" --version))."
  (cd "$root" && deno run -A --quiet proto/policy_registries.ts --check) || exit 1
  exit 0
fi

rm -rf "$out_dir" "$agent_out_dir"
mkdir -p "$(dirname "$out_dir")"
cp -R "$generated" "$out_dir"
cp -R "$agent_generated" "$agent_out_dir"
echo "Generated shared/gen/ and agent/gen/ from ${#protos[@]} proto files ($("$protoc_bin" --version))."

# The policy type registries of the shared code, the agent and the console follow the typed_content oneof.
(cd "$root" && deno run -A --quiet proto/policy_registries.ts) || die "the policy type registries could not be written"
