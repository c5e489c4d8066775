#!/usr/bin/env bash
# make test (and CI, through .ci/run): every check of the project, arranged
# so that what waits runs beside what computes. The phases:
#   prepare  the npm tools (install-tools.sh --lint) and web's npm packages
#   tools    make tools: the local servers (Go ones built from source)
#   lint     make lint
#   web      make web: web/'s lint, build (web/dist) and unit tests
#   go       make test-go: go test -race of every package on Versity Gateway
#   minio    make test-minio: the S3 tests again on MinIO
#   fuzz     make fuzz: every fuzz target, 5000 executions each
# tools, lint and web run side by side once prepare is done (lint and web
# need only what prepare installs), each into a log of its own under
# .build/test/, printed whole when it ends; go needs tools and web/dist, and
# the rest run after it, one at a time (beside it, on two cores, they slowed
# it by as much as they took, and timing-bound tests began to fail). go
# test's vet is off in go, minio and fuzz: lint's go vet ./... covers it. A
# phase that fails ends the run once the phases beside it have ended. Each
# phase's wall time is printed when it ends and all of them at the end:
# numbers to read, never a limit.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=.build/test
mkdir -p "$logs"

times=
now() { date +%s; }
took() { # took NAME START STATUS
  local s=$(($(now) - $2))
  times="$times$(printf '  %-8s %4d s  %s' "$1" "$s" "$3")"$'\n'
  echo "test: $1 $3 in $s s"
}
summary() {
  echo "test: wall time of each phase"
  printf '%s' "$times"
}

# phase NAME TARGET...: make TARGET... in the foreground, output as it comes.
phase() {
  local name=$1 start status=0
  shift
  start=$(now)
  echo "test: $name (make $*)"
  "$MAKE" --no-print-directory "$@" || status=$?
  if [ "$status" != 0 ]; then
    took "$name" "$start" "FAILED"
    summary
    exit "$status"
  fi
  took "$name" "$start" ok
}

run_started=$(now)
phase prepare lint-tools web/node_modules/.installed
group_start=$(now)

# tools, lint and web side by side, each in a process group of its own
# (set -m), so that a run that stops early stops all that it started.
set -m
pids= names=
for name in tools lint web; do
  echo "test: $name (make $name, beside the others; output in $logs/$name.log)"
  (
    start=$(now) status=0
    "$MAKE" --no-print-directory "$name" > "$logs/$name.log" 2>&1 || status=$?
    echo "$status $(($(now) - start))" > "$logs/$name.status"
    exit "$status"
  ) &
  pids="$pids $!" names="$names $name"
done
set +m
trap 'for p in $pids; do kill -- "-$p" 2>/dev/null || true; done' EXIT
failed=
set -- $names
for pid in $pids; do
  name=$1
  shift
  wait "$pid" || true
  read -r status secs < "$logs/$name.status" || { status=1 secs=?; }
  echo "test: ---- $name ($logs/$name.log)"
  cat "$logs/$name.log"
  [ "$status" = 0 ] && result=ok || { result=FAILED; failed="$failed $name"; }
  times="$times$(printf '  %-8s %4s s  %s (beside the others)' "$name" "$secs" "$result")"$'\n'
  echo "test: $name $result in $secs s"
done
trap - EXIT
rm -f "$logs"/*.status
took "tools+lint+web" "$group_start" "$([ -z "$failed" ] && echo ok || echo FAILED)"
if [ -n "$failed" ]; then
  echo "test:$failed failed (above)" >&2
  summary
  exit 1
fi

# tools is installed: neither minio nor fuzz installs it again (-o tools).
# -vet=off: go test's vet checks are a subset of go vet ./..., which make
# lint ran above; the packages are not vetted a second time.
phase go test-go GOTEST_FLAGS=-vet=off
phase minio -o tools test-minio GOTEST_FLAGS=-vet=off
phase fuzz fuzz FUZZTIME=5000x FUZZ_JOBS=2 GOTEST_FLAGS=-vet=off
took total "$run_started" ok
summary
