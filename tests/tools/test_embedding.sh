#!/bin/sh
# Embedding tmgraph: installs the build into a staging prefix, moves that
# prefix elsewhere (tmgraph.pc must be relocatable), builds examples/embed
# with `pkg-config --cflags --libs tmgraph` and runs it; then configures the
# same example as a Meson project with tmgraph as a subproject.
# usage: test_embedding.sh SOURCE_ROOT BUILD_ROOT WORKDIR MODEL.tmir
set -u
src=$1 build=$2 dir=$3 model=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
failures=0
check() { # description, command...
  desc=$1; shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; failures=$((failures + 1)); fi
}

check "meson install into a staging prefix" \
  sh -c "meson install -C '$build' --no-rebuild --destdir '$dir/stage' > '$dir/install.log' 2>&1"
option() { # the value of one of the build's options
  meson introspect --buildoptions "$build" |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
prefix=$(option prefix)
# A sanitized build's libraries need the sanitizer's runtime in the program
# that loads them: the example is built with the same -fsanitize.
sanitize=$(option b_sanitize)
sanflag=
[ "$sanitize" = none ] || sanflag="-fsanitize=$sanitize"
check "the prefix moves elsewhere" mv "$dir/stage$prefix" "$dir/moved"
pc=$(find "$dir/moved" -name tmgraph.pc | head -n 1)
check "tmgraph.pc is installed" test -n "$pc"
libdir=$(dirname "$(dirname "$pc")")
check "the libraries have versioned sonames" \
  sh -c "objdump -p '$libdir/libtmgraph-ir.so' | grep -q 'SONAME *libtmgraph-ir.so.0'"
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs tmgraph)
check "pkg-config points into the moved prefix" sh -c "echo '$flags' | grep -q -- '-I$dir/moved/'"
check "the example builds with pkg-config" \
  sh -c "c++ -std=c++20 $sanflag '$src/examples/embed/embed.cpp' $flags -o '$dir/embed' 2> '$dir/cxx.log'"
LD_LIBRARY_PATH=$libdir "$dir/embed" "$model" 'count-exprs,flatten,optimize,count-exprs' \
  > "$dir/run.txt" 2>&1
check "the example runs its own pass and tmgraph's" test $? -eq 0
check "its pass counted before and after" \
  sh -c "grep -q 'count-exprs #1 - exprs' '$dir/run.txt' && grep -q 'count-exprs #2 - exprs' '$dir/run.txt'"
check "it ran the model" grep -q '^ran ' "$dir/run.txt"

# As a Meson subproject: configuring resolves dependency('tmgraph') to the
# subproject (building it would compile all of tmgraph once more).
mkdir -p "$dir/sub/subprojects" && cp "$src/examples/embed/"* "$dir/sub/" &&
  ln -s "$src" "$dir/sub/subprojects/tmgraph"
check "the example configures with tmgraph as a subproject" \
  sh -c "meson setup '$dir/sub/build' '$dir/sub' --wrap-mode=nodownload > '$dir/sub.log' 2>&1"
check "dependency('tmgraph') came from the subproject" \
  grep -q "Dependency tmgraph found: YES .*(overridden)" "$dir/sub.log"

[ "$failures" -eq 0 ] || cat "$dir/install.log" "$dir/cxx.log" "$dir/run.txt" "$dir/sub.log" 2>/dev/null | tail -40
echo "$failures failure(s)"
test "$failures" -eq 0
