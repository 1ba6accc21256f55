#!/usr/bin/env python3
"""Runs the RUN: lines of one test file, as LLVM's lit does for its tests.

usage: run-test.py --path DIR [--path DIR ...] [--define KEY=VALUE ...] --tmp DIR TEST

Every line starting with `RUN:` (after a comment marker such as `#`, `//`
or `;`, if any) is a
shell command; a line ending in `\\` continues on the next RUN: line.
Substitutions: %s the test file, %S its directory, %t a path unique to the
test (in --tmp), %T the --tmp directory, %{KEY} a --define'd value, %% a
percent sign. The commands run
in bash with `set -o pipefail`, in order, with the --path directories first
on PATH (tm-opt, tm-run, FileCheck, not, ...); the test fails at the first
command that exits non-zero, printing it and what it wrote.
"""
import argparse
import os
import re
import subprocess
import sys

RUN = re.compile(r'^[^A-Za-z0-9]*RUN:\s?(.*)$')


def run_lines(text):
    commands, current = [], None
    for line in text.splitlines():
        m = RUN.match(line)
        if not m:
            if current is not None:
                raise SystemExit('error: a RUN: line ends in \\ but no RUN: line follows')
            continue
        part = m.group(1).rstrip()
        cont = part.endswith('\\')
        if cont:
            part = part[:-1]
        current = part if current is None else current + ' ' + part
        if not cont:
            commands.append(current)
            current = None
    return commands


def substitute(cmd, test, tmp, defines):
    subs = {'%s': test, '%S': os.path.dirname(test), '%T': tmp,
            '%t': os.path.join(tmp, os.path.basename(test) + '.tmp'), '%%': '%'}

    def one(m):
        if m.group(0).startswith('%{'):
            key = m.group(1)
            if key not in defines:
                raise SystemExit(f'{test}: error: %{{{key}}} is not defined (--define)')
            return defines[key]
        return subs[m.group(0)]
    return re.sub(r'%\{([A-Za-z0-9_-]+)\}|%[sStT%]', one, cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--path', action='append', default=[])
    ap.add_argument('--define', action='append', default=[])
    ap.add_argument('--tmp', required=True)
    ap.add_argument('test')
    a = ap.parse_args()
    test = os.path.abspath(a.test)
    with open(test, encoding='utf-8') as f:
        commands = run_lines(f.read())
    if not commands:
        print(f'{test}: error: no RUN: lines')
        return 1
    defines = dict(d.split('=', 1) for d in a.define)
    os.makedirs(a.tmp, exist_ok=True)
    env = dict(os.environ)
    env['PATH'] = os.pathsep.join([os.path.abspath(p) for p in a.path] + [env.get('PATH', '')])
    for i, cmd in enumerate(commands, 1):
        cmd = substitute(cmd, test, os.path.abspath(a.tmp), defines)
        p = subprocess.run(['bash', '-o', 'pipefail', '-c', cmd], cwd=a.tmp, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            print(f'{test}: RUN line {i} failed with exit code {p.returncode}:\n  {cmd}\n'
                  f'--- output ---\n{p.stdout}')
            return 1
    print(f'{test}: {len(commands)} RUN line(s) passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
