#!/usr/bin/env bash
# Installs the pinned local servers into .tools/bin (git-ignored). Safe to run
# again: npm tools are reinstalled only when their lock file changes, and Go
# tools are built again only when their pins (tools/go.mod and go.sum, or
# tools/minio's) change; a build reuses Go's build cache (the first one
# takes minutes).
#   install-tools.sh         everything make test needs
#   install-tools.sh --dev   only what make dev needs: no linters, no Chromium
#   install-tools.sh --lint  only what make lint needs: the npm tools (redocly)
# Runs on Linux and macOS, x64 and arm64 (scripts/platform.sh has the choices).
#   dynoxide   DynamoDB-compatible server (static binary): the npm package
#              built for this machine, into .tools/dynoxide, where one is
#              published; make dev uses dynalite when it is missing
#   dynalite   DynamoDB-compatible server that ignores ALL_OLD (npm, JavaScript)
#   redocly    Redocly CLI, lints openapi.yaml in make lint (npm, not with --dev)
#   prism      Stoplight Prism, the OpenAPI validating proxy of the contract
#              tests (npm, not with --dev)
#   iamsim     @cloud-copilot/iam-simulate, the IAM policy evaluator of
#              internal/checks/iamcheck's tests (npm, its own lock file in
#              internal/checks/iamcheck/sim, into .tools/iamsim; not with --dev).
#              AGPL: a test tool, never shipped.
#   versitygw  S3-compatible gateway (Go tool, ~2 min cold build)
#   minio      MinIO, the second S3 server of the tests (Go tool, pinned in
#              tools/minio/go.mod apart from the others, whose requirements
#              would otherwise bend its; not with --dev unless DEV_S3=minio,
#              as `DEV_S3=minio make dev` sets it). AGPL: a test server,
#              never shipped.
#   aws-lambda-rie  Lambda Runtime Interface Emulator (Go tool; Linux only:
#              it runs the Linux bootstraps, for DEV_RIE=true and the tests)
#   tusd       the tus reference server, make bench's resumable-upload peer (Go
#              tool, not with --dev)
# Go tools are pinned by the tool directives of tools/go.mod (kept out of the
# root go.mod, whose requirements every importer of the library inherits);
# the linters among them (staticcheck, goimports) run with go tool.
#   chromium        Debian's Chromium, for the browser tests (apt, as root;
#                   not with --dev)
#   redis-server    Debian's Redis, for pkg/idempotency/redisstore's tests
#                   (apt, as root; not with --dev; Debian's version, printed)
# Written for bash 3.2 too (macOS's /bin/bash).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=${TOOLS_DIR:-$ROOT/.tools}
. scripts/platform.sh

dev=false lint=false
case "${1:-}" in
  "") ;;
  --dev) dev=true ;;
  --lint) lint=true ;;
  *) echo "usage: $0 [--dev | --lint]" >&2; exit 2 ;;
esac
os=$(uname -s)
arch=$(uname -m)
mkdir -p "$TOOLS/bin" "$TOOLS/npm"

# stamp NAME VERSION: true when NAME is already installed at VERSION.
stamp() { [ -f "$TOOLS/bin/.$1.version" ] && [ "$(cat "$TOOLS/bin/.$1.version")" = "$2" ]; }

# go_pin DIR WORDS...: the pins of the Go tools module in DIR, with WORDS
# (what is built from it) and the platform, as one stamp.
go_pin() {
  local dir=$1
  shift
  { cat "$dir/go.mod" "$dir/go.sum"; echo "$* $os $arch"; } | sha256_hex | cut -c1-16
}

# built NAME PIN BINARIES...: true when NAME's stamp is PIN and every one
# of BINARIES is in .tools/bin.
built() {
  local name=$1 pin=$2 b
  shift 2
  stamp "$name" "$pin" || return 1
  for b in "$@"; do
    [ -x "$TOOLS/bin/$b" ] || return 1
  done
}

# MinIO's first build is the longest step here (minutes of CPU), and the
# steps below mostly wait on the network (npm, apt): so it starts first, in
# the background, and the run waits for it at the end.
minio_pid=
minio_pin=$(go_pin tools/minio minio)
if ! $lint && { ! $dev || [ "${DEV_S3:-}" = minio ]; } && built minio "$minio_pin" minio; then
  echo "install-tools: minio is built at tools/minio/go.mod's pins"
