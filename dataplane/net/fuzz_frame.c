/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target fuzz-frame: the frame parsers in front of the engine,
 * what any host on the port can send tally-dp.
 *
 * An input is one frame after a flags byte: bit 0 marks the frame's IPv4
 * checksum good, bit 1 its L4 checksum (as a port's offload would), bit
 * 2 turns RoCEv2 off. The frame goes into a single-segment mbuf laid
 * over a buffer of exactly its headroom and length (ASan sees any read
 * past it), through tally_net_classify() and, for a RoCEv2 datagram,
 * tally_roce_parse() and tally_roce_icrc_ok() as the lcore takes them
 * (dp/lcore.c, roce_frame()). The mbuf is built by hand: the parsers
 * read only its fields, and no EAL is needed.
 *
 * Besides ASan and UBSan, it checks: a verdict is a kind of its enum and
 * a drop a reason within its counter array; a taken frame's payload lies
 * inside the frame, and its source and lcore are the frame's; a RoCEv2
 * datagram's tally packet lies inside the datagram it came in; and the
 * ICRC check leaves the frame's bytes as they were.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "net/net.h"
#include "net/roce.h"

#define FUZZ_NAME "fuzz-frame"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADROOM 128
#define MAX_FRAME 9216
#define NPORTS 4
#define QPN0 0x100

/* The dataplane: 10.77.0.1, UDP ports 47474.., RoCEv2 QPNs 0x100... */
static struct tally_net_self self = {
	.mac = { { 0x02, 0x00, 0x00, 0x77, 0x00, 0x01 } },
	.ip = RTE_BE32(0x0a4d0001),
	.port = RTE_BE16(47474),
	.nports = NPORTS,
	.qpn_base = QPN0,
};

/* Whether [p, p + n) lies inside [lo, lo + len). */
static int
inside(const uint8_t *p, size_t n, const uint8_t *lo, size_t len)
{
	return p >= lo && n <= len && (size_t)(p - lo) <= len - n;
}

/* A RoCEv2 datagram, as roce_frame() takes it once classified. */
static void
roce(struct rte_mbuf *m, const struct tally_net_self *s,
	struct tally_net_rx *rx, const uint8_t *frame, size_t len)
{
	struct tally_net_rx dgram = *rx;
	struct tally_roce_rx rr;
	enum tally_roce_drop why = tally_roce_parse(s, rx, &rr);
	uint8_t *before;

	CHECK((unsigned int)why < TALLY_ROCE_DROP_MAX_);
	if (why != TALLY_ROCE_OK)
		return;
	CHECK(inside(rx->payload, rx->len, dgram.payload, dgram.len));
	CHECK(rx->queue < s->nports);
	CHECK(rr.dst_qpn == s->qpn_base + rx->queue);
	CHECK(rr.pad <= 3);
	before = malloc(len);
	CHECK(before != NULL);
	memcpy(before, frame, len);
	(void)tally_roce_icrc_ok(m);
	CHECK(memcmp(before, frame, len) == 0);
	free(before);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_net_self s = self;
	struct tally_net_rx rx;
	enum tally_net_kind k;
	struct rte_mbuf m;
	uint8_t *buf, *frame;
	uint8_t flags;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	if (size > MAX_FRAME)
		size = MAX_FRAME;
	if (flags & 4)
		s.qpn_base = 0;
	buf = malloc(HEADROOM + size);
	CHECK(buf != NULL);
	frame = buf + HEADROOM;
	memcpy(frame, data, size);
	memset(&m, 0, sizeof(m));
	m.buf_addr = buf;
	m.buf_len = (uint16_t)(HEADROOM + size);
	m.data_off = HEADROOM;
	m.data_len = (uint16_t)size;
	m.pkt_len = (uint32_t)size;
	m.nb_segs = 1;
	m.next = NULL;
	rte_mbuf_refcnt_set(&m, 1);
	m.ol_flags = ((flags & 1) ? RTE_MBUF_F_RX_IP_CKSUM_GOOD : 0) |
		((flags & 2) ? RTE_MBUF_F_RX_L4_CKSUM_GOOD : 0);
	k = tally_net_classify(&m, &s, &rx);
	CHECK((unsigned int)k <= TALLY_NET_DROP);
	CHECK((unsigned int)rx.why < TALLY_NET_DROP_MAX_);
	CHECK((k == TALLY_NET_DROP) == (rx.why != TALLY_NET_OK));
	if (k == TALLY_NET_TALLY || k == TALLY_NET_ROCE) {
		CHECK(inside(rx.payload, rx.len, frame, size));
		CHECK(k == TALLY_NET_ROCE || rx.queue < s.nports);
		CHECK(k == TALLY_NET_TALLY || s.qpn_base != 0);
	}
	if (k == TALLY_NET_ROCE)
		roce(&m, &s, &rx, frame, size);
	free(buf);
	return 0;
}
