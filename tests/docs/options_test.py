#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The options the programs take agree with their pages (TAP).

Usage: options_test.py SRC [--dp TALLY_DP] [--tallyd TALLYD]
[--tallyctl TALLYCTL]; a program not given is skipped, visibly.

For tally-dp, tallyd and tallyctl (each command of it): the options the
built program's --help prints are extracted, and so are the options its
man page (docs/man/NAME.8: SYNOPSIS, OPTIONS, COMMANDS) and its tools
page (docs/tools/NAME.md: the synopsis block and the option tables)
list, each page in its own format. Both directions are checked, one TAP
line per page and direction: an option the program has that a page
lacks (missing), and one a page names that the program's help does not
(stale). Then every option the help or a page names is given to the
program, which must not refuse it as unknown: a documented option the
program refuses is the worse drift. As tests/control/ops_test.sh does for
tallyd's configuration keys.
"""
import os
import re
import subprocess
import sys
import tempfile

import doclib
from doclib import diag, md_section, ok, read, skip

doclib.SRC = sys.argv[1]
PROGS = {}
for i in range(2, len(sys.argv) - 1, 2):
    PROGS[sys.argv[i].lstrip("-")] = sys.argv[i + 1]

# An option as help and pages write it: -c, --config, --max-job-mem.
OPT = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")
# In roff a dash is \-.
ROFF_OPT = re.compile(r"(?<![\w-])((?:\\-){1,2}[a-zA-Z][a-zA-Z0-9\\-]*)")


def opts(text):
    """The options text names (a lone '-x' counts only as a letter)."""
    return {o for o in OPT.findall(text)
            if o.startswith("--") or len(o) == 2}


def roff_opts(text):
    text = re.sub(r"\\f[BIRP]", "", text)
    return {o.replace("\\-", "-") for o in ROFF_OPT.findall(text)
            if o.startswith("\\-\\-") or len(o) == 3}


def man_section(text, name):
    """The lines of .SH NAME up to the next .SH."""
    m = re.search(r"^\.SH %s\n(.*?)(?=^\.SH |\Z)" % re.escape(name), text,
                  re.M | re.S)
    return m.group(1) if m else ""


def man_tp_heads(section):
    """The line after each .TP: the option (or command) it describes."""
    return re.findall(r"^\.TP\n(.*)$", section, re.M)



def md_table_opts(section):
    """The options in the first cell of each row of a section's tables."""
    out = set()
    for cell in re.findall(r"^\| ([^|]*) \|", section, re.M):
        out |= {o for o in opts(cell) if "`" + o in cell}
    return out


def md_code(section):
    """The first ``` block of a section."""
    m = re.search(r"^```[a-z]*\n(.*?)^```", section, re.M | re.S)
    return m.group(1) if m else ""


def run(argv, timeout=20):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout, p.stderr


def compare(page, real, doc, what, but=""):
    """Two TAP lines: page lacks none of real; page names none beyond.
    real and doc map a scope ('' or a command) to a set of options; but
    says which of the program's real leaves out."""
    missing, stale = [], []
    for scope in sorted(set(real) | set(doc)):
        tag = scope + " " if scope else ""
        missing += [tag + o for o in sorted(real.get(scope, set()) -
                                            doc.get(scope, set()))]
        stale += [tag + o for o in sorted(doc.get(scope, set()) -
                                          real.get(scope, set()))]
    ok(not missing, "%s lists every option of %s%s%s" % (
        page, what, " but " + but if but else "",
        " (missing: %s)" % ", ".join(missing) if missing else ""))
    ok(not stale, "%s lists no option %s's help lacks%s" % (
        page, what, " (stale: %s)" % ", ".join(stale) if stale else ""))


def refused_check(prog, cases, argv_of,
                  unknown=r"unrecognized option|invalid option"):
    """One TAP line: prog refuses none of cases (options, or arguments
    that give one) as unknown (getopt's words, or unknown); argv_of(case)
    is the command line that gives it."""
    refused = [c if isinstance(c, str) else " ".join(c)
               for c in sorted(cases)
               if re.search(unknown, run(argv_of(c))[2])]
    ok(not refused, "%s takes every option its help and pages name%s" % (
        prog, " (refused: %s)" % "; ".join(refused) if refused else ""))


# --- tally-dp ----------------------------------------------------------------
def eal():
    # The least EAL: no hugepages, no PCI, no port (parse_args() runs
    # before tally-dp looks for one).
    return ["-l", "0", "--no-huge", "--no-shconf", "--no-pci", "-m", "64",
            "--file-prefix", "docs%d" % os.getpid()]


