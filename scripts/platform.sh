# Platform choices of scripts/install-tools.sh, in one place so that a test
# (internal/tooling/services/platform_test.go) can run them for every platform.
# Source it; nothing here installs anything.

# The dynoxide version installed where a build is published.
DYNOXIDE_VERSION=1.2.1

# dynoxide_package OS ARCH: the npm package holding dynoxide's binary for a
# machine, given as `uname -s` and `uname -m` print them. dynoxide publishes
# builds for Linux and macOS on x64 and arm64; anywhere else this prints
# nothing and fails, and make dev uses dynalite (pure JavaScript).
dynoxide_package() {
  local os arch
  case "$1" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) return 1 ;;
  esac
  case "$2" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) return 1 ;;
  esac
  echo "@dynoxide/$os-$arch"
}

# sha256_hex: the SHA-256 of standard input, in hex. Linux has sha256sum,
# macOS shasum (and not sha256sum).
sha256_hex() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum | cut -d' ' -f1
  else
    shasum -a 256 | cut -d' ' -f1
  fi
}
