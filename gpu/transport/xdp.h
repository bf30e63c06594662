/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pieces of the AF_XDP transport (xdp.c) that are not the rings: where
 * frames go on the link (xdp_path.c: the route's interface, its MAC, the
 * next hop's MAC from the kernel's neighbour table), the Ethernet, IPv4
 * and UDP headers a worker writes and checks itself (xdp_frame.c), and
 * the XDP program that hands the worker its own frames and the kernel
 * everything else (xdp_prog.c).
 */
#ifndef TALLY_TRANSPORT_XDP_H
#define TALLY_TRANSPORT_XDP_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#define TALLY_XDP_HDRS	42u	/* Ethernet 14 + IPv4 20 + UDP 8 */

/* Where a worker's frames toward the dataplane go. */
struct tally_xdp_path {
	char ifname[IF_NAMESIZE];
	int ifindex;
	unsigned int mtu;	/* the interface's */
	uint32_t src_ip;	/* network order: the route's source */
	uint32_t nexthop;	/* network order: dp_ip, or the gateway */
	uint8_t src_mac[6];
	uint8_t dst_mac[6];	/* the next hop's */
};

/*
 * Finds the path toward dp_ip (network order): the kernel's route (its
 * interface, source address and gateway), the interface's MAC and MTU,
 * and the next hop's MAC, resolving it (an ICMP echo makes the kernel
 * ask by ARP) when the neighbour table does not hold it. ifname, when
 * not NULL, must be the route's interface; bind_ip, when not 0, becomes
 * the source. Returns 0, or -errno with a sentence in why (len bytes).
 */
int tally_xdp_path_find(uint32_t dp_ip, uint32_t bind_ip, const char *ifname,
	struct tally_xdp_path *p, char *why, size_t len);

/* The fixed parts of every frame a worker sends. */
struct tally_xdp_hdr {
	uint8_t dst_mac[6], src_mac[6];
	uint32_t src_ip, dst_ip;	/* network order */
	uint16_t sport;			/* network order */
};

/*
 * Writes the 42 bytes of Ethernet, IPv4 (checksummed, don't fragment)
 * and UDP (no checksum, which IPv4 allows) headers of a datagram of plen
 * payload bytes to dport (network order) at f; id is the IPv4 id.
 */
void tally_xdp_frame_hdrs(uint8_t *f, const struct tally_xdp_hdr *h,
	uint16_t dport, uint16_t id, uint32_t plen);

/*
 * Checks that the len-byte frame f is an unfragmented IPv4 UDP datagram
 * from src_ip to port dport (both network order) with a valid IPv4
 * header; sets *off and *plen to its payload's offset and length.
 * Returns 1 when it is, else 0.
 */
int tally_xdp_frame_check(const uint8_t *f, uint32_t len, uint32_t src_ip,
	uint16_t dport, uint32_t *off, uint32_t *plen);

/* The XDP program and its socket map, attached to one interface. */
struct tally_xdp_prog {
	int map_fd;		/* XSKMAP: rx queue -> socket */
	int prog_fd;
	int link_fd;		/* the attachment: ends with the process */
	int native;		/* 1: driver mode, 0: generic (skb) mode */
};

/*
 * Loads the program that redirects IPv4 UDP frames from src_ip to port
 * dport (network order) to the socket of their receive queue, and passes
 * everything else (ARP, TCP to tallyd, other ports) to the kernel; then
 * attaches it to ifindex through a BPF link, in driver mode when the
 * driver has one, else generic. Returns 0, or -errno with the sentence.
 */
int tally_xdp_prog_attach(struct tally_xdp_prog *xp, int ifindex,
	const char *ifname, uint32_t src_ip, uint16_t dport, char *why,
	size_t len);

/* Puts socket fd in the map for queue. Returns 0 or -errno. */
int tally_xdp_prog_add(struct tally_xdp_prog *xp, unsigned int queue, int fd);

/* Detaches and closes what tally_xdp_prog_attach() made; idempotent. */
void tally_xdp_prog_detach(struct tally_xdp_prog *xp);

#endif /* TALLY_TRANSPORT_XDP_H */
