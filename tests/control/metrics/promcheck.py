#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""promcheck: a strict checker of Prometheus text exposition format 0.0.4.

  promcheck.py [FILE|-]     checks FILE (default: stdin). Exit 0 when it
                            is valid; else 1, with one line per error on
                            stderr: "promcheck: FILE:LINE: reason".
  promcheck.py --self-test  feeds itself known-good and known-bad texts
                            and prints TAP; exit 1 if any case misjudged.

What it holds, beyond what Prometheus itself would parse:
  - the text is UTF-8, lines end in "\\n" (no CR), the last one too;
  - blank lines are empty (no stray blanks); "# HELP" / "# TYPE" lines
    are well formed, other "#" lines are free comments;
  - metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names
    [a-zA-Z_][a-zA-Z0-9_]* and not "__"-prefixed, no label twice;
  - label values escape only \\\\, \\" and \\n; HELP texts only \\\\ and \\n;
  - values are decimals, +Inf, -Inf or NaN (Go's ParseFloat takes more
    spellings: "inf", hex; exporters should not use them); timestamps
    are int64 milliseconds;
  - tally's house rules: every family has one HELP (non-empty) and one
    TYPE, both before its first sample; a family's lines are together;
    no series twice (same name and label set, in any order); a counter's
    name ends in "_total" and its values are not negative; histogram
    buckets carry "le", summary quantiles "quantile".
