#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# An independent tally worker, written from docs/protocol.md and
# docs/control.md alone (never from libtally's sources), for Debian's
# /usr/bin/python3 (standard library, numpy; python3-cryptography for
# authenticated jobs). It joins a job through tallyd's rendezvous over
# TLS, sends from one UDP socket, and runs dense i32 sums and f32 sums
# through the default codec (fixp: the scale round, then i32 sums), with
# the window of slots, their rounds and shadow sets, retransmission on
# timeout and the slot's UDP port. tests/e2e/pyclient_test.sh runs it in
# jobs beside libtally's workers and checks that every rank gets the
# same bits; docs/protocol.md ("Writing a client") points here.
#
# As a library:
#     m = Member.join("tally://10.77.0.1:7470/train", token, rank, world,
#                     ca_file="ca.crt")
#     out = m.allreduce_i32(np_int32_array)      # wrapping sums
#     out = m.allreduce_f32(np_float32_array)    # fixp, bit-exact
#     m.close()

import errno
import json
import os
import select
import socket
import ssl
import struct
import time
import urllib.parse

import numpy as np

try:
	from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:		# plain jobs only
	AESGCM = None

# docs/protocol.md, "Header" and its tables.
MAGIC = 0x7A11
VERSION = 2
HDR = struct.Struct(">HBBBBHQBBHIHhIQ")	# 40 bytes
T_SUM, T_SUM_RESULT, T_MAX, T_MAX_RESULT, T_NACK = 1, 2, 3, 4, 5
# Collectives with an owner (docs/protocol.md, "Collectives"): this
# client does not send them, and ignores their results.
T_SCATTER, T_GATHER, T_PART_RESULT, T_DONE = 6, 7, 8, 9
F_RETX, F_LAST, F_SET, F_SPARSE, F_AUTH = 0x01, 0x02, 0x04, 0x08, 0x10
F_SEQ = 0x20	# not sent: this client gets no NACK gap
ENC_F32, ENC_I32 = 1, 2
NO_BLOCK = 0xFFFFFFFF
RESULT_RANK = 255
TAG_LEN = 16
MAX_COUNT = 8192
STATUS = {1: "truncated", 2: "bad_magic", 3: "bad_version", 4: "bad_type",
	5: "bad_encoding", 6: "bad_length", 7: "unknown_job", 8: "bad_token",
	9: "bad_rank", 10: "bad_source", 11: "bad_slot", 12: "mismatch",
	13: "early", 14: "stale", 15: "bad_auth", 16: "gap", 17: "bad_owner",
	18: "not_owner", 19: "wrong_op"}
# docs/control.md, "Rendezvous protocol".
RDV_PORT = 7470
RDV_MAX_MSG = 4096


class TallyError(Exception):
	"""A failed join or allreduce: errno (positive) and a sentence."""

	def __init__(self, err, sentence):
		super().__init__("%s (%s)" % (sentence, os.strerror(err)))
		self.errno = err
		self.sentence = sentence


def read_token(path=None):
	"""The job's token: from the file at path (blanks around it ignored)
	or else from the environment's TALLY_TOKEN; never from argv."""
	if path is not None:
		with open(path) as f:
			tok = f.read().strip()
	else:
		tok = os.environ.get("TALLY_TOKEN", "").strip()
	if len(tok) != 64 or any(c not in "0123456789abcdefABCDEF"
			for c in tok):
		raise TallyError(errno.EINVAL, "the job token is not 64 hex "
			"digits (a file, or TALLY_TOKEN)")
	return tok.lower()


def parse_url(url):
	"""tally://HOST[:PORT]/JOB[?ca=FILE][&tls=on|off] into
	(host, port, job, ca, tls)."""
	u = urllib.parse.urlsplit(url)
	if u.scheme != "tally" or not u.hostname or len(u.path) < 2:
		raise TallyError(errno.EINVAL, "bad URL %r" % url)
	q = urllib.parse.parse_qs(u.query)
	tls = q.get("tls", ["on"])[-1]
	if tls not in ("on", "off"):
		raise TallyError(errno.EINVAL, "bad tls= in %r" % url)
	return (u.hostname, u.port or RDV_PORT, u.path[1:],
		q.get("ca", [None])[-1], tls == "on")


