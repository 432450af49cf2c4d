#!/usr/bin/env bash
# One-command set-up, called by `make`: an OpenCL platform (Debian's PoCL when the machine has
# none), a virtual environment, and this package with its test extra. Quick when run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

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

# Oclgrind (an OpenCL simulator) runs custom kernels for --sanitize; its tests need it too
if [ ! -f /usr/lib/oclgrind/liboclgrind-rt-icd.so ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian's oclgrind (for --sanitize)"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq oclgrind >/dev/null || echo "setup: oclgrind could not be installed; --sanitize will say so" >&2
fi

stamp="$VENV/.customlayers-installed"
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing customlayers[test] into $VENV (log: $VENV/pip-install.log)"
    # the build backend's notes are noise on success; on failure the log's end says why
    if ! "$VENV/bin/python" -m pip install -e ".[test]" > "$VENV/pip-install.log" 2>&1; then
        tail -n 30 "$VENV/pip-install.log" >&2
        echo "setup: pip install failed; full log in $VENV/pip-install.log" >&2
        exit 1
    fi
    touch "$stamp"
fi
