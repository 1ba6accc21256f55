#!/bin/sh
# CLI tests: tm-example writes the bundled model; tm-opt reads, flattens and
# writes it as .tmir, .dot and text, and rejects bad input with clear errors.
# tm-run executes it, writes .npy outputs and compares them.
# usage: test_cli.sh TM_EXAMPLE TM_OPT TM_RUN WORKDIR
set -u
abspath() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
example=$(abspath "$1") opt=$(abspath "$2") run=$(abspath "$3") dir=$4
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
failures=0
check() { # description, command...
  desc=$1; shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" "$1"; }

check "tm-example writes the model" "$example" -o cnn.tmir
check "the .tmir exists" test -s cnn.tmir
check "the weights exist" test -s cnn.safetensors
check "the .tmir names its weights" contains cnn.tmir 'weights .cnn.safetensors.'

check "tm-opt round-trips the model" "$opt" cnn.tmir -o round.tmir
sed 1,2d cnn.tmir > a.txt; sed 1,2d round.tmir > b.txt
check "the round trip keeps the text (weights line aside)" cmp -s a.txt b.txt
check "the round trip keeps the weights" cmp -s cnn.safetensors round.safetensors

check "tm-opt --pipeline flatten,compile" "$opt" cnn.tmir --pipeline flatten,compile -o flat.tmir
check "flat graph has the inlined convs" contains flat.tmir 'getattr(self, "block1.conv")'
check "flat graph has no block calls" sh -c "! grep -q 'block1_out = block1(' flat.tmir"

check "tm-opt writes DOT" "$opt" cnn.tmir -o cnn.dot
check "DOT has a digraph" contains cnn.dot 'digraph tmgraph'
check "DOT has one cluster per graph" test "$(grep -c 'subgraph cluster_' cnn.dot)" -eq 3

"$opt" cnn.tmir > stdout.txt
check "tm-opt prints text to stdout" contains stdout.txt '^tmir 4$'
check "text on stdout reads back from stdin" sh -c "'$opt' - -o piped.tmir < stdout.txt"
sed 1,2d piped.tmir > c.txt
check "the text through stdout and stdin is the model's" cmp -s a.txt c.txt
check "the weights through stdout and stdin are the model's" cmp -s cnn.safetensors piped.safetensors
mkfifo fifo.tmir
# (timeouts: a side that never opens its end would block the other)
timeout 60 sh -c "cat cnn.tmir > fifo.tmir" &
check "tm-opt reads a .tmir that is not a regular file (a FIFO)" \
  timeout 60 "$opt" fifo.tmir -o fifo-out.tmir
wait
sed 1,2d fifo-out.tmir > d.txt
check "the model read from a FIFO is the model" cmp -s a.txt d.txt
mkfifo out.fifo
timeout 60 sh -c "cat out.fifo > from-fifo.tmir" &
check "tm-opt writes .tmir into a FIFO" timeout 60 "$opt" cnn.tmir -o out.fifo --emit=tmir
wait
check "the FIFO stays a FIFO" test -p out.fifo
check "no weights file is written beside a FIFO" test ! -e out.safetensors -a ! -e out.fifo.safetensors
check "the text through a FIFO has its weights inline and reads back" \
  sh -c "'$opt' - -o from-fifo-back.tmir < from-fifo.tmir"
check "the weights through a FIFO are the model's" cmp -s cnn.safetensors from-fifo-back.safetensors
check "tm-opt -o /dev/null --emit=tmir" "$opt" cnn.tmir -o /dev/null --emit=tmir
check "tm-opt -o /dev/null --emit=onnx" "$opt" cnn.tmir -o /dev/null --emit=onnx
check "/dev/null is still a device" test -c /dev/null
ln -s round.tmir link.tmir
check "tm-opt writes through a symbolic link" "$opt" cnn.tmir -o link.tmir
check "the link stays a link" test -L link.tmir

"$opt" --help > help.txt
check "--help lists the options" contains help.txt '--pipeline-file'

"$opt" missing.tmir 2> err1.txt; s=$?
check "a missing file exits 2" test $s -eq 2
check "a missing file is named" contains err1.txt 'missing.tmir: error: cannot open file'

printf 'tmir 1\nids 0 0\nmodule X tracd top {\n' > bad.tmir
"$opt" bad.tmir 2> err2.txt; s=$?
check "a malformed file exits 2" test $s -eq 2
check "a malformed file error has file:line:col" contains err2.txt 'bad.tmir:3:10: error: expected .traced.'

"$opt" cnn.tmir --bogus 2> err3.txt; s=$?
check "an unknown option exits 2" test $s -eq 2
check "an unknown option is named" contains err3.txt "Unknown command line argument '--bogus'"

mkdir -p out1 out2
"$run" cnn.tmir --random-inputs --seed=1 -o out1 > run1.txt
check "tm-run runs the model" test $? -eq 0
check "tm-run prints output shapes" contains run1.txt "output 0 'fc_out': float32(1, 10)"
check "tm-run writes .npy outputs" test -s out1/fc_out.npy
"$run" flat.tmir --random-inputs --seed=1 --compare fc_out=out1/fc_out.npy > cmp.txt
check "the flat model matches the hierarchical one" contains cmp.txt "compare 'fc_out': max abs error 0"
"$run" cnn.tmir --random-inputs --seed=2 -o out2 > /dev/null
"$run" cnn.tmir --random-inputs --seed=1 --compare 0=out2/fc_out.npy > cmp2.txt; s=$?
check "a mismatch exits 1" test $s -eq 1
check "a mismatch is reported" contains cmp2.txt 'OUTSIDE TOLERANCE'
"$run" cnn.tmir --repeat 3 --random-inputs > lat.txt
check "--repeat prints latencies" contains lat.txt 'latency over 3 runs'
"$run" cnn.tmir 2> err4.txt; s=$?
check "an unbound input exits 2" test $s -eq 2
check "an unbound input is named" contains err4.txt "input 'x' is not bound"
printf 'garbage' > bad.npy
"$run" cnn.tmir -i x=bad.npy 2> err5.txt; s=$?
check "a bad .npy exits 2" test $s -eq 2
check "a bad .npy is named" contains err5.txt 'bad.npy@byte 0: error: not a .npy file'

# Declarative rules in a pipeline config (the matcher's apply-rules pass,
# appended after the named passes): relu as clip keeps the outputs.
printf '[pipeline]\npasses = ["flatten", "compile"]\n\n[[rules]]\nname = "relu-as-clip"\nmatch = "nn.relu($x)"\nreplace = "clip($x, 0.0, None)"\nwhere = ["$x.rank == 4"]\n' > rules.toml
check "tm-opt applies [[rules]]" "$opt" cnn.tmir --pipeline-file rules.toml -o rules.tmir
check "the rule replaced every relu" test "$(grep -c 'elemwise.clip(' rules.tmir)" -eq 5
"$run" rules.tmir --random-inputs --seed=1 --compare fc_out=out1/fc_out.npy > cmp3.txt
check "the rewritten model matches the original" contains cmp3.txt "compare 'fc_out': max abs error 0"
printf '[pipeline]\npasses = ["compile"]\n[[rules]]\nmatch = "nn.rellu($x)"\nreplace = "$x"\n' > badrules.toml
"$opt" cnn.tmir --pipeline-file badrules.toml 2> err6.txt; s=$?
check "a bad rule exits 2" test $s -eq 2
check "a bad rule error has file:line:col" contains err6.txt "badrules.toml:4:10: error: unknown function 'nn.rellu'; did you mean 'nn.relu'?"

echo "$failures failure(s)"
test "$failures" -eq 0
