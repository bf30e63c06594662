#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# The independent Python client (pyclient.py) against docs/protocol.md's
# own tables, read from the page: the header's fields at their offsets
# and sizes, the packet types, flags, encodings and status codes, the
# scale exponent's b per world and examples, and the fixed-point encoding
# and decoding examples. Together with proto_doc (the same tables against
# the C header) and fixp_doc (against libtally's fixp), it keeps the
# page, the C and a reader's client in agreement. TAP.
#
#   doc_test.py [docs/protocol.md]

import os
import re
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pyclient as pc  # noqa: E402

n_ok = n_fail = 0


def ok(cond, name):
	global n_ok, n_fail
	n_ok += 1
	if cond:
		print("ok %d - %s" % (n_ok, name))
	else:
		n_fail += 1
		print("not ok %d - %s" % (n_ok, name))


def table(text, heading):
	"""The rows (lists of cells, backticks dropped) of the first table
	after the line `heading`."""
	lines = text.splitlines()
	i = lines.index(heading)
	rows = []
	for ln in lines[i + 1:]:
		if ln.startswith("|"):
			rows.append([c.strip().strip("`") for c in
				ln.strip().strip("|").split("|")])
		elif rows:
			break
	return rows[2:]		# after the header and the --- line


def num(s):
	return int(s, 0)


def check_header(doc):
	rows = table(doc, "### Header fields")
	vals = {}
	fields = []
	for off, size, name, _ in rows:
		fields.append((num(off), num(size), name))
	ok(len(fields) == 15 and pc.HDR.size == 40 and
		sum(s for _, s, _ in fields) == 40,
		"the header: 15 fields, 40 bytes, as pyclient packs it")
	# Distinct values, packed by the client, found at the page's offsets.
	order = ["magic", "version", "type", "flags", "enc", "job", "token",
		"rank", "status", "slot", "offset", "count", "scale_exp",
		"next_block", "round"]
	for k, name in enumerate(order):
		vals[name] = (k + 1) * 0x0101
	sizes = {name: size for _, size, name in fields}
	args = [vals[n] & ((1 << (8 * sizes[n] - 1)) - 1) if n in sizes
		else 0 for n in order]
	raw = pc.HDR.pack(*args)
	good = all(n in sizes for n in order)
	for off, size, name in fields:
		want = args[order.index(name)] if name in order else None
		got = int.from_bytes(raw[off:off + size], "big")
		good = good and want == got
	ok(good, "every field at the page's offset and size, big-endian "
		"(%s)" % ", ".join("%s@%d" % (n, o) for o, _, n in fields))
	ok(pc.MAGIC == 0x7A11 and ("| 2 | 1 | version | %d for this "
		"document" % pc.VERSION) in doc, "magic 0x7A11, version 2")


def check_codes(doc):
	types = {r[1]: num(r[0]) for r in table(doc, "### Packet types")}
	ok(types == {"SUM": pc.T_SUM, "SUM_RESULT": pc.T_SUM_RESULT,
		"MAX": pc.T_MAX, "MAX_RESULT": pc.T_MAX_RESULT,
		"NACK": pc.T_NACK, "SCATTER": pc.T_SCATTER,
		"GATHER": pc.T_GATHER, "PART_RESULT": pc.T_PART_RESULT,
		"DONE": pc.T_DONE}, "packet types: %s" % types)
	flags = {r[1]: num(r[0]) for r in table(doc, "### Flags")}
	ok(flags == {"RETX": pc.F_RETX, "LAST": pc.F_LAST, "SET": pc.F_SET,
		"SPARSE": pc.F_SPARSE, "AUTH": pc.F_AUTH, "SEQ": pc.F_SEQ},
		"flags: %s" % flags)
	encs = {r[1]: num(r[0]) for r in table(doc, "### Encodings")}
	ok(encs.get("f32") == pc.ENC_F32 and encs.get("i32") == pc.ENC_I32,
		"encodings f32 and i32")
	st = {num(r[0]): r[1] for r in table(doc, "### Status codes")}
	ok(st == pc.STATUS, "status codes: the NACK names the client "
		"prints")
	bad_version = [r for r in table(doc, "### Status codes")
		if r[1] == "bad_version"][0][2]
	ok(bad_version == "version is not %d" % pc.VERSION,
		"bad_version names this version (%r)" % bad_version)


def f32_of(s):
	s = s.split()[0]
	if s in ("nan", "inf", "-inf"):
		return float(s)
	return float.fromhex(s) if "0x" in s else float(s)


def check_fixp(doc):
	rows = table(doc, "### Scale exponent: b per world")
	good = True
	for world, b in rows:
		lo, _, hi = world.partition("..")
		for w in range(int(lo), int(hi or lo) + 1):
			good = good and pc.fixp_b(w) == int(b)
	ok(good and len(rows) == 7, "b per world, 1..64")
	rows = table(doc, "### Scale exponent examples")
	bad = []
	for bits, _, world, e in rows:
		m = np.array([num(bits)], dtype="<u4").view("<f4")[0]
		got = pc.fixp_exponent(m, int(world))
		if got != int(e):
			bad.append("%s w%s: %s, not %s" % (bits, world, got, e))
	ok(not bad and len(rows) >= 10, "scale exponent examples (%d)%s" %
		(len(rows), "; " + "; ".join(bad) if bad else ""))
	for bits, want in ((0x7F800000, None), (0x7FC00000, None),
			(0xFF800000, None), (0xBF800000, None), (0x80000000, 0)):
		m = np.array([bits], dtype="<u4").view("<f4")[0]
		got = pc.fixp_exponent(m, 4)
		ok(got == want, "M bits 0x%08X: %s" % (bits,
			"no scale" if want is None else "e = 0"))
	rows = table(doc, "### Fixed-point encoding examples")
	bad = []
	for x, e, q in rows:
		got = int(pc.fixp_encode(np.array([f32_of(x)], dtype="<f4"),
			int(e))[0])
		if got != int(q):
			bad.append("%s at %s: %d, not %s" % (x, e, got, q))
	ok(not bad and len(rows) >= 8, "encoding examples (%d)%s" %
		(len(rows), "; " + "; ".join(bad) if bad else ""))
	rows = table(doc, "### Fixed-point decoding examples")
	bad = []
	for q, e, bits, _ in rows:
		got = pc.f32_bits(pc.fixp_decode(np.array([int(q)],
			dtype="<i4"), int(e))[0])
		if got != num(bits):
			bad.append("%s at %s: 0x%08X, not %s" % (q, e, got,
				bits))
	ok(not bad and len(rows) >= 6, "decoding examples (%d)%s" %
		(len(rows), "; " + "; ".join(bad) if bad else ""))
	x = np.array([1.0, float("nan"), -3.0, float("-nan")], dtype="<f4")
	ok(pc.f32_bits(pc.fixp_absmax(x)) == 0x40400000,
		"the member's maximum counts NaN as 0")
	ok(pc.f32_bits(pc.fixp_absmax(np.array([float("-inf"), 1.0],
		dtype="<f4"))) == 0x7F800000, "and an infinity as +inf")


def check_port_rule(doc):
	ok("dp_port + slot % dp_nports" in doc,
		"the page says which port a slot goes to")


def main():
	path = sys.argv[1] if len(sys.argv) > 1 else \
		os.path.join(HERE, "..", "..", "docs", "protocol.md")
	with open(path) as f:
		doc = f.read()
	check_header(doc)
	check_codes(doc)
	check_fixp(doc)
	check_port_rule(doc)
	print("1..%d" % n_ok)
	return 1 if n_fail else 0


if __name__ == "__main__":
	sys.exit(main())
