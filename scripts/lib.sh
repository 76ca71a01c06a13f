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

# libcurl's development files (provider HTTP goes through libcurl), pkg-config to find them,
# curl, which the tests use to ask the test servers things directly, and, for the tests of
# the service (scripts/verify-units, running clients as other users), systemd-analyze,
# setpriv and useradd; Prometheus for the metrics tests; dbus, gnome-keyring and secret-tool
# for the storage key in the Secret Service; sshd and ssh for the agent over `ssh -R`.
ensure_system_packages() {
    local missing=()
    command -v pkg-config >/dev/null || missing+=(pkg-config)
    command -v curl >/dev/null || missing+=(curl)
    command -v systemd-analyze >/dev/null || missing+=(systemd)
    command -v setpriv >/dev/null || missing+=(util-linux)
    command -v useradd >/dev/null || missing+=(passwd)
    dpkg-query -W -f='${Status}' libcurl4-openssl-dev 2>/dev/null | grep -q "install ok installed" || missing+=(libcurl4-openssl-dev)
    # The metrics tests: promtool checks the exposition and the alert rules, a Prometheus
    # server scrapes --metrics-listen.
    command -v promtool >/dev/null && command -v prometheus >/dev/null || missing+=(prometheus)
    # The storage key in the Secret Service (KeyringTests): a private session bus, a real
    # gnome-keyring-daemon on it, and secret-tool, which the daemon itself runs.
    command -v dbus-daemon >/dev/null && command -v dbus-send >/dev/null || missing+=(dbus)
    command -v gnome-keyring-daemon >/dev/null || missing+=(gnome-keyring)
    command -v secret-tool >/dev/null || missing+=(libsecret-tools)
    # The agent forwarded over SSH (SSHForwardingTests): a real sshd on a loopback port, with
    # its own configuration and host key, and the ssh client that forwards the socket.
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || missing+=(openssh-client)
    # The sink's nginx format, loaded by a real nginx (SinkTests).
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    command -v swift >/dev/null || { echo "error: swift is not on PATH (install Swift 6.1 or newer first)" >&2; exit 1; }
    if [ ${#missing[@]} -gt 0 ]; then
        apt_install "${missing[@]}"
    fi
}

# Release binaries: authgated, and authgate as a fully static executable: with no dynamic
# loading it starts in about 3 ms instead of 15 ms inside $(...) (docs/BENCHMARKS.md). The CLI
# builds in a scratch path of its own so that the two sets of flags do not rebuild each
# other's modules.
build_release() {
    swift build -c release --product authgated >&2
    swift build -c release --product authgate --static-swift-stdlib -Xswiftc -static-executable --scratch-path .build/static >&2
}
release_daemon_dir() { swift build -c release --show-bin-path; }
release_cli_dir() { swift build -c release --scratch-path .build/static --show-bin-path; }

# The Python virtualenv (.venv in the repo root) that runs the test identity providers in
# Tests/idp. pip runs only when Tests/idp/requirements.txt changed since the last install
# (its sha256 is kept in .venv/.requirements.sha256), so a warm run costs nothing. Run it from
# the repository root, as scripts/test and scripts/run do.
ensure_python_venv() {
    local venv=".venv" requirements="Tests/idp/requirements.txt"
    local stamp="$venv/.requirements.sha256" wanted
    if [ ! -x "$venv/bin/python" ]; then
        # Debian's python3 ships venv (and its bundled pip) in a separate package.
        if ! python3 -m venv "$venv" >/dev/null 2>&1; then
            rm -rf "$venv"
            apt_install python3-venv
            python3 -m venv "$venv"
        fi
    fi
    wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "==> installing Python packages from $requirements" >&2
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" \
            || { echo "error: pip could not install $requirements" >&2; exit 1; }
        echo "$wanted" >"$stamp"
    fi
}

# Prints the path of swift-argument-parser's generate-manual (the tool behind its
# generate-manual plugin, which would build the whole package in release mode), from DIR when
# it is there, else built in debug mode (seconds: the argument parser is built already).
manual_generator() {
    local dir="$1"
    if [ -x "$dir/generate-manual" ]; then echo "$dir/generate-manual"; return; fi
    swift build --product generate-manual >&2
    echo "$(swift build --show-bin-path)/generate-manual"
}

# Runs the Swift tests as $AUTHGATE_TEST_SHARDS (default 4) test processes at once, each given
# whole suites (the largest first, each to the shard with the fewest tests so far), and prints
# each shard's output as it ends. Why processes: a process-level test blocks its thread while
# it waits for a child process or a socket, and Swift's cooperative pool has one thread per
# core, so one test process runs two such tests at a time on this 2-core machine however idle
# the CPU is. The test bundle is run directly (what `swift test --skip-build` runs, without
# SwiftPM's seconds of planning per process). Fails when any shard fails.
run_test_shards() {
    local shards="${AUTHGATE_TEST_SHARDS:-4}" bundle logs list index status=0
    bundle="$(swift build --show-bin-path)/authgatePackageTests.xctest"
    list="$("$bundle" --testing-library swift-testing --list-tests)"
    local suites counts=() patterns=() pids=() suite size smallest
    mapfile -t suites < <(sed 's|/.*||' <<<"$list" | sort | uniq -c | sort -rn | awk '{print $2}')
    for ((index = 0; index < shards; index++)); do counts[index]=0; patterns[index]=""; done
    for suite in "${suites[@]}"; do
        size="$(grep -c "^$suite/" <<<"$list")"
        smallest=0
        for ((index = 1; index < shards; index++)); do
            [ "${counts[index]}" -lt "${counts[smallest]}" ] && smallest=$index
        done
        counts[smallest]=$((counts[smallest] + size))
        patterns[smallest]="${patterns[smallest]:+${patterns[smallest]}|}$suite/"
    done
    echo "==> testing: $(wc -l <<<"$list") tests in ${#suites[@]} suites, $shards processes" >&2
    logs="$(mktemp -d)"
    for ((index = 0; index < shards; index++)); do
        [ -n "${patterns[index]}" ] || continue
        # A shard takes under a minute; one that hangs fails the run instead of holding it.
        timeout --kill-after=10 "${AUTHGATE_SHARD_TIMEOUT:-600}" \
            "$bundle" --testing-library swift-testing --filter "^(${patterns[index]})" >"$logs/$index.log" 2>&1 &
        pids[index]=$!
    done
    for index in "${!pids[@]}"; do
        local code=0
        wait "${pids[index]}" || code=$?
        echo "==> test shard $((index + 1)) of $shards: ${patterns[index]//|/ }" >&2
        cat "$logs/$index.log"
        if [ "$code" -ne 0 ]; then
            status=1
            if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
                echo "test shard $((index + 1)) did not finish within ${AUTHGATE_SHARD_TIMEOUT:-600} s: a test hangs (the last one started above without an end)" >&2
            fi
        fi
    done
    rm -rf "$logs"
    return "$status"
}