# --- the rendezvous --------------------------------------------------------

def _send_msg(conn, obj):
	data = json.dumps(obj).encode()
	conn.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(conn, n):
	buf = b""
	while len(buf) < n:
		part = conn.recv(n - len(buf))
		if not part:
			raise TallyError(errno.ECONNRESET, "tallyd closed the "
				"rendezvous connection")
		buf += part
	return buf


def _recv_msg(conn):
	(n,) = struct.unpack(">I", _recv_exact(conn, 4))
	if n < 1 or n > RDV_MAX_MSG:
		raise TallyError(errno.EPROTO, "rendezvous message of %d bytes"
			% n)
	msg = json.loads(_recv_exact(conn, n))
	if msg.get("op") == "error" or msg.get("errno", 0) != 0:
		raise TallyError(msg.get("errno") or errno.EPROTO,
			"tallyd: " + msg.get("error", "error"))
	return msg


def _connect(host, port, ca, tls, timeout):
	raw = socket.create_connection((host, port), timeout=timeout)
	if not tls:
		return raw
	ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
		cafile=ca or os.environ.get("TALLY_CA"))
	ctx.minimum_version = ssl.TLSVersion.TLSv1_2
	try:
		return ctx.wrap_socket(raw, server_hostname=host)
	except ssl.SSLCertVerificationError as e:
		raw.close()
		raise TallyError(errno.EKEYREJECTED, "tallyd's TLS certificate "
			"is not trusted: %s" % e.verify_message)
	except (ssl.SSLError, OSError) as e:
		raw.close()
		raise TallyError(errno.EPROTO, "TLS with tallyd at %s failed: "
			"%s" % (host, e))


def _data_socket(params, bind_port):
	"""The member's one UDP socket, bound to the address the kernel
	sends from toward the dataplane (the member address to report); in
	a multicast job, to the group's port on any address, in the group.
	Returns (socket, ip, port)."""
	dp = (params["dp_ip"], params["dp_port"])
	probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	try:
		probe.connect(dp)
		ip = probe.getsockname()[0]
	finally:
		probe.close()
	sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	try:
		sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
		if params.get("group"):
			gip, gport = params["group"].rsplit(":", 1)
			sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
			sock.bind(("0.0.0.0", int(gport)))
			sock.setsockopt(socket.IPPROTO_IP,
				socket.IP_ADD_MEMBERSHIP, socket.inet_aton(gip) +
				socket.inet_aton(ip))
			return sock, ip, int(gport)
		sock.bind((ip, bind_port))
		return sock, ip, sock.getsockname()[1]
	except BaseException:
		sock.close()
		raise


# --- authenticated jobs: AES-128-GMAC --------------------------------------

def _iv(kind, typ, slot, rnd):
	return struct.pack(">BBHQ", kind, typ, slot, rnd)


def _aad(hdr, payload):
	# The header with RETX cleared, 8 zero bytes, the payload.
	return hdr[:4] + bytes([hdr[4] & ~F_RETX & 0xFF]) + hdr[5:] + \
		bytes(8) + payload


class _Keys:
	def __init__(self, auth):
		if AESGCM is None:
			raise TallyError(errno.ENOTSUP, "an authenticated job "
				"needs python3-cryptography")
		self.up = AESGCM(bytes.fromhex(auth["up"]))
		self.down = AESGCM(bytes.fromhex(auth["down"]))
		self.result = AESGCM(bytes.fromhex(auth["result"]))

	def tag(self, hdr, payload, typ, slot, rnd):
		"""The tag of one of our contributions."""
		return self.up.encrypt(_iv(1, typ, slot, rnd), b"",
			_aad(hdr, payload))

	def check(self, hdr, payload, tag, typ, status, slot, rnd):
		"""True when a result's or NACK's tag is the aggregator's."""
		if typ == T_NACK:
			key, iv = self.down, _iv(2, status, slot, rnd)
		else:
			key, iv = self.result, _iv(3, typ, slot, rnd)
		try:
			key.decrypt(iv, tag, _aad(hdr, payload))
			return True
		except Exception:
			return False


