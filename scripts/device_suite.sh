#!/usr/bin/env bash
# The device test suite file by file, each file in a process of its own, one line per file:
#   scripts/device_suite.sh [-d GPU|CPU|...] [-t SECONDS] [FILE...]
# A file whose process dies (a segfault in a driver, a hang past the limit) is named as such
# instead of taking the rest of the suite with it. Made for the lent GPU machine, where CI never
# runs (`bash .device/setup.sh && scripts/device_suite.sh`); the device defaults to GPU there.
# Exit status: 0 when every file passed (or skipped), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
device=${CUSTOMLAYERS_TEST_DEVICE:-GPU}
limit=900
while getopts "d:t:" opt; do
    case $opt in
        d) device=$OPTARG ;;
        t) limit=$OPTARG ;;
        *) echo "usage: $0 [-d DEVICE] [-t SECONDS] [FILE...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ -x .venv/bin/python ]; then python=${PYTHON:-.venv/bin/python}; else python=${PYTHON:-python3}; fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tests/device/test_*.py)
# DEVICE_SUITE_LOGS keeps the per-file logs where the caller can fetch them (the GPU machine's $OUT)
logs=${DEVICE_SUITE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
failed=0
echo "device suite on $device, ${#files[@]} files, logs in $logs"
for f in "${files[@]}"; do
    log="$logs/$(basename "$f" .py).log"
    started=$(date +%s)
    CUSTOMLAYERS_TEST_DEVICE=$device PYTHONPATH=. PYTHONFAULTHANDLER=1 \
        timeout -s KILL "$limit" "$python" -m pytest -q -p no:cacheprovider "$f" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - started ))
    # pytest's closing line ("3 passed, 1 skipped in 2.1s"), without its time
    summary=$(grep -E '^=*\s*[0-9]+ (passed|failed|skipped|error|deselected)|no tests ran' "$log" \
              | tail -n 1 | sed -E 's/=+//g; s/ in [0-9.]+s.*//; s/^ +| +$//g')
    case $rc in
        0|5) verdict=ok ;;
        1) verdict=FAILED; failed=1 ;;
        137) verdict="KILLED (over ${limit}s or out of memory)"; failed=1 ;;
        *) if [ $rc -gt 128 ]; then verdict="CRASHED (signal $((rc - 128)))"
           else verdict="ERROR (exit $rc)"; fi
           failed=1 ;;
    esac
    printf '%-44s %-10s %5ss  %s\n' "$(basename "$f")" "$verdict" "$took" "${summary:-no summary}"
done
[ $failed -eq 0 ] && echo "device suite: every file passed" || echo "device suite: some files did not pass (logs in $logs)"
exit $failed
