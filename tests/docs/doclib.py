# SPDX-License-Identifier: BSD-3-Clause
"""What the tests of tests/docs share: TAP lines, and reading pages.

SRC (the source tree) is set by the test before read() is called.
"""
import os
import re

SRC = "."
n = 0
nfail = 0


def ok(cond, desc):
    global n, nfail
    n += 1
    if cond:
        print("ok %d - %s" % (n, desc))
    else:
        nfail += 1
        print("not ok %d - %s" % (n, desc))


def skip(desc):
    global n
    n += 1
    print("ok %d - # SKIP %s" % (n, desc))


def diag(text):
    for line in text.rstrip("\n").split("\n"):
        print("#   " + line)


def done():
    """The plan line; the exit status."""
    print("1..%d" % n)
    return 1 if nfail else 0


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read()


def md_section(text, title):
    """From '## title' up to the next heading of level 1 or 2."""
    m = re.search(r"^## %s\n(.*?)(?=^##? |\Z)" % re.escape(title), text,
                  re.M | re.S)
    return m.group(1) if m else ""
