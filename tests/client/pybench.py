#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# One rank of an allreduce run by the independent Python client
# (pyclient.py), beside `tally-bench allreduce --url` ranks of the same
# job: the same tensors (tally-bench's generator, from (seed, rank,
# index)), the same sequence of allreduces (a 1-element i32 barrier, the
# tensor, a barrier, per iteration, unless --no-barrier), the same
# `digest: fnv1a64 X` line. It checks its result against the reference
# it computes from every rank's tensor (the exact wrapping sum for i32;
# for f32 the fixed-point sum), so a rank that got other bits fails here
# and in tally-bench alike.
#
#   pybench.py --url tally://HOST:PORT/JOB [--ca FILE] [--token-file F]
#              --rank R --world W [--type f32|i32] [--size BYTES]
#              [--iters N] [--seed S] [--vary] [--no-barrier]
#              [--timeout-ms N] [--output FILE] [--elems N]
#
# The token comes from --token-file or TALLY_TOKEN, never argv. Exit 0:
# every check passed; 1: a result differs from the reference; 2: usage;
# 3: a join or an allreduce failed (the sentence on stderr).

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyclient  # noqa: E402

M64 = (1 << 64) - 1


def mix_int(z):
	"""tally-bench's mix() (SplitMix64's step) on a Python int."""
	z = (z + 0x9e3779b97f4a7c15) & M64
	z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
	z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
	return z ^ (z >> 31)


def mix_np(z):
	"""The same on a uint64 array (numpy wraps)."""
	z = z + np.uint64(0x9e3779b97f4a7c15)
	z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
	z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
	return z ^ (z >> np.uint64(31))


def gen(seed, rank, n, f32):
	"""Rank's tensor of n elements, as tally-bench allreduce makes it."""
	key = mix_int(seed ^ mix_int(rank + 1))
	h = mix_np(np.uint64(key) ^ np.arange(n, dtype=np.uint64))
	if not f32:
		return (h & np.uint64(0xFFFFFFFF)).astype(np.uint32).view("<i4")
	m16 = np.uint64(0xFFFF)
	a = (h & m16).astype(np.float32)
	b = ((h >> np.uint64(16)) & m16).astype(np.float32)
	c = ((h >> np.uint64(32)) & m16).astype(np.float32)
	x = (a + b + c) / np.float32(98304.0) - np.float32(1.0)
	out = (h >> np.uint64(48)) & np.uint64(0x3FF)
	mul = (np.uint64(2) + (h >> np.uint64(60))).astype(np.float32)
	return np.where(out == 0, x * mul, x).astype("<f4")


def reference(seed, world, n, f32):
	xs = [gen(seed, r, n, f32) for r in range(world)]
	if not f32:
		acc = np.zeros(n, dtype=np.int64)
		for x in xs:
			acc += x
		return (acc & 0xFFFFFFFF).astype(np.uint32).view("<i4")
	m = max((pyclient.fixp_absmax(x) for x in xs),
		key=pyclient.f32_bits) if n else np.float32(0)
	e = pyclient.fixp_exponent(m, world)
	acc = np.zeros(n, dtype=np.int64)
	for x in xs:
		acc += pyclient.fixp_encode(x, e)
	q = (acc & 0xFFFFFFFF).astype(np.uint32).view("<i4")
	return pyclient.fixp_decode(q, e)


def fnv1a64(data):
	h = 0xcbf29ce484222325
	for b in data:
		h = ((h ^ b) * 0x100000001b3) & M64
	return h


def barrier(m, world):
	s = m.allreduce_i32(np.array([1], dtype="<i4"))
	if int(s[0]) != world:
		raise pyclient.TallyError(71, "the barrier summed %d, not %d" %
			(int(s[0]), world))


def parse_args():
	p = argparse.ArgumentParser(description=__doc__)
	p.add_argument("--url", required=True)
	p.add_argument("--ca")
	p.add_argument("--token-file")
	p.add_argument("--rank", type=int, required=True)
	p.add_argument("--world", type=int, required=True)
	p.add_argument("--type", choices=("f32", "i32"), default="f32")
	p.add_argument("--size", type=int, default=1 << 20)
	p.add_argument("--iters", type=int, default=3)
	p.add_argument("--seed", type=int, default=1)
	p.add_argument("--vary", action="store_true")
	p.add_argument("--no-barrier", action="store_true")
	p.add_argument("--timeout-ms", type=int, default=5000)
	p.add_argument("--output")
	p.add_argument("--elems", type=int,
		help="elements a packet (default: the job's max_elems; more "
		"is refused by the dataplane, for tests of NACKs)")
	a = p.parse_args()
	if a.size < 0 or a.size % 4 or not 0 <= a.rank < a.world <= 64:
		p.error("bad --size, --rank or --world")
	return a


def main():
	a = parse_args()
	f32 = a.type == "f32"
	n = a.size // 4
	try:
		token = pyclient.read_token(a.token_file)
		m = pyclient.Member.join(a.url, token, a.rank, a.world,
			ca_file=a.ca, timeout_s=a.timeout_ms / 1e3,
			elems=a.elems)
	except (pyclient.TallyError, OSError) as e:
		print("pybench: join: %s" % e, file=sys.stderr)
		return 3
	ip, port = m.address()
	print("member: %s:%d, rank %d of %d, job %d, window %d, max_elems "
		"%d, ports %d/%d, auth %s, group %s" % (ip, port, a.rank,
		a.world, m.job, m.window, m.max_elems, m.dp[1], m.dp[2],
		"on" if m.keys else "off", m.group or "none"), flush=True)
	ok = True
	res = None
	try:
		for it in range(a.iters):
			seed = a.seed + it if a.vary else a.seed
			x = gen(seed, a.rank, n, f32)
			if not a.no_barrier:
				barrier(m, a.world)
			res = m.allreduce_f32(x) if f32 else \
				m.allreduce_i32(x)
			if not a.no_barrier:
				barrier(m, a.world)
			ref = reference(seed, a.world, n, f32)
			same = res.tobytes() == ref.tobytes()
			print("iter %d: %d elements, %s" % (it + 1, n,
				"equals the reference" if same else
				"FAIL: differs from the reference"), flush=True)
			ok = ok and same
	except pyclient.TallyError as e:
		print("pybench: %s" % e, file=sys.stderr)
		print("stats: %s" % m.stats)
		print("error: %s" % e.sentence)
		return 3
	finally:
		m.close()
	if a.output and res is not None:
		with open(a.output, "wb") as f:
			f.write(res.tobytes())
	print("digest: fnv1a64 %016x" % fnv1a64(res.tobytes()))
	print("stats: %s" % m.stats)
	print("check: %s" % ("ok" if ok else "FAIL"))
	return 0 if ok else 1


if __name__ == "__main__":
	sys.exit(main())
