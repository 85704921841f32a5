# Sourced by scripts/test: each check as a named step whose duration is printed as it ends, and a
# summary of every step (its seconds and whether it passed) when the script exits, passed or not.
#
#   step NAME COMMAND [ARGUMENT...]     runs the command in the foreground
#   step_start NAME COMMAND [...]       starts it in the background, its output in a log
#   step_wait NAME                      waits for it, prints its log, records it
#   step_summary [STATUS]               the table; scripts/test runs it on EXIT

steps_names=()
steps_seconds=()
steps_results=()
steps_began=$SECONDS
steps_logs=$(mktemp -d "${TMPDIR:-/tmp}/hot-steps.XXXXXX")
declare -A steps_pids=()

steps_record() {
  local name=$1 seconds=$2 result=$3
  steps_names+=("$name")
  steps_seconds+=("$seconds")
  steps_results+=("$result")
  echo "scripts/test: step '$name' $result in $seconds s" >&2
}

step() {
  local name=$1 began=$SECONDS status=0
  shift
  echo "scripts/test: step '$name' started" >&2
  "$@" || status=$?
  if [[ $status -eq 0 ]]; then
    steps_record "$name" $((SECONDS - began)) passed
  else
    steps_record "$name" $((SECONDS - began)) "FAILED (exit $status)"
    return "$status"
  fi
}

step_start() {
  local name=$1
  shift
  echo "scripts/test: step '$name' started in the background" >&2
  (
    began=$SECONDS
    status=0
    "$@" >"$steps_logs/$name.log" 2>&1 || status=$?
    echo "$((SECONDS - began)) $status" >"$steps_logs/$name.end"
    exit "$status"
  ) &
  steps_pids[$name]=$!
}

step_wait() {
  local name=$1 seconds status
  wait "${steps_pids[$name]}" || true
  unset "steps_pids[$name]"
  cat "$steps_logs/$name.log" >&2
  read -r seconds status <"$steps_logs/$name.end"
  if [[ $status -eq 0 ]]; then
    steps_record "$name (in parallel)" "$seconds" passed
  else
    steps_record "$name (in parallel)" "$seconds" "FAILED (exit $status)"
    return "$status"
  fi
}

step_summary() {
  local status=${1:-$?} index pid
  # A step still running in the background when a foreground step failed is stopped.
  for pid in "${steps_pids[@]}"; do
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  {
    echo
    echo "scripts/test: summary"
    printf '  %-52s %7s  %s\n' step seconds result
    for index in "${!steps_names[@]}"; do
      printf '  %-52s %7s  %s\n' "${steps_names[$index]}" "${steps_seconds[$index]}" "${steps_results[$index]}"
    done
    printf '  %-52s %7s  %s\n' "total (wall clock)" $((SECONDS - steps_began)) "$([[ $status -eq 0 ]] && echo passed || echo "FAILED (exit $status)")"
  } >&2
  rm -rf "$steps_logs"
}
