/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The AF_XDP transport writes its own Ethernet headers, so it asks the
 * kernel what the kernel would have done: the route toward the dataplane
 * (rtnetlink RTM_GETROUTE: interface, source address, gateway), the
 * interface's MAC and MTU (ioctl), and the next hop's MAC from the
 * neighbour table (/proc/net/arp). A next hop the table does not hold
 * yet is made to resolve by one ICMP echo to it, sent by the kernel,
 * which asks by ARP first; ARP itself stays the kernel's (the XDP program
 * passes it on).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"
#include "xdp.h"

#define ARP_TRIES	3	/* ICMP echoes sent to resolve a next hop */
#define ARP_WAIT_MS	300	/* after each */

/* The route's reply: interface, preferred source, gateway (0: none). */
struct route {
	int oif;
	uint32_t src, gw;
};

/* Walks the attributes of one RTM_NEWROUTE reply into r. */
static void
route_attrs(struct nlmsghdr *h, struct route *r)
{
	struct rtmsg *rm = NLMSG_DATA(h);
	struct rtattr *a = RTM_RTA(rm);
	int left = (int)RTM_PAYLOAD(h);

	for (; RTA_OK(a, left); a = RTA_NEXT(a, left)) {
		if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= 4)
			memcpy(&r->oif, RTA_DATA(a), 4);
		else if (a->rta_type == RTA_PREFSRC && RTA_PAYLOAD(a) >= 4)
			memcpy(&r->src, RTA_DATA(a), 4);
		else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) >= 4)
			memcpy(&r->gw, RTA_DATA(a), 4);
	}
}

/* Asks the kernel for its route to dst (network order). 0 or -errno. */
static int
route_get(uint32_t dst, struct route *r)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg rm;
		char attrs[64];
	} req = {
		.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)),
		.h.nlmsg_type = RTM_GETROUTE,
		.h.nlmsg_flags = NLM_F_REQUEST,
		.h.nlmsg_seq = 1,
		.rm.rtm_family = AF_INET,
		.rm.rtm_dst_len = 32,
	};
	struct rtattr *a = (struct rtattr *)((char *)&req +
		NLMSG_ALIGN(req.h.nlmsg_len));
	union { char buf[8192]; struct nlmsghdr align; } rep;
	struct nlmsghdr *h;
	int fd, n, rc = -ENETUNREACH;

	a->rta_type = RTA_DST;
	a->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(a), &dst, 4);
	req.h.nlmsg_len = NLMSG_ALIGN(req.h.nlmsg_len) + RTA_LENGTH(4);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (send(fd, &req, req.h.nlmsg_len, 0) < 0 ||
			(n = (int)recv(fd, rep.buf, sizeof(rep.buf), 0)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	close(fd);
	for (h = &rep.align; NLMSG_OK(h, (unsigned int)n);
			h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error != 0 ? e->error : -ENETUNREACH;
		}
		if (h->nlmsg_type == RTM_NEWROUTE) {
			route_attrs(h, r);
			rc = r->oif > 0 ? 0 : -ENETUNREACH;
		}
	}
	return rc;
}

/* The interface's MAC and MTU. 0 or -errno. */
static int
link_info(struct tally_xdp_path *p)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", p->ifname);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0)
		rc = -errno;
	else
		memcpy(p->src_mac, ifr.ifr_hwaddr.sa_data, 6);
	if (rc == 0 && ioctl(fd, SIOCGIFMTU, &ifr) != 0)
		rc = -errno;
	else if (rc == 0)
		p->mtu = (unsigned int)ifr.ifr_mtu;
	close(fd);
	return rc;
}

/*
 * The complete entry for ip (network order) on ifname in /proc/net/arp:
 * 1 with mac filled, 0 when there is none.
 */
