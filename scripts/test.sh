#!/usr/bin/env bash
# make test (and CI, through .ci/run): every check of the project, one
# phase after another, each one's wall time printed when it ends and all of
# them at the end (numbers to read, never a limit). The phases:
#   prepare  the npm tools (install-tools.sh --lint) and web's and uppy's npm packages
#   lint     make lint, which needs no more than that: on a fresh machine a
#            lint failure shows in about a minute, not after the tools' builds
#   web      make web uppy: web/'s lint, build (web/dist) and unit tests, then
#            the Uppy plugin's (uppy/)
#   tools    make tools: the local servers (Go ones built from source)
#   go       make test-go: go test -race of every package on Versity Gateway
#   minio    make test-minio: the S3 tests again on MinIO
#   fuzz     make fuzz: every fuzz target, 5000 executions each
# go test's vet is off in go, minio and fuzz: lint's go vet ./... covers it.
# Nothing runs beside anything else: on two cores each of these phases
# keeps both busy, and side by side they took longer, not less (prepare,
# then tools, lint and web together: 116 and 139 s, warm, against 86 and
# 97 s one after the other);
# MinIO's tests and fuzzing beside the main pass slowed it by as much as
# they took, and timing-bound tests began to fail.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}

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
phase prepare lint-tools web/node_modules/.installed uppy/node_modules/.installed
phase lint lint
phase web web uppy
phase tools tools

# tools is installed: neither minio nor fuzz installs it again (-o tools).
# -vet=off: go test's vet checks are a subset of go vet ./..., which make
# lint ran above; the packages are not vetted a second time.
phase go test-go GOTEST_FLAGS=-vet=off
phase minio -o tools test-minio GOTEST_FLAGS=-vet=off
phase fuzz fuzz FUZZTIME=5000x FUZZ_JOBS=2 GOTEST_FLAGS=-vet=off
took total "$run_started" ok
summary