elif ! $lint && { ! $dev || [ "${DEV_S3:-}" = minio ]; }; then
  echo "install-tools: building minio from source, pinned in tools/minio/go.mod (the first time takes several minutes; later runs reuse Go's build cache)"
  rm -f "$TOOLS/bin/.minio.version"
  (cd tools/minio && go build -o "$TOOLS/bin/" github.com/minio/minio) > "$TOOLS/minio-build.log" 2>&1 &
  minio_pid=$!
  # A run that stops early does not leave the build running.
  trap '[ -z "$minio_pid" ] || kill "$minio_pid" 2>/dev/null || true' EXIT
fi

# npm tools: dependencies (make dev) and devDependencies (lint, tests). A full
# install serves make dev too; one made with --dev is completed by a full run.
npm_pin=$(cat tools/package.json tools/package-lock.json | sha256_hex | cut -c1-16)
npm_bin=$TOOLS/npm/node_modules/.bin
if $dev; then
  { stamp npm "$npm_pin full" || stamp npm "$npm_pin dev"; } && [ -x "$npm_bin/dynalite" ] && npm_ok=true || npm_ok=false
else
  stamp npm "$npm_pin full" && [ -x "$npm_bin/dynalite" ] && [ -x "$npm_bin/redocly" ] && [ -x "$npm_bin/prism" ] && npm_ok=true || npm_ok=false
fi
if ! $npm_ok; then
  if $dev; then
    echo "install-tools: npm tools for make dev (dynalite) from tools/package-lock.json"
    omit=--omit=dev
  else
    echo "install-tools: npm tools (dynalite, redocly, prism) from tools/package-lock.json"
    omit=
  fi
  rm -f "$TOOLS/bin/.npm.version"
  cp tools/package.json tools/package-lock.json "$TOOLS/npm/"
  (cd "$TOOLS/npm" && npm ci ${omit:+"$omit"} --no-audit --no-fund --loglevel=error)
  ln -sf "$npm_bin/dynalite" "$TOOLS/bin/dynalite"
  if $dev; then
    rm -f "$TOOLS/bin/redocly" "$TOOLS/bin/prism"
    echo "$npm_pin dev" > "$TOOLS/bin/.npm.version"
  else
    ln -sf "$npm_bin/redocly" "$TOOLS/bin/redocly"
    ln -sf "$npm_bin/prism" "$TOOLS/bin/prism"
    echo "$npm_pin full" > "$TOOLS/bin/.npm.version"
  fi
fi
# make lint runs redocly, and nothing else from here.
if $lint; then
  exit 0
fi

