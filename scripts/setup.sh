#!/usr/bin/env bash
# One-command set-up, called by `make`: an OpenCL platform (Debian's PoCL when the machine has
# none), a virtual environment, and this package. Quick when run again.
#
#   scripts/setup.sh        what the CLI and `make demo` use: the package and its dependencies
#   scripts/setup.sh test   that, plus the `test` extra (pytest, OpenVINO, ONNX Runtime, Ray,
#                           ...) and Debian's oclgrind (for --sanitize and its tests)
#
# A stamp per level in the venv says what is installed: `make test` upgrades a venv `make demo`
# made, and `make demo` after `make test` installs nothing (the test extra holds the package).
# A stamp older than pyproject.toml is stale (the dependencies may have changed).
#
# uv installs the packages where it can (pip fetches it first), pip otherwise; INSTALLER=pip
# uses pip alone (see install_with_uv).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
LEVEL=${1:-base}
case "$LEVEL" in
    base|test) ;;
    *) echo "setup: unknown level '$LEVEL'; expected 'test' or nothing" >&2; exit 2 ;;
esac
INSTALLER=${INSTALLER:-uv}
case "$INSTALLER" in
    uv|pip) ;;
    *) echo "setup: unknown INSTALLER '$INSTALLER'; expected 'uv' (the default) or 'pip'" >&2
       exit 2 ;;
esac

have_opencl() {
    ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1
}

if ! have_opencl; then
    echo "setup: no OpenCL platform registered; installing Debian's PoCL (CPU OpenCL)"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # --reinstall with confmiss also restores a registration file (/etc/OpenCL/vendors/pocl.icd)
    # that went missing from an already installed package
    $SUDO apt-get install -y -qq --reinstall -o Dpkg::Options::=--force-confmiss \
        pocl-opencl-icd ocl-icd-libopencl1 clinfo >/dev/null
    have_opencl || { echo "setup: PoCL installed but no OpenCL platform is registered" >&2; exit 1; }
fi

# Oclgrind (an OpenCL simulator) runs custom kernels for --sanitize, which its tests use; the
# demo does not (--sanitize installs it on first use, too)
if [ "$LEVEL" = test ] && [ ! -f /usr/lib/oclgrind/liboclgrind-rt-icd.so ] && \
        command -v apt-get >/dev/null; then
    echo "setup: installing Debian's oclgrind (for --sanitize)"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq oclgrind >/dev/null || echo "setup: oclgrind could not be installed; --sanitize will say so" >&2
fi

# installed and not older than pyproject.toml
fresh() {
    [ -f "$1" ] && ! [ pyproject.toml -nt "$1" ]
}

base_stamp="$VENV/.customlayers-installed"
test_stamp="$VENV/.customlayers-installed-test"
if [ "$LEVEL" = test ]; then
    fresh "$test_stamp" && exit 0
    target=".[test]" what="customlayers[test]"
else
    # the test level holds everything the base level installs
    { fresh "$base_stamp" || fresh "$test_stamp"; } && exit 0
    target="." what="customlayers"
fi
# uv (https://github.com/astral-sh/uv) resolves and installs the test extra's hundred packages
# in parallel: 18 s against pip's 92 s on this project's 2-core machine, the same versions.
# It is installed into the venv by pip (a few seconds) and told pip's own settings
# (scripts/uv_install.py); where that or uv fails (no uv for this platform, an index it cannot
# read, a pip setting it has no equivalent for), pip installs as before. INSTALLER=pip: pip only.
install_with_uv() {
    [ "$INSTALLER" = uv ] || return 1
    # fetched where it is missing or does not run (a broken one is replaced, not kept)
    if ! "$VENV/bin/uv" --version >/dev/null 2>&1; then
        "$VENV/bin/python" -m pip install --disable-pip-version-check -q --force-reinstall uv \
            || return 1
    fi
    [ -x "$VENV/bin/uv" ] || return 1
    "$PYTHON" scripts/uv_install.py "$VENV/bin/python" "$VENV/bin/uv" "$1" && return 0
    echo "setup: uv did not install $1; pip installs it instead (see $VENV/pip-install.log)" >&3
    return 1
}

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
echo "setup: installing $what into $VENV (log: $VENV/pip-install.log)"
# the build backend's notes are noise on success; on failure the log's end says why
exec 3>&2                # the terminal, for what install_with_uv says beside its log
installer=uv             # which one installed, said in the closing line
if ! install_with_uv "$target" > "$VENV/pip-install.log" 2>&1; then
    installer=pip
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$target" \
            >> "$VENV/pip-install.log" 2>&1; then
        tail -n 30 "$VENV/pip-install.log" >&2
        echo "setup: pip install failed; full log in $VENV/pip-install.log" >&2
        exit 1
    fi
fi
touch "$base_stamp"
[ "$LEVEL" = test ] && touch "$test_stamp"
# what the set-up cost, said: up to date it costs 0.01 s and says nothing; an install after a
# change of pyproject.toml (a stale stamp) checks every package again (a few seconds with uv)
echo "setup: $what installed by $installer in ${SECONDS} s"
exit 0
