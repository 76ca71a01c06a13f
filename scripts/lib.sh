# Shared by scripts/run and scripts/test: install what a fresh Debian machine with Swift lacks.
# shellcheck shell=bash

# Runs apt-get as root, through sudo when we are not root.
apt_install() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: $*" >&2; exit 1; }
        sudo="sudo"
    fi
    echo "==> installing Debian packages: $*" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# libcurl's development files (provider HTTP goes through libcurl) and pkg-config to find them.
ensure_system_packages() {
    local missing=()
    command -v pkg-config >/dev/null || missing+=(pkg-config)
    dpkg-query -W -f='${Status}' libcurl4-openssl-dev 2>/dev/null | grep -q "install ok installed" || missing+=(libcurl4-openssl-dev)
    command -v swift >/dev/null || { echo "error: swift is not on PATH (install Swift 6.1 or newer first)" >&2; exit 1; }
    if [ ${#missing[@]} -gt 0 ]; then
        apt_install "${missing[@]}"
    fi
}
