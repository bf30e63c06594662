#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The counters and metric families agree with their pages (TAP).

Usage: counters_test.py SRC TALLY_DP TALLYD TALLYCTL.

A real tally-dp (no hugepages, a net_null port that receives nothing)
and a real tallyd beside it, with one job: tally-dp's admin replies give
every counter name it has (stats: total, each lcore, admin; job_list and
job_del: a job's), and tallyd's /metrics every family it renders with
tally-dp up and a job, to which the families metrics.c can render only
elsewhere (state in etcd) are added from its source. Both directions
are checked, one TAP line per page and direction: every tally-dp counter
is named in docs/tools/tally-dp.md ("Counters" for the lcore counters,
"Admin socket" for a job's and the admin object's), every family and
tally_dp_drops_total reason in docs/metrics.md, and those pages name
none that do not exist; and no page (docs/, README.md) names a drop_*
counter or a *_total family that does not exist. Neither needs root
(the sockets and state are in a temporary directory, the metrics port is
the kernel's pick); where tally-dp's EAL does not come up, the whole
test is one skip saying why.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import doclib
from doclib import diag, md_section, ok, read, skip

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
from dpadmin import call as admin  # noqa: E402

doclib.SRC, DP, TALLYD, TALLYCTL = sys.argv[1:5]


def first_cells(table_text):
    """The `names` in the first cell of each table row."""
    out = set()
    for cell in re.findall(r"^\| ([^|]*) \|", table_text, re.M):
        out |= set(re.findall(r"`([a-z][a-z0-9_]*)`", cell))
    return out


def tables(section):
    """Each table of a section: (its header row, its text)."""
    return [(m.group(1), m.group(0)) for m in re.finditer(
        r"^(\|[^\n]*\|)\n\|[-|]+\|\n(?:\|[^\n]*\|\n?)*", section, re.M)]


def compare(page, real, doc, what):
    missing = sorted(real - doc)
    stale = sorted(doc - real)
    ok(not missing, "%s names every %s%s" % (
        page, what, " (missing: %s)" % ", ".join(missing) if missing
        else ""))
    ok(not stale, "%s names no %s that does not exist%s" % (
        page, what, " (stale: %s)" % ", ".join(stale) if stale else ""))


def wait_for(fn, secs=20.0):
    """fn() until it returns something true or secs pass."""
    end = time.monotonic() + secs
    while True:
        try:
            v = fn()
            if v:
                return v
        except (OSError, ValueError):
            pass
        if time.monotonic() > end:
            return None
        time.sleep(0.05)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_dp(tmp):
    sock = os.path.join(tmp, "dp.sock")
    log = open(os.path.join(tmp, "dp.log"), "w")
    # no-rx: net_null would otherwise hand the lcore a frame every poll.
    p = subprocess.Popen(
        [DP, "-l", "0,1", "--no-huge", "--no-shconf", "--no-pci", "-m",
         "256", "--file-prefix", "docsctr%d" % os.getpid(), "--vdev",
         "net_null0,no-rx=1", "--", "--addr", "10.77.0.1", "--admin", sock,
         "--idle-us", "1000", "--mbufs", "2047", "--mem-budget", "64"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    up = wait_for(lambda: p.poll() is None and
                  admin(sock, {"cmd": "ping"})["errno"] == 0)
    return p, sock, up


def dp_names(sock):
    """tally-dp's counter names: lcore counters, a job's, admin's."""
    st = admin(sock, {"cmd": "stats"})
    total = set(st["total"])
    per = [set(lc) - {"lcore"} for lc in st["lcores"]]
    ok(st["errno"] == 0 and per and all(s == total for s in per),
       "stats: each lcore has the counters of total (%d counters, %d "
       "lcores)" % (len(total), len(per)))
    r = admin(sock, {"cmd": "job_add", "id": 7, "token": "0123456789abcdef",
                     "world": 1, "window": 4, "max_elems": 16,
                     "members": [{"ip": "10.77.0.11", "port": 40001}]})
    ok(r["errno"] == 0, "job_add of a job of world 1 (%s)" %
       r.get("error", "ok"))
    jobs = admin(sock, {"cmd": "job_list"})["jobs"]
    job = set(jobs[0]["counters"]) if jobs else set()
    r = admin(sock, {"cmd": "job_del", "id": 7})
    ok(r["errno"] == 0 and set(r.get("counters", {})) == job and job,
       "job_list and job_del show a job's counters alike (%d)" % len(job))
    return total, job, set(st["admin"])


def check_dp_page(total, job, adm):
    page = "docs/tools/tally-dp.md"
    md = read(page)
    sect = md_section(md, "Counters")
    ctr = [t for h, t in tables(sect) if h.startswith("| counter |")]
    compare(page + ' "Counters"', total, first_cells("".join(ctr)),
            "counter of tally-dp's stats")
    sect = md_section(md, "Admin socket")
    key = [t for h, t in tables(sect) if h.startswith("| key |")]
    compare(page + ' "Admin socket"', job, first_cells("".join(key)),
            "counter of a job")
    m = re.search(r"`admin` object: ([^.]*)\.", sect)
    doc = set(re.findall(r"`([a-z_]+)`", m.group(1))) if m else set()
    compare(page + ' "Admin socket"', adm, doc,
            "key of stats' admin object")


def all_pages():
    """Every page a user reads: docs/ (man pages too) and README.md."""
    out = ["README.md"]
    for d, _, files in os.walk(os.path.join(doclib.SRC, "docs")):
        out += [os.path.relpath(os.path.join(d, f), doclib.SRC)
                for f in files if f.endswith((".md", ".8"))]
    return sorted(out)


def check_drop_names(total):
    """Every drop_* counter named anywhere is one tally-dp has."""
    named = set()
    for page in all_pages():
        named |= set(re.findall(r"\bdrop_[a-z0-9_]*[a-z0-9]\b", read(page)))
    stale = sorted(named - total)
    ok(named and not stale, "docs/, docs/man, README.md name no drop_* "
       "counter tally-dp lacks (%d named)%s" % (len(named), " (stale: %s)" %
                                               ", ".join(stale) if stale
                                               else ""))


def start_tallyd(tmp, dp_sock):
    log_path = os.path.join(tmp, "tallyd.log")
    log = open(log_path, "w")
    ctl = os.path.join(tmp, "ctl.sock")
    p = subprocess.Popen(
        [TALLYD, "-c", "/dev/null",
         "-s", "control_socket=" + ctl,
         "-s", "rendezvous=127.0.0.1:0",
         "-s", "rendezvous_tls=off",
         "-s", "metrics=127.0.0.1:0",
         "-s", "state_file=" + os.path.join(tmp, "state.json"),
         "-s", "dp_admin=" + dp_sock,
         "-s", "dp_poll_ms=50"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def port():
        with open(log_path) as f:
            m = re.search(r"metrics [0-9.]+:(\d+),", f.read())
        return m and int(m.group(1))
    return p, ctl, wait_for(lambda: p.poll() is None and port()), log_path


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=5) as r:
        return r.read().decode()


def label_values(text, fam):
    """The values of the label reason in the samples of a family."""
    return set(re.findall(r'^%s\{[^}]*reason="([^"]+)"' % fam, text, re.M))


def families(text):
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def check_metrics(tmp, dp_sock, dp_total):
    p, ctl, port, log = start_tallyd(tmp, dp_sock)
    ok(port is not None, "tallyd starts, metrics on 127.0.0.1:%s" % port)
    if port is None:
        with open(log) as f:
            diag(f.read())
        stop(p)
        return
    try:
        r = subprocess.run([TALLYCTL, "--socket", ctl, "job", "create",
                            "docs", "--world", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=20)
        ok(r.returncode == 0, "tallyctl job create docs --world 1")
        if r.returncode != 0:
            diag(r.stdout)
        # tally-dp's families come with the poll after tallyd reached it.
        text = wait_for(lambda: (lambda t: "tally_dp_rx_total" in t and
                                 "tally_job_info" in t and t)(scrape(port)))
        ok(text is not None, "/metrics has tallyd's, the job's and "
           "tally-dp's families")
        text = text or scrape(port)
    finally:
        stop(p)
    real = families(text)
    # Families metrics.c renders only elsewhere (state in etcd): its
    # literal names.
    src = read("control/tallyd/metrics.c")
    lit = set(re.findall(r'"(tally(?:d|_job|_dp)_[a-z0-9_]+)"', src))
    ok(len(lit & real) >= 10,
       "metrics.c's literal names are families the scrape has (%d of %d)" %
       (len(lit & real), len(lit)))
    real |= lit
    # Every tally-dp counter but drop_* is a family of its own.
    derived = {"tally_dp_%s_total" % c for c in dp_total
               if not c.startswith("drop_")}
    ok(derived <= real, "each counter of tally-dp's stats is a family%s" %
       ("" if derived <= real else " (none for: %s)" %
        ", ".join(sorted(derived - real))))
    md = read("docs/metrics.md")
    doc = set()
    for title in ("tallyd", "Jobs", "tally-dp"):
        for h, t in tables(md_section(md, title)):
            if h.startswith("| family |"):
                doc |= first_cells(t)
    compare("docs/metrics.md", real, doc, "family")

    # Anywhere a user reads (PromQL examples, troubleshooting): every
    # counter family named is one.
    named = set()
    for page in all_pages():
        named |= set(re.findall(r"\btally(?:d|_job|_dp)_[a-z0-9_]+_total\b",
                                read(page)))
    stale = sorted(named - real)
    ok(not stale, "docs/, docs/man, README.md name no counter family that "
       "does not exist (%d named)%s" % (len(named), " (stale: %s)" %
                                         ", ".join(stale) if stale else ""))

    # The reasons of tallyd's labelled families, in their rows' meaning
    # (the join failures' names nothing else; the evictions' also a key,
    # so there only one way).
    for fam in ("tallyd_join_failures_total", "tallyd_rdv_evicted_total"):
        row = re.search(r"^\| `%s` \|.*$" % fam, md, re.M)
        doc_r = set(re.findall(r"`([a-z][a-z0-9_]*)`", row.group(0).split(
            "|")[-2])) if row else set()
        real_r = label_values(text, fam)
        if fam == "tallyd_join_failures_total":
            compare("docs/metrics.md", real_r, doc_r, "reason of " + fam)
            continue
        missing = sorted(real_r - doc_r)
        ok(real_r and not missing, "docs/metrics.md names every reason of "
           "%s%s" % (fam, " (missing: %s)" % ", ".join(missing) if missing
                     else ""))

    reasons = label_values(text, "tally_dp_drops_total")
    ok({c[5:] for c in dp_total if c.startswith("drop_")} == reasons,
       "tally_dp_drops_total has a reason for each drop_* counter (%d)" %
       len(reasons))
    m = re.search(r"^`reason` is the counter's name without `drop_`:\n"
                  r"(.*?)\n\n", md_section(md, "tally-dp"), re.M | re.S)
    # (not the prefixes, `net_`)
    doc = set(re.findall(r"`([a-z][a-z0-9_]*[a-z0-9])`", m.group(1))) \
        if m else set()
    compare("docs/metrics.md", reasons, doc, "reason of tally_dp_drops_total")


def main():
    print("# counters of tally-dp and tallyd's families against docs/")
    with tempfile.TemporaryDirectory() as tmp:
        p, sock, up = start_dp(tmp)
        if not up:
            stop(p)
            with open(os.path.join(tmp, "dp.log")) as f:
                why = f.read().strip().split("\n")[-1]
            skip("tally-dp does not come up here (%s): needs an EAL "
                 "without hugepages" % why)
            return doclib.done()
        try:
            total, job, adm = dp_names(sock)
            check_dp_page(total, job, adm)
            check_drop_names(total)
            check_metrics(tmp, sock, total)
        finally:
            stop(p)
        ok(p.returncode == 0, "tally-dp stops on SIGTERM (exit %s)" %
           p.returncode)
    return doclib.done()


if __name__ == "__main__":
    sys.exit(main())
