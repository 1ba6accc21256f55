//===- test_dlopen.cpp - The libraries load with dlopen() -----------------===//
//
// A host that is not linked against tmgraph (a Python interpreter through
// ctypes, a plugin host) loads its libraries with dlopen(). That fails when
// a library needs more static TLS than glibc keeps in reserve (for example
// when its thread-local data uses the initial-exec model). This program
// links none of them and dlopen()s each path it is given.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <dlfcn.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_dlopen LIBRARY...\n");
    return 2;
  }
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    if (void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
      std::printf("loaded %s\n", argv[i]);
      continue;
    }
    std::fprintf(stderr, "cannot dlopen %s: %s\n", argv[i], dlerror());
    ++failed;
  }
  return failed ? 1 : 0;
}