"""
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
NAME_RE = re.compile(NAME)
LABEL_RE = re.compile(LABEL)
HELP_RE = re.compile(r"#[ \t]+HELP(?:[ \t]+(.*))?$")
TYPE_RE = re.compile(r"#[ \t]+TYPE(?:[ \t]+(.*))?$")
FLOAT_RE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
TS_RE = re.compile(r"-?[0-9]+$")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class Bad(Exception):
    """One error in one line."""


def check_help_text(text):
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "\\n":
                raise Bad("HELP text: bad escape %r (only \\\\ and \\n)"
                          % text[i:i + 2])
            i += 2
        else:
            i += 1


def parse_value(tok, what="value"):
    """Returns the float of a sample value token, or raises Bad."""
    if tok in ("+Inf", "-Inf", "NaN"):
        return float(tok)
    if not FLOAT_RE.match(tok):
        raise Bad("%s %r is not a float (a decimal, +Inf, -Inf or NaN)"
                  % (what, tok))
    return float(tok)


def skip_blanks(line, i):
    while i < len(line) and line[i] in " \t":
        i += 1
    return i


def parse_labels(line, i):
    """Parses "{...}" from line[i] == "{". Returns (labels, next index)."""
    labels = {}
    i += 1
    while True:
        i = skip_blanks(line, i)
        if i >= len(line):
            raise Bad("label set not closed with '}'")
        if line[i] == "}":
            return labels, i + 1
        m = LABEL_RE.match(line, i)
        if not m:
            raise Bad("bad label name at column %d" % (i + 1))
        name = m.group(0)
        if name.startswith("__"):
            raise Bad("label name %r is reserved (starts with __)" % name)
        if name in labels:
            raise Bad("label %r given twice" % name)
        i = skip_blanks(line, m.end())
        if i >= len(line) or line[i] != "=":
            raise Bad("label %r: '=' expected" % name)
        i = skip_blanks(line, i + 1)
        if i >= len(line) or line[i] != '"':
            raise Bad("label %r: value must be in double quotes" % name)
        i += 1
        value = []
        while True:
            if i >= len(line):
                raise Bad("label %r: value not terminated" % name)
            c = line[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                if i + 1 >= len(line) or line[i + 1] not in '\\"n':
                    raise Bad("label %r: bad escape %r (only \\\\, \\\" "
                              "and \\n)" % (name, line[i:i + 2]))
                value.append("\n" if line[i + 1] == "n" else line[i + 1])
                i += 2
                continue
            value.append(c)
            i += 1
        labels[name] = "".join(value)
        i = skip_blanks(line, i)
        if i < len(line) and line[i] == ",":
            i += 1
        elif i < len(line) and line[i] != "}":
            raise Bad("label %r: ',' or '}' expected after the value"
                      % name)


def parse_sample(line):
    """Returns (name, labels, value) of a sample line, or raises Bad."""
    m = NAME_RE.match(line)
    if not m:
        raise Bad("bad metric name")
    name = m.group(0)
    i = m.end()
    j = skip_blanks(line, i)
    labels = {}
    if j < len(line) and line[j] == "{":
        labels, i = parse_labels(line, j)
    elif i < len(line) and line[i] not in " \t":
        raise Bad("bad metric name (%r after %r)" % (line[i], name))
    rest = line[i:]
    if rest[:1] not in (" ", "\t"):
        raise Bad("a blank and the value expected after %r" % name)
    toks = rest.split()
    if not toks:
        raise Bad("value missing")
    if len(toks) > 2:
        raise Bad("trailing text %r after the timestamp" % toks[2])
    value = parse_value(toks[0])
    if len(toks) == 2:
        if not TS_RE.match(toks[1]) or not \
                -2**63 <= int(toks[1]) < 2**63:
            raise Bad("timestamp %r is not int64 milliseconds" % toks[1])
    return name, labels, value


class Checker:
    def __init__(self):
        self.types = {}        # family -> type
        self.helps = set()     # families with a HELP
        self.sampled = set()   # families with a sample
        self.seen = set()      # families any line of has come
        self.current = None    # family of the block being read
        self.series = {}       # (name, labels) -> line

    def enter(self, family):
        """Moves to family's block; its lines must be together."""
        if family != self.current:
            if family in self.seen:
                raise Bad("lines of family %r are not together (it "
                          "appeared before another family's)" % family)
            self.seen.add(family)
            self.current = family

    def family_of(self, name):
        if name in self.types:
            return name
        for suffix, kinds in (("_bucket", ("histogram",)),
                              ("_sum", ("histogram", "summary")),
                              ("_count", ("histogram", "summary"))):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.types.get(base) in kinds:
                return base
        return name

    def meta(self, line):
        m = HELP_RE.match(line)
        if m:
            parts = (m.group(1) or "").split(None, 1)
            if not parts or not NAME_RE.fullmatch(parts[0]):
                raise Bad("HELP: bad or missing metric name")
            name = parts[0]
            text = parts[1] if len(parts) > 1 else ""
            self.enter(name)
            if name in self.helps:
                raise Bad("second HELP for %r" % name)
            if name in self.sampled:
                raise Bad("HELP for %r after its samples" % name)
            if not text.strip():
                raise Bad("HELP for %r has no text" % name)
            check_help_text(text)
            self.helps.add(name)
            return
        m = TYPE_RE.match(line)
        if m:
            parts = (m.group(1) or "").split()
            if len(parts) != 2 or not NAME_RE.fullmatch(parts[0]):
                raise Bad("TYPE: want '# TYPE name type'")
            name, kind = parts
            if kind not in TYPES:
                raise Bad("TYPE %r: unknown type %r" % (name, kind))
            self.enter(name)
            if name in self.types:
                raise Bad("second TYPE for %r" % name)
            if name in self.sampled:
                raise Bad("TYPE for %r after its samples" % name)
            if kind == "counter" and not name.endswith("_total"):
                raise Bad("counter %r: name does not end in _total"
                          % name)
            self.types[name] = kind
        # Any other comment is free text.

    def sample(self, line, lineno):
        name, labels, value = parse_sample(line)
        family = self.family_of(name)
        self.enter(family)
        kind = self.types.get(family)
        if kind is None:
            raise Bad("sample of %r before (or without) its TYPE"
                      % family)
        if family not in self.helps:
            raise Bad("sample of %r before (or without) its HELP"
                      % family)
        if kind == "counter" and value < 0:
            raise Bad("counter %r has a negative value" % name)
        if kind == "histogram":
            if name == family:
                raise Bad("histogram %r: samples are _bucket, _sum, "
                          "_count" % family)
            if name.endswith("_bucket"):
                if "le" not in labels:
                    raise Bad("histogram bucket %r has no 'le'" % name)
                parse_value(labels["le"], "le")
        if kind == "summary" and name == family:
            if "quantile" not in labels:
                raise Bad("summary %r has no 'quantile'" % name)
            parse_value(labels["quantile"], "quantile")
        key = (name, frozenset(labels.items()))
        if key in self.series:
            raise Bad("series %s%s repeated (first at line %d)"
                      % (name, fmt_labels(labels), self.series[key]))
        self.series[key] = lineno
        self.sampled.add(family)


