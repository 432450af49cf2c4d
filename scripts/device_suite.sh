#!/usr/bin/env bash
# The device test suite file by file, each file in a process of its own, one line per file:
#   scripts/device_suite.sh [-d GPU|CPU|...] [-t SECONDS] [-j JOBS] [FILE...]
# A file whose process dies (a segfault in a driver, a hang past the limit) is named as such
# instead of taking the rest of the suite with it. Made for the lent GPU machine, where CI never
# runs (`bash .device/setup.sh && scripts/device_suite.sh`); the device defaults to GPU there.
# -j runs that many files at once (each still its own process; a GPU of many cores has room), then
# reruns alone any file that did not pass, so a failure is never one of load.
# Exit status: 0 when every file passed (or skipped), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
device=${CUSTOMLAYERS_TEST_DEVICE:-GPU}
limit=900
jobs=1
while getopts "d:t:j:" opt; do
    case $opt in
        d) device=$OPTARG ;;
        t) limit=$OPTARG ;;
        j) jobs=$OPTARG ;;
        *) echo "usage: $0 [-d DEVICE] [-t SECONDS] [-j JOBS] [FILE...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ -x .venv/bin/python ]; then python=${PYTHON:-.venv/bin/python}; else python=${PYTHON:-python3}; fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tests/device/test_*.py)
# DEVICE_SUITE_LOGS keeps the per-file logs where the caller can fetch them (the GPU machine's $OUT)
logs=${DEVICE_SUITE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
echo "device suite on $device, ${#files[@]} files, $jobs at a time, logs in $logs"
# one file: its pytest in a process of its own; writes "<verdict line>" to $logs/<name>.line
run_one() {
    local f=$1 log started rc took summary verdict
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
        1) verdict=FAILED ;;
        137) verdict="KILLED (over ${limit}s or out of memory)" ;;
        *) if [ $rc -gt 128 ]; then verdict="CRASHED (signal $((rc - 128)))"
           else verdict="ERROR (exit $rc)"; fi ;;
    esac
    printf '%-44s %-10s %5ss  %s\n' "$(basename "$f")" "$verdict" "$took" "${summary:-no summary}" \
        > "$logs/$(basename "$f" .py).line"
}
export -f run_one
export logs device limit python
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}
if [ "$jobs" -gt 1 ]; then
    for f in "${files[@]}"; do
        line="$logs/$(basename "$f" .py).line"
        grep -q '^[^ ]* *ok ' "$line" 2>/dev/null && continue
        echo "rerun alone: $(basename "$f")"
        run_one "$f"
    done
fi
failed=0
for f in "${files[@]}"; do
    line="$logs/$(basename "$f" .py).line"
    cat "$line"
    grep -q '^[^ ]* *ok ' "$line" || failed=1
done
[ $failed -eq 0 ] && echo "device suite: every file passed" || echo "device suite: some files did not pass (logs in $logs)"
exit $failed
