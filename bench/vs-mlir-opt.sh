#!/bin/sh
# Rewriting at scale: tm-opt's `compile` next to mlir-opt on the same
# program, measured in the same run.
#
#   sh bench/vs-mlir-opt.sh [BUILD_DIR...]
#
# bench/gen_vs_mlir.py writes one program of N exprs (default 10^6) as
# .tmir and as MLIR text; `tm-opt x.tmir -o x.onnx` exports it to ONNX.
# Then, in ROUNDS rounds (default 5) that alternate the commands:
#
#   tm-opt x.tmir -p compile -o out.tmir       (per BUILD_DIR, default build)
#   tm-opt x.onnx -p compile -o out.tmir
#   mlir-opt x.mlir --canonicalize --cse -o out.mlir
#
# Each command reads, rewrites and writes the whole program in one
# process; odd rounds run the commands in reverse order. The script prints, per command, the median and the range of the
# process's CPU time (user + sys) and wall time over the rounds, its peak
# RSS, and the ratio of the medians to mlir-opt's. With several build
# directories (two builds of tmgraph, say) their commands alternate too, so
# they compare the same minutes.
#
# MODELS="a.onnx b.onnx" also times, per build, loading each model and
# running compile (`tm-opt M -p compile --emit=dot -o /dev/null`).
#
# mlir-opt: Debian's mlir-14-tools (`apt-get install mlir-14-tools`), found
# as MLIR_OPT, mlir-opt or mlir-opt-14; without it the mlir-opt line is
# left out. WORK (default /tmp/tm-vs-mlir) holds the files; an existing
# program of the same N is reused.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
n=${N:-1000000} rounds=${ROUNDS:-5} work=${WORK:-/tmp/tm-vs-mlir}
[ $# -gt 0 ] || set -- build
mlir=${MLIR_OPT:-$(command -v mlir-opt || command -v mlir-opt-14 || true)}
mkdir -p "$work"
prog="$work/prog-$n"
if [ ! -s "$prog.mlir" ] || [ ! -s "$prog.onnx" ]; then
  python3 "$here/gen_vs_mlir.py" "$n" "$prog"
  "$1/tools/tm-opt" "$prog.tmir" -o "$prog.onnx"
fi

# One command line per row: LABEL<TAB>COMMAND.
rows="$work/rows"
: > "$rows"
i=0
for b in "$@"; do
  i=$((i + 1))
  tm="$(cd "$b" && pwd)/tools/tm-opt"
  printf '%s\t%s\n' "[$i] tm-opt .tmir compile" \
    "$tm $prog.tmir -p compile -o $work/out$i.tmir" >> "$rows"
  printf '%s\t%s\n' "[$i] tm-opt .onnx compile" \
    "$tm $prog.onnx -p compile -o $work/out$i.tmir" >> "$rows"
  for m in ${MODELS:-}; do
    printf '%s\t%s\n' "[$i] tm-opt $(basename "$m") compile" \
      "$tm $m -p compile --emit=dot -o /dev/null" >> "$rows"
  done
done
if [ -n "$mlir" ]; then
  printf '%s\t%s\n' "mlir-opt --canonicalize --cse" \
    "$mlir $prog.mlir --canonicalize --cse -o $work/out.mlir" >> "$rows"
fi

# Row numbers; odd rounds run the rows in reverse order, so that no
# command always runs right after the same other one.
awk '{ print NR "\t" $0 }' "$rows" > "$work/rows.fwd"
awk '{ l[NR] = $0 } END { for (i = NR; i >= 1; i--) print l[i] }' "$work/rows.fwd" > "$work/rows.rev"
times="$work/times"
: > "$times"
r=0
while [ "$r" -lt "$rounds" ]; do
  order="$work/rows.fwd"
  [ $((r % 2)) -eq 0 ] || order="$work/rows.rev"
  while IFS="$(printf '\t')" read -r k label cmd; do
    # %e wall s, %U + %S CPU s, %M peak RSS KB.
    /usr/bin/time -f "%e %U %S %M" -o "$work/t" sh -c "$cmd" > /dev/null
    printf '%s %s\n' "$k" "$(cat "$work/t")" >> "$times"
  done < "$order"
  r=$((r + 1))
done

exprs=$(grep -c '^	%' "$prog.tmir")
ops=$(grep -c '^    %' "$prog.mlir")
printf 'program: %s exprs in .tmir (%s MB), %s ops in the MLIR function (%s MB), .onnx %s MB; %s rounds\n' \
  "$exprs" "$(($(wc -c < "$prog.tmir") / 1000000))" "$ops" \
  "$(($(wc -c < "$prog.mlir") / 1000000))" "$(($(wc -c < "$prog.onnx") / 1000000))" "$rounds"
printf '%-34s %18s %18s %9s %8s\n' command "CPU s (range)" "wall s (range)" "RSS MB" \
  "CPU/mlir"
k=0
ref=
nrows=$(wc -l < "$rows")
# mlir-opt's median CPU time, the reference of the ratios (its row is last).
if [ -n "$mlir" ]; then
  ref=$(awk -v k="$nrows" '$1 == k { print $3 + $4 }' "$times" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
fi
while IFS="$(printf '\t')" read -r label cmd; do
  k=$((k + 1))
  awk -v k="$k" -v label="$label" -v ref="$ref" '
    function median(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 == k { n++; cpu[n] = $3 + $4; wall[n] = $2; if ($5 > rss) rss = $5 }
    END {
      lo = hi = cpu[1]; wlo = whi = wall[1]
      for (i = 1; i <= n; i++) {
        if (cpu[i] < lo) lo = cpu[i]; if (cpu[i] > hi) hi = cpu[i]
        if (wall[i] < wlo) wlo = wall[i]; if (wall[i] > whi) whi = wall[i]
      }
      c = median(cpu, n); w = median(wall, n)
      printf "%-34s %5.2f (%.2f-%.2f) %5.2f (%.2f-%.2f) %9.0f", label, c, lo, hi, w, wlo, whi, rss / 1024
      if (ref != "") printf " %7.2fx", c / ref
      printf "\n"
    }' "$times"
done < "$rows"