def fmt_labels(labels):
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % kv for kv in sorted(labels.items())) \
        + "}"


def check(data):
    """Returns [(line, reason)] of the bytes data; [] when valid."""
    errors = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        return [(line, "not UTF-8")]
    if text == "":
        return []
    lines = text.split("\n")
    if lines[-1] != "":
        errors.append((len(lines), "no newline at the end of the text"))
    else:
        lines.pop()
    c = Checker()
    for n, line in enumerate(lines, 1):
        try:
            if line.endswith("\r"):
                raise Bad("CR before the newline (lines end in \\n only)")
            if line == "":
                continue
            if line.strip() == "":
                raise Bad("line of blanks only")
            if line[0] in " \t":
                raise Bad("line starts with a blank")
            if line[0] == "#":
                c.meta(line)
            else:
                c.sample(line, n)
        except Bad as e:
            errors.append((n, str(e)))
    return errors


# (name, text, line of the first error or None when valid, words in it)
CASES = [
    ("good: tally-like families",
     '# HELP tallyd_up 1 while up.\n# TYPE tallyd_up gauge\ntallyd_up 1\n'
     '# HELP tally_dp_drops_total Drops \\\\ by reason.\\nSecond line.\n'
     '# TYPE tally_dp_drops_total counter\n'
     'tally_dp_drops_total{lcore="1",reason="bad_token"} 3\n'
     'tally_dp_drops_total{reason="bad_token",lcore="2"} 0\n', None, ""),
    ("good: empty text", "", None, ""),
    ("good: escapes, specials, timestamps, blanks, comments",
     '# a free comment\n\n# HELP g A gauge.\n# TYPE g gauge\n'
     'g{a="q\\"uo\\\\te\\nnl",} +Inf 1700000000000\ng{a="2"} -Inf\n'
     'g{a="3"} NaN\ng{a="4"}\t-1.5e-3\ng{ b = "x" } .5\ng{} 7 -5\n',
     None, ""),
    ("good: histogram and summary",
     '# HELP h H.\n# TYPE h histogram\nh_bucket{le="0.5"} 1\n'
     'h_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n'
     '# HELP s S.\n# TYPE s summary\ns{quantile="0.9"} 1\ns_sum 1\n'
     's_count 1\n', None, ""),
    ("good: colon in a name, blanks before the value",
     "# HELP a:b_total A.\n# TYPE a:b_total counter\na:b_total  \t3\n",
     None, ""),
    ("bad: no newline at the end",
     "# HELP a A.\n# TYPE a gauge\na 1", 3, "newline"),
    ("bad: metric name", "# HELP a A.\n# TYPE a gauge\n1a 1\n", 3,
     "metric name"),
    ("bad: dash in a metric name",
     "# HELP a A.\n# TYPE a gauge\na-b 1\n", 3, "metric name"),
    ("bad: label name", '# HELP a A.\n# TYPE a gauge\na{1x="v"} 1\n', 3,
     "label name"),
    ("bad: reserved label name",
     '# HELP a A.\n# TYPE a gauge\na{__x="v"} 1\n', 3, "reserved"),
    ("bad: label twice",
     '# HELP a A.\n# TYPE a gauge\na{x="1",x="2"} 1\n', 3, "twice"),
    ("bad: escape \\t in a label value",
     '# HELP a A.\n# TYPE a gauge\na{x="\\t"} 1\n', 3, "escape"),
    ("bad: bare quote in a label value",
     '# HELP a A.\n# TYPE a gauge\na{x="a"b"} 1\n', 3, "expected"),
    ("bad: label value not terminated",
     '# HELP a A.\n# TYPE a gauge\na{x="ab} 1\n', 3, "not terminated"),
    ("bad: label value unquoted",
     '# HELP a A.\n# TYPE a gauge\na{x=ab} 1\n', 3, "double quotes"),
    ("bad: float with a comma",
     "# HELP a A.\n# TYPE a gauge\na 1,5\n", 3, "not a float"),
    ("bad: lower-case inf", "# HELP a A.\n# TYPE a gauge\na inf\n", 3,
     "not a float"),
    ("bad: value missing", "# HELP a A.\n# TYPE a gauge\na{x=\"1\"}\n", 3,
     "value"),
    ("bad: fractional timestamp",
     "# HELP a A.\n# TYPE a gauge\na 1 1.5\n", 3, "timestamp"),
    ("bad: text after the timestamp",
     "# HELP a A.\n# TYPE a gauge\na 1 2 3\n", 3, "trailing"),
    ("bad: TYPE after the samples",
     "# HELP a A.\na 1\n# TYPE a gauge\n", 2, "TYPE"),
    ("bad: TYPE twice",
     "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\na 1\n", 3,
     "second TYPE"),
    ("bad: HELP twice",
     "# HELP a A.\n# HELP a A.\n# TYPE a gauge\na 1\n", 2, "second HELP"),
    ("bad: HELP without text", "# HELP a\n# TYPE a gauge\na 1\n", 1,
     "no text"),
    ("bad: HELP escape", "# HELP a A \\d.\n# TYPE a gauge\na 1\n", 1,
     "escape"),
    ("bad: unknown type", "# HELP a A.\n# TYPE a counterx\na 1\n", 2,
     "unknown type"),
    ("bad: no TYPE", "# HELP a A.\na 1\n", 2, "TYPE"),
    ("bad: no HELP", "# TYPE a gauge\na 1\n", 2, "HELP"),
    ("bad: series twice, labels reordered",
     '# HELP a A.\n# TYPE a gauge\na{x="1",y="2"} 1\na{y="2",x="1"} 2\n',
     4, "repeated"),
    ("bad: family not together",
     "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\n# HELP b B.\n"
     "# TYPE b gauge\nb 1\na{x=\"2\"} 1\n", 7, "not together"),
    ("bad: counter without _total",
     "# HELP a A.\n# TYPE a counter\na 1\n", 2, "_total"),
    ("bad: negative counter",
     "# HELP a_total A.\n# TYPE a_total counter\na_total -1\n", 3,
     "negative"),
    ("bad: bucket without le",
     "# HELP h H.\n# TYPE h histogram\nh_bucket 1\n", 3, "'le'"),
    ("bad: CRLF", "# HELP a A.\r\n# TYPE a gauge\na 1\n", 1, "CR"),
    ("bad: blanks-only line",
     "# HELP a A.\n# TYPE a gauge\n  \na 1\n", 3, "blanks"),
    ("bad: not UTF-8", b"# HELP a A\xff.\n# TYPE a gauge\na 1\n", 1,
     "UTF-8"),
]


def self_test():
    print("1..%d" % len(CASES))
    failed = 0
    for k, (name, text, line, words) in enumerate(CASES, 1):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        errors = check(data)
        if line is None:
            ok = errors == []
        else:
            ok = bool(errors) and errors[0][0] == line and \
                words in errors[0][1]
        print("%s %d - %s" % ("ok" if ok else "not ok", k, name))
        if not ok:
            failed += 1
            print("# expected %s, got %r" % (
                "valid" if line is None else
                "line %d with %r" % (line, words), errors))
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or argv[1:2] in (["-h"], ["--help"]):
        sys.stderr.write(__doc__)
        return 2
    path = argv[1] if len(argv) == 2 else "-"
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    errors = check(data)
    for line, reason in errors:
        sys.stderr.write("promcheck: %s:%d: %s\n" % (
            "<stdin>" if path == "-" else path, line, reason))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