# --- a member of a job -------------------------------------------------------

class Stats:
	def __init__(self):
		self.sent = self.retransmits = self.results = 0
		self.ignored = self.nacks = self.bad_tags = 0

	def __str__(self):
		return ("packets_sent %d, retransmits %d, results %d, ignored "
			"%d, nacks %d, bad_tags %d" % (self.sent,
			self.retransmits, self.results, self.ignored,
			self.nacks, self.bad_tags))


class Member:
	"""One rank's membership of a job: its UDP socket, the job's
	parameters, its wire token, keys and every slot's round."""

	@classmethod
	def join(cls, url, token, rank, world, ca_file=None, bind_port=0,
			timeout_s=5.0, join_timeout_s=120.0, elems=None):
		"""Joins the job at url (tally://HOST[:PORT]/JOB) as rank of
		world with the job's token (64 hex); returns the Member once
		every rank has joined. elems: chunk size (default and most
		the job's max_elems; tests ask for more to see a refusal)."""
		host, port, job, ca, tls = parse_url(url)
		if os.environ.get("TALLY_TLS") == "off":
			tls = False
		conn = _connect(host, port, ca_file or ca, tls, timeout_s)
		sock = None
		try:
			_send_msg(conn, {"op": "join", "v": 1, "job": job,
				"token": token, "rank": rank, "world": world})
			params = _recv_msg(conn)
			if params.get("op") != "params":
				raise TallyError(errno.EPROTO, "expected params")
			sock, ip, uport = _data_socket(params, bind_port)
			_send_msg(conn, {"op": "member", "ip": ip,
				"port": uport})
			conn.settimeout(join_timeout_s)
			ready = _recv_msg(conn)
			if ready.get("op") != "ready":
				raise TallyError(errno.EPROTO, "expected ready")
			return cls(params, ready, rank, world, sock, timeout_s,
				elems)
		except BaseException:
			if sock is not None:
				sock.close()
			raise
		finally:
			conn.close()

	def __init__(self, params, ready, rank, world, sock, timeout_s,
			elems=None):
		codec = params.get("codec", "fixp")
		if codec.split(",")[0] != "fixp":
			sock.close()
			raise TallyError(errno.EOPNOTSUPP, "codec %s is not "
				"supported by this client" % codec)
		self.dp = (params["dp_ip"], params["dp_port"],
			params.get("dp_nports", 1))
		self.job = params["job_id"]
		self.window = params["window"]
		self.max_elems = params["max_elems"]
		self.elems = elems or self.max_elems
		self.group = params.get("group")
		self.wire_token = int(ready["wire_token"], 16)
		self.keys = _Keys(ready["auth"]) if ready.get("auth") else None
		self.epoch = ready.get("epoch")
		self.rank, self.world = rank, world
		self.sock = sock
		self.sock.setblocking(False)
		self.timeout_s = timeout_s
		self.rto_s = 0.02
		self.rounds = [0] * self.window
		self.broken = False
		self.stats = Stats()

	def close(self):
		self.sock.close()

	def address(self):
		return self.sock.getsockname()

	# --- packets ---------------------------------------------------------

	def _packet(self, typ, flags, enc, slot, offset, count, scale_exp,
			rnd, payload):
		if self.keys:
			flags |= F_AUTH
		if rnd & 1:
			flags |= F_SET
		hdr = HDR.pack(MAGIC, VERSION, typ, flags, enc, self.job,
			self.wire_token, self.rank, 0, slot, offset, count,
			scale_exp, NO_BLOCK, rnd)
		pkt = hdr + payload
		if self.keys:
			pkt += self.keys.tag(hdr, payload, typ, slot, rnd)
		return pkt

	def _port(self, slot):
		return self.dp[1] + slot % self.dp[2]

	def _send(self, pkt, slot, retx):
		if retx:
			pkt = pkt[:4] + bytes([pkt[4] | F_RETX]) + pkt[5:]
			self.stats.retransmits += 1
		self.stats.sent += 1
		try:
			self.sock.sendto(pkt, (self.dp[0], self._port(slot)))
		except (BlockingIOError, InterruptedError):
			pass		# as a loss: the timeout resends it

	def _parse(self, data, src):
		"""A received datagram as (header tuple, payload), or None when
		it is not a result or NACK of our job from the aggregator."""
		if src[0] != self.dp[0] or len(data) < HDR.size:
			return None
		h = HDR.unpack_from(data)
		(magic, ver, typ, flags, enc, job, tok, rank, status, slot,
			offset, count, sexp, nb, rnd) = h
		if magic != MAGIC or ver != VERSION or job != self.job or \
				tok != self.wire_token:
			return None
		# A result goes to every member (rank 255); a NACK echoes
		# the refused packet's header, our own rank.
		if typ == T_NACK:
			if rank != self.rank:
				return None
		elif typ not in (T_SUM_RESULT, T_MAX_RESULT) or \
				rank != RESULT_RANK:
			return None
		body = data[HDR.size:]
		if self.keys:
			if not flags & F_AUTH or len(body) < TAG_LEN:
				return None
			body, tag = body[:-TAG_LEN], body[-TAG_LEN:]
			if not self.keys.check(data[:HDR.size], body, tag, typ,
					status, slot, rnd):
				self.stats.bad_tags += 1
				return None
		elif flags & F_AUTH:
			return None
		return h, body

	# --- one tensor: chunks through the window ---------------------------

	def _reduce(self, typ, enc, scale_exp, src):
		"""Sums the tensor src (bytes, 4-byte elements) over the job:
		chunks of max_elems elements, chunk c at slot c mod window,
		every slot's rounds in order, retransmission on timeout.
		Returns the result's bytes (4 bytes an element)."""
		n = len(src) // 4
		if self.broken:
			raise TallyError(errno.EPIPE, "an earlier allreduce "
				"failed; the slots are out of step: join again")
		if n == 0:
			return b""
		self.broken = True	# until this call succeeds
		ce = self.elems
		nchunks = (n + ce - 1) // ce
		out = bytearray(len(src))
		rtyp = T_SUM_RESULT if typ == T_SUM else T_MAX_RESULT
		inflight = {}		# slot -> [chunk, packet, deadline, rto]
		done = 0

		def send_chunk(c):
			slot = c % self.window
			off = c * ce
			cnt = min(ce, n - off)
			flags = F_LAST if c == nchunks - 1 else 0
			pkt = self._packet(typ, flags, enc, slot, off, cnt,
				scale_exp, self.rounds[slot],
				src[off * 4:(off + cnt) * 4])
			inflight[slot] = [c, pkt, time.monotonic() +
				self.rto_s, self.rto_s]
			self._send(pkt, slot, False)

		for c in range(min(self.window, nchunks)):
			send_chunk(c)
		progress = time.monotonic()
		while done < nchunks:
			now = time.monotonic()
			if now - progress > self.timeout_s:
				raise TallyError(errno.ETIMEDOUT, "no result from "
					"the dataplane for %.0f ms (%d of %d chunks "
					"done)" % (self.timeout_s * 1e3, done,
					nchunks))
			wait = min(e[2] for e in inflight.values()) - now
			if wait > 0:
				select.select([self.sock], [], [], wait)
			while True:
				try:
					data, addr = self.sock.recvfrom(65536)
				except (BlockingIOError, InterruptedError):
					break
				p = self._parse(data, addr)
				if p is None:
					continue
				h, body = p
				slot, off, cnt, rnd = h[9], h[10], h[11], h[14]
				e = inflight.get(slot)
				if e is None or rnd != self.rounds[slot] or \
						off != e[0] * ce or cnt != min(ce, n - off):
					self.stats.ignored += 1
					continue
				if h[2] == T_NACK:
					self.stats.nacks += 1
					raise TallyError(errno.EPROTO, "the dataplane "
						"refused slot %d round %d: %s" % (slot,
						rnd, STATUS.get(h[8], h[8])))
				want = min(ce, n - off)
				if h[2] != rtyp or h[4] != enc or cnt != want or \
						h[12] != scale_exp or len(body) != cnt * 4:
					self.stats.ignored += 1
					continue
				out[off * 4:(off + cnt) * 4] = body
				self.stats.results += 1
				self.rounds[slot] += 1
				done += 1
				progress = time.monotonic()
				del inflight[slot]
				if e[0] + self.window < nchunks:
					send_chunk(e[0] + self.window)
			now = time.monotonic()
			for slot, e in inflight.items():
				if e[2] <= now:
					e[3] = min(e[3] * 2, 1.0)
					e[2] = now + e[3]
					self._send(e[1], slot, True)
		self.broken = False
		return bytes(out)

	# --- the allreduces -------------------------------------------------

	def allreduce_i32(self, x):
		"""Wrapping i32 sums of x (any int32 array) over the job's
		members: dense SUM rounds, enc i32, scale_exp 0."""
		x = np.ascontiguousarray(x, dtype="<i4")
		res = self._reduce(T_SUM, ENC_I32, 0, x.tobytes())
		return np.frombuffer(res, dtype="<i4").copy()

	def max_f32(self, a):
		"""The scale round: one f32 element, the maximum over the
		members (IEEE total order)."""
		res = self._reduce(T_MAX, ENC_F32, 0,
			np.array([a], dtype="<f4").tobytes())
		return np.frombuffer(res, dtype="<f4")[0]

	def allreduce_f32(self, x):
		"""The f32 sum through fixp (docs/protocol.md, "The scale
		round"): bit-identical on every member. Raises TallyError
		ERANGE when some member's tensor holds an infinity."""
		x = np.ascontiguousarray(x, dtype="<f4")
		if x.size == 0:
			return x.copy()
		m = self.max_f32(fixp_absmax(x))
		e = fixp_exponent(m, self.world)
		if e is None:
			raise TallyError(errno.ERANGE, "no fixed-point scale "
				"(the maximum is %r)" % float(m))
		q = fixp_encode(x, e)
		res = self._reduce(T_SUM, ENC_I32, e, q.tobytes())
		return fixp_decode(np.frombuffer(res, dtype="<i4"), e)