static int
neigh_lookup(uint32_t ip, const char *ifname, uint8_t mac[6])
{
	char line[256], ips[64], hw[64], dev[IF_NAMESIZE + 1];
	unsigned int type, flags, m[6];
	FILE *f = fopen("/proc/net/arp", "re");
	struct in_addr a;
	int found = 0;

	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %16s", ips, &type,
				&flags, hw, dev) != 5 ||
				inet_pton(AF_INET, ips, &a) != 1 ||
				a.s_addr != ip || strcmp(dev, ifname) != 0 ||
				!(flags & 0x2) ||	/* ATF_COM: complete */
				sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1],
					&m[2], &m[3], &m[4], &m[5]) != 6)
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		found = 1;
	}
	fclose(f);
	return found;
}

/* One ICMP echo to ip (network order), which makes the kernel ARP. */
static void
poke(uint32_t ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = ip };
	struct icmphdr e = { .type = ICMP_ECHO,
		.un.echo.id = htons((uint16_t)getpid()) };
	uint32_t sum = 0;
	const uint16_t *w = (const uint16_t *)&e;
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);

	if (fd < 0)
		return;
	for (size_t i = 0; i < sizeof(e) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	e.checksum = (uint16_t)~(sum + (sum >> 16));
	(void)sendto(fd, &e, sizeof(e), MSG_DONTWAIT, (struct sockaddr *)&sa,
		sizeof(sa));
	close(fd);
}

/* The next hop's MAC, resolved when needed. 0 or -EHOSTUNREACH. */
static int
neigh_resolve(struct tally_xdp_path *p)
{
	struct timespec nap = { .tv_nsec = 10 * 1000000L };

	for (int t = 0; t < ARP_TRIES; t++) {
		if (neigh_lookup(p->nexthop, p->ifname, p->dst_mac))
			return 0;
		poke(p->nexthop);
		for (int ms = 0; ms < ARP_WAIT_MS; ms += 10) {
			nanosleep(&nap, NULL);
			if (neigh_lookup(p->nexthop, p->ifname, p->dst_mac))
				return 0;
		}
	}
	return -EHOSTUNREACH;
}

int
tally_xdp_path_find(uint32_t dp_ip, uint32_t bind_ip, const char *ifname,
	struct tally_xdp_path *p, char *why, size_t len)
{
	char dps[INET_ADDRSTRLEN], nhs[INET_ADDRSTRLEN];
	struct route r = { 0 };
	int rc;

	memset(p, 0, sizeof(*p));
	inet_ntop(AF_INET, &dp_ip, dps, sizeof(dps));
	if (ifname != NULL && if_nametoindex(ifname) == 0)
		return tally_tp_fail(why, len, -ENODEV, "xdp: interface '%s' does not "
			"exist (in this network namespace)", ifname);
	rc = route_get(dp_ip, &r);
	if (rc != 0)
		return tally_tp_fail(why, len, rc, "xdp: no route to the dataplane "
			"%s: %s", dps, strerror(-rc));
	if (if_indextoname((unsigned int)r.oif, p->ifname) == NULL)
		return tally_tp_fail(why, len, -ENODEV, "xdp: the route's interface "
			"%d is gone", r.oif);
	if (ifname != NULL && strcmp(ifname, p->ifname) != 0)
		return tally_tp_fail(why, len, -EINVAL, "xdp: the route to the "
			"dataplane %s goes out of %s, not of %s", dps,
			p->ifname, ifname);
	p->ifindex = r.oif;
	p->src_ip = bind_ip != 0 ? bind_ip : r.src;
	p->nexthop = r.gw != 0 ? r.gw : dp_ip;
	if (p->src_ip == 0)
		return tally_tp_fail(why, len, -EADDRNOTAVAIL, "xdp: %s has no IPv4 "
			"address toward %s", p->ifname, dps);
	rc = link_info(p);
	if (rc != 0)
		return tally_tp_fail(why, len, rc, "xdp: %s: %s", p->ifname,
			strerror(-rc));
	rc = neigh_resolve(p);
	inet_ntop(AF_INET, &p->nexthop, nhs, sizeof(nhs));
	if (rc != 0)
		return tally_tp_fail(why, len, rc, "xdp: no ARP answer from the next "
			"hop %s on %s", nhs, p->ifname);
	return 0;
}
