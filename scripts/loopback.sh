# shellcheck shell=bash
# Sourced (not run) by scripts/demo.sh and the script tests that start their own processes:
#   free_port          a port on 127.0.0.1 that nobody answers on
#   wait_for SECS CMD  runs CMD until it succeeds, at most SECS seconds
# Bash only (uses /dev/tcp and $RANDOM).

# A port on 127.0.0.1 that nobody answers on, from 20000-31999: below the kernel's ephemeral
# range (32768 up), so no outgoing connection (of a test running beside the demo) can be given
# it before the server or the daemon binds it.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

# Waits until "$@" succeeds, at most $timeout seconds (polling, not a fixed sleep).
wait_for() {
  local timeout="$1"; shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}
