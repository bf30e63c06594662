/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RoCEv2 framing of tally packets (docs/protocol.md, "RoCEv2 framing"):
 * the constants tally-dp and a RoCEv2 worker share. A tally packet
 * (header, payload, tag) travels unchanged as the message of an
 * InfiniBand UD SEND:
 *
 *   Ethernet | IPv4 | UDP 4791 | BTH | DETH | [ImmDt] | tally | pad | ICRC
 *
 * tally-dp is one UD queue pair per worker lcore, QPN qpn_base + lcore
 * index (--roce-qpn-base, default TALLY_ROCE_QPN_BASE); slot s belongs
 * to QPN qpn_base + s % lcores. P_Key 0xffff; each job has its Q_Key.
 *
 * Self-contained; every helper is static inline.
 */
#ifndef TALLY_ROCE_H
#define TALLY_ROCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_ROCE_UDP_PORT	4791	/* IANA's RoCEv2 port */
#define TALLY_ROCE_BTH_LEN	12
#define TALLY_ROCE_DETH_LEN	8
#define TALLY_ROCE_IMM_LEN	4
#define TALLY_ROCE_ICRC_LEN	4

/* Where the fields lie in the BTH (bytes from its start). */
#define TALLY_ROCE_BTH_OPCODE	0	/* 8 bits */
#define TALLY_ROCE_BTH_FLAGS	1	/* SE, M, PadCnt (2 bits), TVer (4) */
#define TALLY_ROCE_BTH_PKEY	2	/* 16 bits */
#define TALLY_ROCE_BTH_DQPN	4	/* low 24 bits of a 32-bit word */
#define TALLY_ROCE_BTH_PSN	8	/* low 24 bits of a 32-bit word */
/* ... and in the DETH. */
#define TALLY_ROCE_DETH_QKEY	0	/* 32 bits */
#define TALLY_ROCE_DETH_SQPN	4	/* low 24 bits of a 32-bit word */

#define TALLY_ROCE_OP_UD_SEND		0x64	/* UD SEND only */
#define TALLY_ROCE_OP_UD_SEND_IMM	0x65	/* ... with immediate */
#define TALLY_ROCE_PKEY_FULL	0xffff	/* the default partition, full */
#define TALLY_ROCE_QPN_BASE	0x100	/* tally-dp's first QPN by default */
#define TALLY_ROCE_QPN_MAX	0xffffff
#define TALLY_ROCE_QPN_MCAST	0xffffff /* a multicast packet's dest QP */

/* A job's Q_Key when its configuration names none: 0x7a110000 + id. */
#define TALLY_ROCE_QKEY(id)	(0x7a110000u + (uint32_t)(id))

/* IPv4 bytes around a UD message: IPv4, UDP, BTH, DETH, ImmDt, ICRC. */
#define TALLY_ROCE_IP_OVERHEAD	(20 + 8 + TALLY_ROCE_BTH_LEN + \
				 TALLY_ROCE_DETH_LEN + TALLY_ROCE_IMM_LEN + \
				 TALLY_ROCE_ICRC_LEN)

/*
 * The path MTU of UD messages (tally header and payload) on a link of
 * IPv4 MTU mtu: the largest InfiniBand MTU (256, 512, 1024, 2048 or 4096
 * bytes) whose packets fit (1024 at Ethernet's 1500, 4096 at 9000). A UD
 * message is one packet. 0 below 312.
 */
static inline unsigned int
tally_roce_pmtu(unsigned int mtu)
{
	for (unsigned int p = 4096; p >= 256; p /= 2)
		if (p + TALLY_ROCE_IP_OVERHEAD <= mtu)
			return p;
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* TALLY_ROCE_H */
