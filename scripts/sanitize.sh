#!/bin/sh
# Sanitizer runs of the test suite.
#   sh scripts/sanitize.sh asan   # every test under AddressSanitizer + UBSan (build-asan/)
#   sh scripts/sanitize.sh tsan   # the threaded tests under ThreadSanitizer (build-tsan/)
# Each prints meson's summary and exits non-zero on any failure.
set -eu
cd "$(dirname "$0")/.."
kind=${1:-asan}
case "$kind" in
asan)
  [ -d build-asan ] || meson setup build-asan --buildtype=debug \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=false >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  ninja -C build-asan
  meson test -C build-asan --print-errorlogs --timeout-multiplier 4
  ;;
tsan)
  [ -d build-tsan ] || meson setup build-tsan --buildtype=debugoptimized \
    -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=false >/dev/null
  # libgomp is not instrumented: its own synchronisation would be reported
  # as races, so OpenMP runs one thread per region here; the threads under
  # test are the callers' (std::thread) ones.
  export OMP_NUM_THREADS=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  ninja -C build-tsan tests/robustness/test_concurrency tests/runtime/rt_test_interpreter \
    tests/runtime/rt_test_conv_gemm tests/passes/test_passes
  meson test -C build-tsan --print-errorlogs --timeout-multiplier 4 \
    test_concurrency test_interpreter test_passes
  # The GEMM micro-kernel tests, shared packed weights from 4 std::threads
  # included; not the one that forces 2 OpenMP threads ([omp]).
  build-tsan/tests/runtime/rt_test_conv_gemm '~[omp]'
  ;;
*)
  echo "usage: sh scripts/sanitize.sh asan|tsan" >&2
  exit 2
  ;;
esac
