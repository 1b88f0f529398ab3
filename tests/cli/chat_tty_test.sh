#!/usr/bin/env bash
# `trine chat` on a terminal (a pseudo-terminal from script(1)): the Up arrow recalls the last turn
# (libedit), the recalled turn is answered, /exit quits with the timings, and the history file
# holds the turns. Usage: chat_tty_test.sh TRINE_BINARY MODEL
set -euo pipefail
trine=${1:?usage: chat_tty_test.sh TRINE_BINARY MODEL}
model=${2:?usage: chat_tty_test.sh TRINE_BINARY MODEL}
home=$(mktemp -d /tmp/trine-chat-tty.XXXXXX)
trap 'rm -rf "$home"' EXIT
out=$( (sleep 1; printf 'Tell me a story\r'; sleep 2; printf '\033[A'; sleep 0.5; printf '\r'; sleep 2; printf '/exit\r'; sleep 2) |
  HOME="$home" timeout 60 script -qfec "$trine chat -m $model -n 8 --temp 0" /dev/null | tr -d '\r')
fail() { echo "FAIL: $1"; echo "--- output"; echo "$out"; exit 1; }
[ "$(grep -c '> Tell me a story' <<<"$out")" -ge 2 ] || fail "the Up arrow did not bring the turn back"
grep -q 'eval time' <<<"$out" || fail "no timings after /exit"
[ "$(grep -c 'Tell\\040me\\040a\\040story' "$home/.trine_history")" -eq 2 ] || fail "history file: $(cat "$home/.trine_history")"
echo "chat on a terminal: line editing, history and /exit work"
