# Shared by the scripts: install what a fresh Debian machine with Swift lacks — for building and
# running only (scripts/run, scripts/install), or for the tests too (scripts/test).
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

# What building and running need, and nothing more (scripts/run, scripts/install):
# libcurl's headers (provider HTTP goes through libcurl, opened at run time: Sources/CCurl).
# Prints the missing packages' names.
missing_build_packages() {
    dpkg-query -W -f='${Status}' libcurl4-openssl-dev 2>/dev/null | grep -q "install ok installed" || echo libcurl4-openssl-dev
}

# What only the tests (and the benchmark) use; prints the missing packages' names: curl, which
# the tests use to ask the test servers things directly; for the tests of the service
# (scripts/verify-units, running clients as other users), systemd-analyze, setpriv and useradd;
# Prometheus for the metrics tests; dbus, gnome-keyring and secret-tool for the storage key in
# the Secret Service; sshd and ssh for the agent over `ssh -R`; nginx for the sink's nginx format.
missing_test_packages() {
    command -v curl >/dev/null || echo curl
    command -v systemd-analyze >/dev/null || echo systemd
    command -v setpriv >/dev/null || echo util-linux
    command -v useradd >/dev/null || echo passwd
    # The metrics tests: promtool checks the exposition and the alert rules, a Prometheus
    # server scrapes --metrics-listen.
    command -v promtool >/dev/null && command -v prometheus >/dev/null || echo prometheus
    # The storage key in the Secret Service (KeyringTests): a private session bus, a real
    # gnome-keyring-daemon on it, and secret-tool, which the daemon itself runs.
    command -v dbus-daemon >/dev/null && command -v dbus-send >/dev/null || echo dbus
    command -v gnome-keyring-daemon >/dev/null || echo gnome-keyring
    command -v secret-tool >/dev/null || echo libsecret-tools
    # The desktop notifications (NotificationTests): notify-send, which the daemon runs, talks
    # to a notification server stand-in on a private session bus.
    command -v notify-send >/dev/null || echo libnotify-bin
    # The agent forwarded over SSH (SSHForwardingTests): a real sshd on a loopback port, with
    # its own configuration and host key, and the ssh client that forwards the socket.
    [ -x /usr/sbin/sshd ] || echo openssh-server
    command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || echo openssh-client
    # The sink's nginx format, loaded by a real nginx (SinkTests).
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || echo nginx
    # Provider traffic through an HTTP proxy (ProxyTests).
    command -v tinyproxy >/dev/null || echo tinyproxy
    # The proxy bench's TLS upstream certificate (authgate-bench --only proxy).
    [ -x /usr/bin/openssl ] || echo openssl
}

ensure_swift() {
    command -v swift >/dev/null || { echo "error: swift is not on PATH (install Swift 6.1 or newer first)" >&2; exit 1; }
}

# scripts/package: debhelper and dpkg-dev pack the package, lintian checks it; the package's
# test (scripts/test-package) makes a clean Debian 12 root with mmdebstrap.
ensure_package_tools() {
    local missing=()
    command -v dh >/dev/null || missing+=(debhelper)
    command -v dpkg-buildpackage >/dev/null || missing+=(dpkg-dev)
    command -v lintian >/dev/null || missing+=(lintian)
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
}

# scripts/run and scripts/install: what building and running need.
ensure_build_packages() {
    ensure_swift
    local missing
    mapfile -t missing < <(missing_build_packages)
    if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
}

# scripts/test, the benchmark, fuzzing and coverage: also what the tests use. Several of these
# packages are daemons (nginx, prometheus, sshd, dbus) that Debian would start and enable as
# services on install; the tests start their own, so a policy-rc.d keeps Debian from starting
# any during this install (the standard way: invoke-rc.d asks it, and exit 101 means "no").
ensure_system_packages() {
    ensure_build_packages
    local missing
    mapfile -t missing < <(missing_test_packages)
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "==> the tests need these Debian packages, installed now without starting their services: ${missing[*]}" >&2
    local sudo="" policy=/usr/sbin/policy-rc.d placed=0
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# Placed by authgate scripts/test for one apt-get install: start no service.\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 0755 "$policy"
        placed=1
    fi
    local status=0
    (apt_install "${missing[@]}") || status=$?
    if [ "$placed" -eq 1 ]; then $sudo rm -f "$policy"; fi
    return "$status"
}

# The one release build (Package.swift, AUTHGATE_TESTABLE_RELEASE): what the full test run
# tests, what scripts/package ships and scripts/install installs, and what scripts/bench
# measures — both with the Swift runtime linked statically and glibc dynamically — so the
# package a user builds is the package the tests check. Not a fully static CLI: glibc's name
# service (getpwnam for `sink --owner`, a user name git or docker passes) loads its modules
# (libnss_systemd) into a static binary, which crashed on a name /etc/passwd lacks. Without
# debug information (the package strips it anyway; ~10 % of a cold build), and without the
# $ORIGIN library path SwiftPM adds: they load no library of their own, and it sent the
# dynamic loader through ~20 directories beside the binary at every start.
release_flags=(-c release -debug-info-format none --disable-local-rpath)
build_release() {
    AUTHGATE_TESTABLE_RELEASE=1 swift build "${release_flags[@]}" --product authgate >&2
    link_programs "$(release_dir)"
}
# authgate is every program, chosen by the name it is run by (Invocation): the daemon and the
# helpers are links to it, in a build directory as where it is installed.
program_links=(authgated git-credential-authgate docker-credential-authgate)
link_programs() {
    local name
    for name in "${program_links[@]}"; do ln -sfn authgate "$1/$name"; done
}
# $AUTHGATE_RELEASE_DIR, when set, names the release build's directory (scripts/test sets it:
# it packages that build while another build runs in .build, whose lock
# `swift build --show-bin-path` would wait for).
release_dir() { echo "${AUTHGATE_RELEASE_DIR:-$(AUTHGATE_TESTABLE_RELEASE=1 swift build "${release_flags[@]}" --show-bin-path)}"; }

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