# The IAM evaluator has a lock file of its own, kept out of tools/: it is a
# test tool under the AGPL and nothing else depends on it. Reinstalled only
# when that lock file or its package.json changes.
if ! $dev; then
  iamsim_pin=$(cat internal/checks/iamcheck/sim/package.json internal/checks/iamcheck/sim/package-lock.json | sha256_hex | cut -c1-16)
  if ! { stamp iamsim "$iamsim_pin" && [ -f "$TOOLS/iamsim/node_modules/@cloud-copilot/iam-simulate/package.json" ]; }; then
    echo "install-tools: IAM policy evaluator (iam-simulate) from internal/checks/iamcheck/sim/package-lock.json"
    rm -rf "$TOOLS/iamsim" "$TOOLS/bin/.iamsim.version"
    mkdir -p "$TOOLS/iamsim"
    cp internal/checks/iamcheck/sim/package.json internal/checks/iamcheck/sim/package-lock.json "$TOOLS/iamsim/"
    (cd "$TOOLS/iamsim" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$iamsim_pin" > "$TOOLS/bin/.iamsim.version"
  fi
fi

# dynoxide: its package differs by platform, so it is chosen here, not in the
# lock file, and installed (exact version) into a folder of its own. Where
# that fails (a registry without the package), the stamp says so and later
# runs use dynalite without asking again.
if pkg=$(dynoxide_package "$os" "$arch"); then
  want="$pkg@$DYNOXIDE_VERSION"
  if { stamp dynoxide "$want" && [ -x "$TOOLS/bin/dynoxide" ]; } || stamp dynoxide "unavailable $want"; then
    :
  else
    echo "install-tools: dynoxide $DYNOXIDE_VERSION ($pkg)"
    rm -rf "$TOOLS/dynoxide" "$TOOLS/bin/dynoxide" "$TOOLS/bin/.dynoxide.version"
    mkdir -p "$TOOLS/dynoxide"
    if npm install --prefix "$TOOLS/dynoxide" --no-save --no-audit --no-fund --loglevel=error "$want" &&
      "$TOOLS/dynoxide/node_modules/$pkg/dynoxide" --version >/dev/null; then
      ln -sf "$TOOLS/dynoxide/node_modules/$pkg/dynoxide" "$TOOLS/bin/dynoxide"
      echo "$want" > "$TOOLS/bin/.dynoxide.version"
    else
      rm -rf "$TOOLS/dynoxide"
      echo "unavailable $want" > "$TOOLS/bin/.dynoxide.version"
    fi
  fi
  why="$want did not install or run here; to try again: rm $TOOLS/bin/.dynoxide.version"
else
  rm -rf "$TOOLS/dynoxide" "$TOOLS/bin/dynoxide" "$TOOLS/bin/.dynoxide.version"
  why="dynoxide publishes no build for $os $arch"
fi
if [ -x "$TOOLS/bin/dynoxide" ]; then
  echo "install-tools: DynamoDB for make dev: dynoxide $DYNOXIDE_VERSION ($pkg)"
else
  echo "install-tools: DynamoDB for make dev: dynalite ($why)"
  echo "install-tools: dynalite drops ALL_OLD, so a conflicting claim costs one more GetItem"
  if ! $dev; then
    echo "install-tools: the integration tests need dynoxide; they run on Linux x64 in CI" >&2
  fi
fi

# Go tools: make dev runs versitygw (and aws-lambda-rie, on Linux); tusd is
# make bench's peer only, so --dev leaves it out. go build runs every time:
# the first build takes minutes and prints nothing, so say so before it.
go_tools="github.com/versity/versitygw/cmd/versitygw"
if [ "$os" = Linux ]; then
  go_tools="$go_tools github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
else
  echo "install-tools: no aws-lambda-rie on $os: it runs Linux bootstraps (DEV_RIE=true is Linux-only)"
fi
if ! $dev; then
  go_tools="$go_tools github.com/tus/tusd/v2/cmd/tusd"
fi
names= last= bins=
for p in $go_tools; do
  [ -z "$last" ] || names="${names:+$names, }$last"
  last=${p##*/}
  bins="$bins $last"
done
# $go_tools and $bins unquoted: lists of import paths and names, none with a space.
go_tools_pin=$(go_pin tools $go_tools)
if built go-tools "$go_tools_pin" $bins; then
  echo "install-tools: ${names:+$names and }$last are built at tools/go.mod's pins"
else
  echo "install-tools: building ${names:+$names and }$last from source, pinned in tools/go.mod (the first time takes a few minutes; later runs reuse Go's build cache)"
  rm -f "$TOOLS/bin/.go-tools.version"
  (cd tools && go build -o "$TOOLS/bin/" $go_tools)
  echo "$go_tools_pin" > "$TOOLS/bin/.go-tools.version"
fi

# The browser tests drive Debian's Chromium (never a browser downloaded by a
# test tool). Installed here when running as root with apt, as on CI; make
# dev needs no browser.
if ! $dev && [ ! -x /usr/bin/chromium ] && [ "${INSTALL_CHROMIUM:-1}" = 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install-tools: chromium (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "install-tools: /usr/bin/chromium is missing; install Debian's chromium for the browser tests" >&2
  fi
fi

# The Redis store's tests start Debian's redis-server themselves, on a free
# port and without persistence; make dev needs no Redis. Installed as
# Chromium is, and pinned to nothing but Debian's version, which is printed.
if ! $dev && ! command -v redis-server >/dev/null && [ "${INSTALL_REDIS:-1}" = 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install-tools: redis-server (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  else
    echo "install-tools: redis-server is missing; install Debian's redis-server for the Redis store's tests" >&2
  fi
fi
if ! $dev && command -v redis-server >/dev/null; then
  echo "install-tools: $(redis-server --version)"
fi

if [ -n "$minio_pid" ]; then
  status=0
  wait "$minio_pid" || status=$?
  minio_pid=
  if [ "$status" != 0 ]; then
    cat "$TOOLS/minio-build.log" >&2
    echo "install-tools: the minio build failed (above)" >&2
    exit 1
  fi
  echo "$minio_pin" > "$TOOLS/bin/.minio.version"
fi
