#!/usr/bin/env bash
# The compiled Kineto scanner (advisor/trace/_kscan.c) built with AddressSanitizer and
# UndefinedBehaviorSanitizer, then run over every Kineto fixture, the bad-input corpus's Kineto
# cases, a mutation fuzz compared with msgspec (check_scanner.py) and the scanner's own tests
# (tests/trace/test_kscan_safety.py with the name bound lowered, test_kineto_scan.py); the
# SQLite table scanner (advisor/trace/_sqlscan.c) likewise over its tests (every Nsight
# fixture, built databases, 300 damaged ones: tests/trace/test_sqlscan.py). Any
# sanitizer report fails the run (the process stops at the first one; a report written
# anywhere also fails it at the end). See docs/fuzzing.md.
#
#   tests/sanitize/run.sh [FUZZ_INPUTS]      # default 3000; PYTHON=... picks the interpreter
#
# Needs gcc and its sanitizer runtimes (libasan, libubsan): without them it fails, loudly.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
FUZZ=${1:-3000}
OUT=build/sanitize
SMALL_NAMES=1000  # KSCAN_MAX_NAMES of the build the name-bound test runs on

die() { echo "sanitize: $*" >&2; exit 1; }
command -v gcc >/dev/null || die "gcc not found: the sanitizer build needs it"
LIBASAN=$(gcc -print-file-name=libasan.so)
case "$LIBASAN" in
  /*) [ -e "$LIBASAN" ] || die "libasan.so not found at $LIBASAN" ;;
  *) die "gcc has no AddressSanitizer runtime (gcc -print-file-name=libasan.so: '$LIBASAN'); install libasan" ;;
esac
INCLUDE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
rm -rf "$OUT"
mkdir -p "$OUT/default" "$OUT/small_names" "$OUT/reports"
FLAGS=(-shared -fPIC -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -Wall -Wextra -I"$INCLUDE")
gcc "${FLAGS[@]}" advisor/trace/_kscan.c -o "$OUT/default/_kscan$SUFFIX"
gcc "${FLAGS[@]}" -pthread advisor/trace/_sqlscan.c -o "$OUT/default/_sqlscan$SUFFIX"
gcc "${FLAGS[@]}" -DKSCAN_MAX_NAMES=$SMALL_NAMES advisor/trace/_kscan.c \
    -o "$OUT/small_names/_kscan$SUFFIX"
nm -D "$OUT/default/_kscan$SUFFIX" | grep -q __asan_report || die "the build is not instrumented (ASan)"
nm -D "$OUT/default/_kscan$SUFFIX" | grep -q __ubsan_handle || die "the build is not instrumented (UBSan)"

export LD_PRELOAD="$LIBASAN"  # (the interpreter is not instrumented: the runtime goes first)
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$PWD/$OUT/reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$PWD/$OUT/reports/ubsan"
export PYTHONMALLOC=malloc    # (every allocation through ASan's allocator, bounds and all)
export PYTHONPATH="tests/sanitize${PYTHONPATH:+:$PYTHONPATH}"
export ADVISOR_REQUIRE_SCANNER=1

reports() { ls "$OUT/reports" 2>/dev/null | grep -q . ; }
step() {
  local name=$1; shift
  local t0=$SECONDS
  echo "== sanitize: $name" >&2
  if ! "$@"; then
    reports && cat "$OUT"/reports/* >&2
    die "$name failed"
  fi
  reports && { cat "$OUT"/reports/* >&2; die "$name: sanitizer report"; }
  echo "   ($((SECONDS - t0)) s)" >&2
}

# the sanitizers are live: a read past a buffer in this set-up is reported (and stops the
# process) where an uninstrumented run reads on
canary() {
  ASAN_OPTIONS="detect_leaks=0:log_path=$PWD/$OUT/canary" "$PY" -c '
import ctypes
buf = ctypes.create_string_buffer(4096)
ctypes.string_at(ctypes.addressof(buf), 4096 + 64)' 2>/dev/null && return 1
  grep -qs "heap-buffer-overflow" "$OUT"/canary.* || return 1
  rm -f "$OUT"/canary.*
}
step "canary (a deliberate overflow is reported)" canary

KSCAN_SO="$OUT/small_names/_kscan$SUFFIX" step "scanner safety tests (MAX_NAMES $SMALL_NAMES)" \
  "$PY" -m pytest -q -p no:cacheprovider -p kscan_swap tests/trace/test_kscan_safety.py
KSCAN_SO="$OUT/default/_kscan$SUFFIX" step "scanner tests against msgspec" \
  "$PY" -m pytest -q -p no:cacheprovider -p kscan_swap tests/trace/test_kineto_scan.py
step "fixtures, corpus and $FUZZ mutated inputs" \
  "$PY" tests/sanitize/check_scanner.py --so "$OUT/default/_kscan$SUFFIX" --fuzz "$FUZZ"
SQLSCAN_SO="$OUT/default/_sqlscan$SUFFIX" step "SQLite table scanner tests (damaged files too)" \
  "$PY" -m pytest -q -p no:cacheprovider -p sqlscan_swap tests/trace/test_sqlscan.py
echo "sanitize: no sanitizer report" >&2