# Runs the Swift tests: the unit tests (every target but AuthGateSystemTests: in process, seconds)
# in one test process, beside $AUTHGATE_TEST_SHARDS (default 4) processes of system tests, each
# given whole suites balanced by measured time: the longest suite first, each to the shard with
# the least time so far. The times are in Tests/suite-seconds, each suite run alone
# (`scripts/test --measure-suites` measures them again; a suite not there counts 2 s): in a
# shard the suites run side by side, so what one takes there says little. Why processes: a
# process-level test blocks its thread while it waits for a child process or a socket, and
# Swift's cooperative pool has one thread per core, so one test process runs two such tests at
# a time on this 2-core machine however idle the CPU is (and an in-process async test beside
# them waits for a free thread, which is why the unit tests have a process of their own). The
# test bundle is run directly (what `swift test --skip-build` runs, without SwiftPM's seconds of
# planning per process). The memory budgets (SessionMemoryTests) run in a process of their own:
# they read the process's heap, which the unit tests running beside them in one process moved
# by hundreds of bytes a session (a budget failed at random). Fails when any process fails.
run_test_shards() {
    local shards="${AUTHGATE_TEST_SHARDS:-4}" bundle logs list index status=0 times
    bundle="${AUTHGATE_BIN_DIR:-$(swift build --show-bin-path)}/authgatePackageTests.xctest"
    list="$("$bundle" --testing-library swift-testing --list-tests)"
    times="Tests/suite-seconds"
    local patterns=() names=() pids=() suite shard
    for ((index = 0; index < shards; index++)); do patterns[index]=""; names[index]="system tests $((index + 1)) of $shards"; done
    # The unit tests: every test outside AuthGateSystemTests (a new unit-test target included).
    names[shards]="unit tests (every target but AuthGateSystemTests)"
    local memory='^AuthGateDaemonTests\.SessionMemoryTests/'
    names[shards + 1]="the memory budgets, alone in their process (AuthGateDaemonTests.SessionMemoryTests)"
    # "SECONDS SUITE" per suite of the bundle, the longest first, then each to the lightest shard.
    while read -r shard suite; do
        patterns[shard]="${patterns[shard]:+${patterns[shard]}|}$suite/"
    done < <(sed -n 's|^\(AuthGateSystemTests\.[^/]*\)/.*|\1|p' <<<"$list" | sort -u \
        | awk -v times="$times" 'BEGIN { while ((getline line < times) > 0) { split(line, f, " "); t[f[2]] = f[1] } }
            { print (($1 in t) ? t[$1] : 2), $1 }' \
        | sort -k1,1gr -k2 \
        | awk -v shards="$shards" '{ best = 0; for (i = 1; i < shards; i++) if (load[i] < load[best]) best = i
            load[best] += $1; print best, $2 }')
    echo "==> testing: $(wc -l <<<"$list") tests; the system tests in $shards processes balanced by the suites' times in $times" >&2
    logs="$(mktemp -d)"
    for ((index = 0; index <= shards + 1; index++)); do
        local selection=(--skip '^AuthGateSystemTests\.' --skip "$memory")
        if [ "$index" -lt "$shards" ]; then
            [ -n "${patterns[index]}" ] || continue
            selection=(--filter "^(${patterns[index]})")
        elif [ "$index" -gt "$shards" ]; then
            selection=(--filter "$memory")
        fi
        # A process takes about two minutes; one that hangs fails the run instead of holding it.
        timeout --kill-after=10 "${AUTHGATE_SHARD_TIMEOUT:-600}" \
            "$bundle" --testing-library swift-testing "${selection[@]}" >"$logs/$index.log" 2>&1 &
        pids[index]=$!
    done
    for index in "${!pids[@]}"; do
        local code=0
        wait "${pids[index]}" || code=$?
        echo "==> ${names[index]}${patterns[index]:+: ${patterns[index]//|/ }}" >&2
        cat "$logs/$index.log"
        if [ "$code" -ne 0 ]; then
            status=1
            if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
                echo "${names[index]} did not finish within ${AUTHGATE_SHARD_TIMEOUT:-600} s: a test hangs (the last one started above without an end)" >&2
            fi
        fi
    done
    rm -rf "$logs"
    return "$status"
}

# Runs each suite of the system tests alone, one after another, and writes how long each took
# to Tests/suite-seconds, which run_test_shards balances its processes by (scripts/test
# --measure-suites; about six minutes). Commit the file when the times have moved.
measure_suite_times() {
    local bundle suite start code out="Tests/suite-seconds.new"
    bundle="${AUTHGATE_BIN_DIR:-$(swift build --show-bin-path)}/authgatePackageTests.xctest"
    : >"$out"
    while read -r suite; do
        start="$(date +%s.%N)"
        code=0
        timeout --kill-after=10 600 "$bundle" --testing-library swift-testing --filter "^$suite/" >/dev/null 2>&1 || code=$?
        awk -v s="$start" -v e="$(date +%s.%N)" -v n="$suite" 'BEGIN { printf "%.1f %s\n", e - s, n }' | tee -a "$out" >&2
        [ "$code" -eq 0 ] || echo "note: $suite failed (exit $code) while it was measured" >&2
    done < <("$bundle" --testing-library swift-testing --list-tests | sed -n 's|^\(AuthGateSystemTests\.[^/]*\)/.*|\1|p' | sort -u)
    sort -k2 "$out" >Tests/suite-seconds
    rm -f "$out"
}
