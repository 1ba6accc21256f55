#!/bin/sh
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz/ and runs
# each for SECONDS seconds (default 60) on 1 job, starting from the seed
# corpus in fuzz/corpus/<target>. New inputs go to build-fuzz/corpus/<target>,
# findings (crash-*, timeout-*, leak-*, oom-*) to build-fuzz/findings/<target>.
# Prints one line per target: executions, corpus size, findings.
#   sh scripts/fuzz.sh [SECONDS] [target...]
# With RUNS=N in the environment each target stops after N executions or
# SECONDS, whichever comes first.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"fuzz_tmir fuzz_tmir_run fuzz_safetensors fuzz_npy fuzz_pipeline fuzz_pipeline_toml fuzz_rules fuzz_onnx fuzz_onnx_run"}
if [ ! -d build-fuzz ]; then
  CXX=clang++ CC=clang meson setup build-fuzz -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dtests=false -Dbenchmarks=false --buildtype=debugoptimized \
    -Ddefault_library=static >/dev/null
fi
ninja -C build-fuzz $(for t in $targets; do echo fuzz/$t; done) >/dev/null
status=0
for t in $targets; do
  mkdir -p build-fuzz/corpus/$t build-fuzz/findings/$t
  log=build-fuzz/findings/$t.log
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ASAN_OPTIONS=detect_leaks=1 \
  ./build-fuzz/fuzz/$t build-fuzz/corpus/$t fuzz/corpus/$t \
    -max_total_time="$secs" ${RUNS:+-runs=$RUNS} -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/findings/$t/ \
    >"$log" 2>&1 || true
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(ls build-fuzz/findings/$t | wc -l)
  corpus=$(ls build-fuzz/corpus/$t | wc -l)
  echo "$t: ${runs:-0} executions, corpus $corpus, findings $found"
  [ "$found" -eq 0 ] || status=1
done
exit $status
