#!/usr/bin/env bash
# Installs the pinned local servers into .tools/bin (git-ignored). Safe to run
# again: npm tools are reinstalled only when their lock file changes, and Go
# tools are rebuilt from Go's build cache (the first build takes minutes).
#   dynoxide   DynamoDB-compatible server (npm, static binary)
#   dynalite   DynamoDB-compatible server that ignores ALL_OLD (npm)
#   redocly    Redocly CLI, lints openapi.yaml in make lint (npm)
#   prism      Stoplight Prism, the OpenAPI validating proxy of the contract tests (npm)
#   versitygw  S3-compatible gateway (Go tool, ~2 min cold build)
#   aws-lambda-rie  Lambda Runtime Interface Emulator (Go tool)
# Go tools are pinned by the tool directives of tools/go.mod (kept out of the
# root go.mod, whose requirements every importer of the library inherits);
# the linters among them (staticcheck, goimports) run with go tool.
#   chromium        Debian's Chromium, for the browser tests (apt, as root)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=${TOOLS_DIR:-$ROOT/.tools}
mkdir -p "$TOOLS/bin" "$TOOLS/npm"

# stamp NAME VERSION: true when NAME is already installed at VERSION.
stamp() { [ -f "$TOOLS/bin/.$1.version" ] && [ "$(cat "$TOOLS/bin/.$1.version")" = "$2" ]; }

npm_pin=$(cat tools/package.json tools/package-lock.json | sha256sum | cut -c1-16)
if ! stamp npm "$npm_pin" || [ ! -x "$TOOLS/bin/dynoxide" ] || [ ! -x "$TOOLS/bin/prism" ]; then
  echo "install-tools: npm tools (dynoxide, dynalite, redocly, prism) from tools/package-lock.json"
  cp tools/package.json tools/package-lock.json "$TOOLS/npm/"
  (cd "$TOOLS/npm" && npm ci --no-audit --no-fund --loglevel=error)
  ln -sf "$TOOLS/npm/node_modules/@dynoxide/linux-x64/dynoxide" "$TOOLS/bin/dynoxide"
  ln -sf "$TOOLS/npm/node_modules/.bin/dynalite" "$TOOLS/bin/dynalite"
  ln -sf "$TOOLS/npm/node_modules/.bin/redocly" "$TOOLS/bin/redocly"
  ln -sf "$TOOLS/npm/node_modules/.bin/prism" "$TOOLS/bin/prism"
  echo "$npm_pin" > "$TOOLS/bin/.npm.version"
fi

echo "install-tools: versitygw, aws-lambda-rie (pinned in tools/go.mod)"
(cd tools && go build -o "$TOOLS/bin/" \
  github.com/versity/versitygw/cmd/versitygw \
  github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie)

# The browser tests drive Debian's Chromium (never a browser downloaded by a
# test tool). Installed here when running as root with apt, as on CI.
if [ ! -x /usr/bin/chromium ] && [ "${INSTALL_CHROMIUM:-1}" = 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install-tools: chromium (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "install-tools: /usr/bin/chromium is missing; install Debian's chromium for the browser tests" >&2
  fi
fi
