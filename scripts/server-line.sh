# Sourced by the scripts that start `convrag serve` in the background: one way to wait for a line
# the server prints (the address it bound with `--bind 127.0.0.1:0`, the first-run sign-in link).
#
#   value="$(server_line LOG ERRLOG PID SECONDS SED_SCRIPT WHAT)" || exit 1
#
# Prints the first line `sed -n SED_SCRIPT` makes of LOG, polling every 0.1 s. When the server
# (PID) exits first, or SECONDS pass, it shows ERRLOG and fails through the caller's die(). LOG
# may not exist yet: the shell that started the server opens its redirections in the background.

# The address line `convrag serve` prints once it listens.
LISTENING_SED='s/^convrag listening on \(http:[^ ]*\)$/\1/p'

server_line() {
  local log="$1" errlog="$2" pid="$3" seconds="$4" script="$5" what="$6" value="" _
  for _ in $(seq 1 $((seconds * 10))); do
    if [ -f "$log" ]; then
      value="$(sed -n "$script" "$log" | head -n1)"
      if [ -n "$value" ]; then
        echo "$value"
        return 0
      fi
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$errlog" >&2 2>/dev/null; die "the server exited while starting"; }
    sleep 0.1
  done
  cat "$errlog" >&2 2>/dev/null
  die "the server printed no $what within $seconds s"
}
