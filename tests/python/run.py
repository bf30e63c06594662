#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""tests/python/run.py [--start N] [--count-file F] [--no-plan] PYTEST-ARGS...

Runs pytest (Debian's python3-pytest) and prints one TAP line a test case
on stdout, so that meson's TAP reader and tools/check count every case:
"ok N - <node id>", "ok N - ... # SKIP <reason>", "not ok N - ..." (with
the failure as "#" lines), then the plan "1..N" ("1..0 # SKIP <reason>"
when every module skipped itself). pytest's own report goes to stderr.
Debian has no pytest-tap; this is that, small.

--start N numbers from N + 1 and --no-plan leaves the plan out, for a
shell test that prints TAP lines of its own around the cases
(tests/e2e/python_test.sh); --count-file F gets the last number.
Exits 0 when no case failed, else 1. Writes no cache or bytecode into the
source tree.
"""
import os
import sys

sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"


class Tap:
    """The pytest plugin: one TAP line when a case's teardown is done."""

    def __init__(self, out, start):
        self.out = out
        self.n = start
        self.failed = 0
        self.cases = 0
        self.outcome = {}
        self.skip_reason = None

    def line(self, text):
        self.out.write(text + "\n")
        self.out.flush()

    def comment(self, text):
        for ln in str(text).splitlines()[-40:]:
            self.line("#   " + ln)

    def emit(self, nodeid, outcome, detail):
        self.n += 1
        self.cases += 1
        if outcome == "failed":
            self.failed += 1
            self.line("not ok %d - %s" % (self.n, nodeid))
            self.comment(detail)
        elif outcome == "skipped":
            self.line("ok %d - %s # SKIP %s" % (self.n, nodeid, detail))
        else:
            self.line("ok %d - %s" % (self.n, nodeid))

    @staticmethod
    def reason(report):
        r = report.longrepr
        if isinstance(r, tuple) and len(r) == 3:
            return str(r[2]).replace("Skipped: ", "", 1)
        return str(r)

    def pytest_collectreport(self, report):
        if report.failed:
            self.emit("collect " + (report.nodeid or "."), "failed",
                      report.longreprtext)
        elif report.skipped and self.skip_reason is None:
            self.skip_reason = self.reason(report)

    def pytest_runtest_logreport(self, report):
        st = self.outcome.setdefault(report.nodeid, ["passed", ""])
        if report.failed and st[0] != "failed":
            st[0] = "failed"
            st[1] = report.longreprtext
        elif report.skipped and st[0] == "passed":
            st[0] = "skipped"
            st[1] = self.reason(report)
        if report.when == "teardown":
            self.emit(report.nodeid, st[0], st[1])
            del self.outcome[report.nodeid]


def main(argv):
    start, count_file, plan = 0, None, True
    while argv and argv[0] in ("--start", "--count-file", "--no-plan"):
        opt = argv.pop(0)
        if opt == "--no-plan":
            plan = False
        elif opt == "--start":
            start = int(argv.pop(0))
        else:
            count_file = argv.pop(0)
    # TAP on the real stdout; everything else (pytest's report, the
    # tests' own prints) on stderr, where meson keeps it in the log.
    tap = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import pytest
    plugin = Tap(tap, start)
    rc = pytest.main(["-p", "no:cacheprovider", "-rfEs", "--tb=short"] + argv,
                     plugins=[plugin])
    if plan:
        if plugin.cases == 0 and rc in (0, 5):
            plugin.line("1..0 # SKIP %s" % (plugin.skip_reason or
                                             "no test cases"))
            rc = 0
        else:
            plugin.line("1..%d" % plugin.n)
    if count_file:
        with open(count_file, "w") as f:
            f.write("%d %d\n" % (plugin.n, plugin.failed))
    return 0 if plugin.failed == 0 and rc in (0, 5) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
