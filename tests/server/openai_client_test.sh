#!/usr/bin/env bash
# The official `openai` npm client (pinned in tests/server/node/package.json and its lock file)
# against `trine serve`: installs the client from the npm registry (npm ci), starts a server on a
# free loopback port, runs node/openai_client_test.mjs, stops the server with SIGTERM and checks
# that it exits 0. Usage: openai_client_test.sh TRINE_BINARY
set -euo pipefail
trine=${1:?usage: openai_client_test.sh TRINE_BINARY}
here="$(cd "$(dirname "$0")" && pwd)"
work=$(mktemp -d /tmp/trine-openai-test.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cp "$here/node/package.json" "$here/node/package-lock.json" "$here/node/openai_client_test.mjs" "$work/"
(cd "$work" && timeout 300 npm ci --no-audit --no-fund --loglevel=error)

"$trine" serve --port 0 -t 2 -np 4 -c 4096 --api-key test-key 2>"$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
  if [ -n "$port" ] && grep -q 'ready in' "$work/server.log"; then break; fi
  sleep 0.1
done
if [ -z "$port" ] || ! grep -q 'ready in' "$work/server.log"; then
  echo "trine serve did not come up:"; cat "$work/server.log"; exit 1
fi
(cd "$work" && timeout 300 node openai_client_test.mjs "http://127.0.0.1:$port")
kill -TERM "$server_pid"
rc=0
timeout 60 tail --pid="$server_pid" -f /dev/null || { echo "trine serve did not exit after SIGTERM"; exit 1; }
wait "$server_pid" || rc=$?
server_pid=""
if [ "$rc" -ne 0 ]; then echo "trine serve exited $rc after SIGTERM:"; cat "$work/server.log"; exit 1; fi
echo "openai client test: all passed, server drained and exited 0"