# --- fixp: docs/protocol.md, "The scale round" -------------------------------

def f32_bits(v):
	return int(np.array([v], dtype="<f4").view("<u4")[0])


def fixp_absmax(x):
	"""The member's maximum: the largest |x| with NaN as 0 and an
	infinity as +inf, +0 when there is no non-zero number."""
	u = np.ascontiguousarray(x, dtype="<f4").view("<u4") & 0x7FFFFFFF
	u = u[u <= 0x7F800000]
	b = int(u.max()) if u.size else 0
	return np.array([b], dtype="<u4").view("<f4")[0]


def fixp_b(world):
	return 30 - (world.bit_length() - 1)


def fixp_exponent(m, world):
	"""e from the scale round's maximum m and the world, or None when
	there is no scale (m NaN, infinite or negative)."""
	bits = f32_bits(m)
	mag = bits & 0x7FFFFFFF
	if mag >= 0x7F800000 or (bits >> 31 and mag != 0):
		return None		# NaN, an infinity, below 0
	if mag == 0:
		return 0
	E, F = (bits >> 23) & 0xFF, bits & 0x7FFFFF
	k = E - 126 if E > 0 else F.bit_length() - 149
	return fixp_b(world) - k


def fixp_encode(x, e):
	"""q = round_half_even(clamp(x 2^e, -2^31, 2147483520)), NaN as 0."""
	y = np.ldexp(np.asarray(x, dtype=np.float64), e)
	y = np.clip(y, -2.0 ** 31, 2147483520.0)
	y = np.where(np.isnan(y), 0.0, y)
	return np.rint(y).astype("<i4")


def fixp_decode(q, e):
	"""Q 2^-e rounded once to binary32 (the product exact in binary64)."""
	with np.errstate(over="ignore"):
		return np.ldexp(np.asarray(q, dtype=np.float64), -e).astype("<f4")
