//===- BenchProcess.h - Measuring in forked processes ---------------------===//
//
// On the virtual machines these benchmarks run on, the physical memory
// under a process's heap moves every large-graph figure of that process by
// up to 1.2x (1.6x on a slow host), the controls' figures included, more
// than the runs inside one process vary: more runs in one process cannot
// even that out. So the benchmarks measure in several processes, forked one
// after the other, each with its own heap, and keep the minimum over them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace tmg::bench {

/// Runs `measure` in a forked child and returns the values it produced in
/// `out`; false when the fork or the pipe failed, or `measure` returned
/// false. The child exits without running the parent's exit handlers.
inline bool runInChild(const std::function<bool(std::vector<double> &)> &measure,
                       std::vector<double> &out) {
  int fd[2];
  if (pipe(fd) != 0)
    return false;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return false;
  }
  auto transfer = [](int f, void *p, size_t bytes, bool writing) {
    char *c = static_cast<char *>(p);
    while (bytes) {
      ssize_t k = writing ? write(f, c, bytes) : read(f, c, bytes);
      if (k <= 0)
        return false;
      c += k;
      bytes -= size_t(k);
    }
    return true;
  };
  if (pid == 0) {
    close(fd[0]);
    std::vector<double> values;
    bool ok = measure(values);
    size_t n = values.size();
    ok = ok && transfer(fd[1], &n, sizeof n, true) &&
         transfer(fd[1], values.data(), n * sizeof(double), true);
    std::fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  close(fd[1]);
  size_t n = 0;
  bool ok = transfer(fd[0], &n, sizeof n, false);
  if (ok) {
    out.assign(n, 0.0);
    ok = transfer(fd[0], out.data(), n * sizeof(double), false);
  }
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Runs `measure` in `processes` forked children one after the other (in
/// this process when `processes` is 1); `all` gets each run's values.
/// False when any run failed.
inline bool measureInProcesses(int processes,
                               const std::function<bool(std::vector<double> &)> &measure,
                               std::vector<std::vector<double>> &all) {
  all.assign(size_t(std::max(processes, 1)), {});
  for (size_t p = 0; p < all.size(); ++p) {
    bool ok = all.size() == 1 ? measure(all[p]) : runInChild(measure, all[p]);
    if (!ok) {
      std::fprintf(stderr, "measuring process %zu of %zu failed\n", p + 1, all.size());
      return false;
    }
  }
  return true;
}

} // namespace tmg::bench