def check_dp(exe, tmp):
    rc, out, err = run([exe] + eal() + ["--", "--help"])
    ok(rc == 0 and "usage: tally-dp" in out,
       "tally-dp --help prints its usage (exit %d)" % rc)
    if rc != 0:
        diag(out + err)
        return
    # The usage's option column, not EAL's.
    real = {"": opts(out.split("\n", 1)[1])}

    man = read("docs/man/tally-dp.8")
    compare("docs/man/tally-dp.8 SYNOPSIS",
            {"": real[""] - {"-h", "--help"}},
            {"": roff_opts(man_section(man, "SYNOPSIS")) - {"--"}},
            "tally-dp", "-h, --help")
    compare("docs/man/tally-dp.8 OPTIONS", real,
            {"": roff_opts("\n".join(man_tp_heads(
                man_section(man, "OPTIONS"))))}, "tally-dp")
    md = read("docs/tools/tally-dp.md")
    head = md.split("\n## ", 1)[0]
    compare("docs/tools/tally-dp.md synopsis",
            {"": real[""] - {"-h", "--help"}},
            {"": opts(md_code(head))}, "tally-dp", "-h, --help")
    compare("docs/tools/tally-dp.md option table", real,
            {"": md_table_opts(head)}, "tally-dp")

    docs = (roff_opts(man_section(man, "SYNOPSIS")) - {"--"}) | \
        roff_opts("\n".join(man_tp_heads(man_section(man, "OPTIONS")))) | \
        opts(md_code(head)) | md_table_opts(head)
    # --name=x: refused as unknown, or taken (a bad value, a missing
    # --addr, or -h's usage: anything but "unrecognized").
    refused_check("tally-dp", real[""] | docs, lambda o: [exe] + eal() + [
        "--", o if len(o) == 2 else o + "=x"])


# --- tallyd ------------------------------------------------------------------
def check_tallyd(exe, tmp):
    rc, out, err = run([exe, "--help"])
    ok(rc == 0 and out.startswith("usage: tallyd"),
       "tallyd --help prints its usage (exit %d)" % rc)
    if rc != 0:
        diag(out + err)
        return
    real = {"": opts(out.split("\n", 1)[1])}

    man = read("docs/man/tallyd.8")
    man_opts = roff_opts("\n".join(man_tp_heads(man_section(man,
                                                            "OPTIONS"))))
    compare("docs/man/tallyd.8 OPTIONS", real, {"": man_opts}, "tallyd")
    md = read("docs/tools/tallyd.md")
    head = md.split("\n## ", 1)[0]
    compare("docs/tools/tallyd.md option table", real,
            {"": md_table_opts(head)}, "tallyd")
    # The synopses name each option by one of its names.
    syn = {"docs/man/tallyd.8 SYNOPSIS":
           roff_opts(man_section(man, "SYNOPSIS")),
           "docs/tools/tallyd.md synopsis": opts(md_code(head))}
    pairs = [set(opts(line)) for line in out.split("\n")[1:]
             if line.lstrip().startswith("-")]
    for page, names in syn.items():
        missing = [min(p, key=len) for p in pairs if p and not p & names]
        stale = sorted(names - real[""])
        ok(not missing and not stale,
           "%s names each option of tallyd once, and no other%s%s" % (
               page, " (missing: %s)" % ", ".join(missing) if missing
               else "", " (stale: %s)" % ", ".join(stale) if stale else ""))

    docs = man_opts | md_table_opts(head) | syn[
        "docs/man/tallyd.8 SYNOPSIS"] | syn["docs/tools/tallyd.md synopsis"]
    # Never starts: --check-config opens nothing, -c a file that is not
    # there stops it first.
    refused_check("tallyd", real[""] | docs, lambda o: [
        exe, "-c", "/dev/null"] + ([o, "x"] if len(o) == 2 else [o + "=x"]) +
        ["--check-config"])


# --- tallyctl ----------------------------------------------------------------
def check_tallyctl(exe, tmp):
    rc, out, err = run([exe, "--help"])
    ok(rc == 0 and out.startswith("Usage: tallyctl"),
       "tallyctl --help prints its usage (exit %d)" % rc)
    if rc != 0:
        diag(out + err)
        return
    top, rest = out.split("\nCommands:\n", 1)
    cmds_text, glob_text = rest.split("\nGlobal options", 1)
    real = {"": opts(top) | opts(glob_text.split("\nExit status")[0])}
    # Commands: the two-space lines; a group's command has two words.
    for line in cmds_text.split("\n"):
        m = re.match(r"^  ([a-z]+)(?: ([a-z]+))?", line)
        if not m:
            continue
        cmd = m.group(1)
        if m.group(2) and run([exe, "help", cmd, m.group(2)])[0] == 0:
            cmd += " " + m.group(2)
        rc, use, err = run([exe, "help"] + cmd.split())
        ok(rc == 0 and use.startswith("Usage: tallyctl " + cmd),
           "tallyctl help %s prints its usage" % cmd)
        real[cmd] = opts(use)
    ok(len(real) > 4, "tallyctl has commands (%s)" %
       ", ".join(sorted(k for k in real if k)))

    # man: SYNOPSIS blocks start at '.B tallyctl[ command]'; COMMANDS
    # entries at .TP, the command's words in bold.
    man = read("docs/man/tallyctl.8")
    syn = {}
    scope = None
    for line in man_section(man, "SYNOPSIS").split("\n"):
        m = re.match(r"^\.B tallyctl(?: ([a-z ]+))?$", line)
        if m:
            scope = (m.group(1) or "").strip()
            syn.setdefault(scope, set())
        elif scope is not None:
            syn[scope] |= roff_opts(line)
    # A synopsis shows how to run a command: no -h, --help, --version.
    run_opts = dict(real)
    run_opts[""] = real[""] - {"-h", "--help", "--version"}
    compare("docs/man/tallyctl.8 SYNOPSIS", run_opts, syn,
            "tallyctl", "-h, --help, --version")
    body = {}
    entries = re.split(r"^\.TP\n", man_section(man, "COMMANDS"), flags=re.M)
    for e in entries[1:]:
        head = re.sub(r"\\f[BIRP]|^\.B[IR]* |\"", "", e.split("\n")[0])
        words = re.match(r"([a-z]+)(?: ([a-z]+))?", head)
        cmd = words.group(1)
        if words.group(2) and words.group(1) + " " + words.group(2) in real:
            cmd += " " + words.group(2)
        # An entry may mention the global options too.
        body[cmd] = roff_opts(e) - (real[""] if cmd in real else set())
    glob = roff_opts("\n".join(man_tp_heads(man_section(man, "OPTIONS"))))
    body[""] = glob
    compare("docs/man/tallyctl.8 OPTIONS and COMMANDS", real, body,
            "tallyctl")

    md = read("docs/tools/tallyctl.md")
    sect = md_section(md, "Synopsis")
    syn = {"": set()}
    scope = None
    for line in md_code(sect).split("\n"):
        m = re.match(r"^tallyctl(?: ([a-z]+(?: [a-z]+)?))?(?= |$)", line)
        if m:
            scope = m.group(1) or ""
            if scope and scope not in real:
                scope = scope.split()[0]
            syn.setdefault(scope, set())
            line = line[m.end():]
        if scope is not None and line.strip():
            syn[scope] |= opts(line)
    compare("docs/tools/tallyctl.md synopsis", run_opts, syn,
            "tallyctl", "-h, --help, --version")
    tables = {"": md_table_opts(sect)}
    for cmd in real:
        s = md_section(md, cmd) if cmd else ""
        if cmd and md_table_opts(s):
            tables[cmd] = md_table_opts(s)
    compare("docs/tools/tallyctl.md option tables",
            {k: v for k, v in real.items() if k in tables}, tables,
            "tallyctl")

    # Each option in its place: a command's after the command, a global
    # one before the command and after it (as the pages say). A socket
    # nobody serves: whatever is taken ends in exit 3, its output or a
    # usage error about its value, never "unknown option".
    sock = os.path.join(tmp, "none.sock")
    docs = {}
    for d in (syn, tables, body):
        for k, v in d.items():
            docs.setdefault(k, set()).update(v)
    cases = []
    for cmd in sorted(set(real) | set(docs)):
        argv_cmd = tuple(cmd.split()) if cmd else ("ping",)
        for o in sorted(real.get(cmd, set()) | docs.get(cmd, set())):
            # Alone: one that wants a value says so, not "unknown".
            cases.append(argv_cmd + (o,))
            if not cmd:
                cases.append((o,) + argv_cmd)
    refused_check("tallyctl", cases, lambda c: [exe, "--socket", sock] +
                  list(c), "unknown option")


def main():
    print("# options of %s against docs/man and docs/tools" %
          ", ".join(sorted(PROGS)))
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("dp", check_dp), ("tallyd", check_tallyd),
                         ("tallyctl", check_tallyctl)):
            exe = PROGS.get(name)
            if exe is None:
                skip("%s not built" % name)
                continue
            fn(exe, tmp)
    return doclib.done()


if __name__ == "__main__":
    sys.exit(main())
