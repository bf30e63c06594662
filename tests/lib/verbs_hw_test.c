/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport on a real RDMA device (libibverbs, no fake): two
 * UD queue pairs on the first device's port 1, each the other's
 * "dataplane", talk through the NIC's loopback. Checks that the ladder
 * comes up on hardware (GID of the port's first IPv4 RoCEv2 address,
 * address handle, Q_Key), that bursts arrive byte for byte in both
 * directions with the GRH area skipped and the sender accepted, and
 * prints the round trip and packet rate. TAP; without a device in
 * /sys/class/infiniband (or without an active RoCEv2 port) the suite
 * is skipped visibly: "1..0 # SKIP ...".
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <tally/proto.h>

#include "transport/verbs_int.h"

#define PKT	1024
#define ROUNDS	2000

static int ntap, nfail;

static void
ok(int cond, const char *name)
{
	printf("%s %d - %s\n", cond ? "ok" : "not ok", ++ntap, name);
	nfail += !cond;
}

/* The first entry of /sys/class/infiniband, or NULL. */
static char *
first_device(char *name, size_t len)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	char *found = NULL;

	if (d == NULL)
		return NULL;
	while ((e = readdir(d)) != NULL && found == NULL)
		if (e->d_name[0] != '.' && strlen(e->d_name) < len)
			found = strcpy(name, e->d_name);
	closedir(d);
	return found;
}

/*
 * The IPv4 (network order) of dev's port 1's first RoCEv2 GID, from
 * sysfs (gids/N, gid_attrs/types/N), or 0: the address both QPs use.
 */
static uint32_t
roce_v2_ip(const char *dev)
{
	for (int i = 0; i < 256; i++) {
		char path[256], line[64];
		unsigned int w[8];
		FILE *f;
		int v2;

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/"
			"1/gid_attrs/types/%d", dev, i);
		if ((f = fopen(path, "r")) == NULL)
			return 0;
		v2 = fgets(line, sizeof(line), f) != NULL &&
			strncmp(line, "RoCE v2", 7) == 0;
		fclose(f);
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/"
			"1/gids/%d", dev, i);
		if (!v2 || (f = fopen(path, "r")) == NULL)
			continue;
		if (fscanf(f, "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2],
				&w[3], &w[4], &w[5], &w[6], &w[7]) == 8 &&
				(w[0] | w[1] | w[2] | w[3] | w[4]) == 0 &&
				w[5] == 0xffff) {
			fclose(f);
			return htonl(w[6] << 16 | w[7]);
		}
		fclose(f);
	}
	return 0;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Receives n packets on tp within a second: how many, bytes checked. */
static unsigned int
take(struct tally_transport *tp, unsigned int n, uint8_t tag)
{
	static uint8_t bufs[TALLY_TP_BURST][PKT];
	struct tally_rx_pkt rx[TALLY_TP_BURST];
	uint64_t until = now_ns() + 1000000000u;
	unsigned int got = 0, last = 0xffu - tag;

	while (got < n && now_ns() < until) {
		int rc;

		for (int i = 0; i < TALLY_TP_BURST; i++)
			rx[i] = (struct tally_rx_pkt){ .buf = bufs[i],
				.room = PKT };
		rc = tally_transport_recv(tp, rx, n - got < TALLY_TP_BURST ?
			n - got : TALLY_TP_BURST, 100000);
		if (rc < 0)
			return got;
		for (int i = 0; i < rc; i++)
			if (rx[i].len == PKT && bufs[i][0] == tag &&
					bufs[i][PKT - 1] == last)
				got++;
	}
	return got;
}

/* Sends n packets of PKT bytes tagged tag from tp: how many went. */
static unsigned int
put(struct tally_transport *tp, unsigned int n, uint8_t tag)
{
	static uint8_t pay[PKT];
	struct tally_tx_pkt p[TALLY_TP_BURST];
	unsigned int sent = 0;

	memset(pay, tag, sizeof(pay));
	pay[PKT - 1] = (uint8_t)(0xffu - tag);
	for (int i = 0; i < TALLY_TP_BURST; i++)
		p[i] = (struct tally_tx_pkt){ .iov = { { pay, PKT } } };
	while (sent < n) {
		unsigned int k = n - sent < TALLY_TP_BURST ? n - sent :
			TALLY_TP_BURST;
		int rc = tally_transport_send(tp, p, k);

		if (rc <= 0)
			break;
		sent += (unsigned int)rc;
	}
	return sent;
}

int
main(void)
{
	char dev[64] = "", why[TALLY_TP_WHY_LEN];
	uint32_t placeholder = 1;
	struct tally_verbs_conf c = { .port = 1, .dp_qpns = &placeholder,
		.dp_nqpns = 1, .qkey = 0x11223344, .room = PKT,
		.ops = &tally_verbs_libibverbs };
	struct tally_transport *a, *b;
	struct verbs_transport *va, *vb;
	uint64_t t0, t1;

	if (first_device(dev, sizeof(dev)) == NULL) {
		printf("1..0 # SKIP no RDMA device in /sys/class/infiniband\n");
		return 0;
	}
	c.device = dev;
	c.local_ip = c.dp_ip = roce_v2_ip(dev);	/* loopback via the NIC */
	if (c.dp_ip == 0) {
		printf("1..0 # SKIP %s port 1 has no IPv4 RoCEv2 GID\n", dev);
		return 0;
	}
	b = tally_verbs_transport_create(&c, why, sizeof(why));
	if (b == NULL) {
		printf("1..0 # SKIP %s: %s\n", dev, why);
		return 0;
	}
	vb = (struct verbs_transport *)b;
	c.dp_qpns = &b->qpn;
	a = tally_verbs_transport_create(&c, why, sizeof(why));
	ok(a != NULL, "a second UD QP on the same port");
	if (a == NULL) {
		printf("# %s\n1..%d\n", why, ntap);
		tally_transport_destroy(b);
		return 1;
	}
	va = (struct verbs_transport *)a;
	/* b's dataplane is a: its QPN, for the checks. */
	vb->qpns[0] = a->qpn;
	ok(va->local_ip == vb->local_ip && va->dp_ip == vb->local_ip,
		"both on the port's RoCEv2 GID");
	ok(put(a, 256, 0x5a) == 256, "256 sends of 1 KiB posted");
	ok(take(b, 256, 0x5a) == 256, "all 256 arrive, byte for byte");
	ok(put(b, 64, 0xa5) == 64 && take(a, 64, 0xa5) == 64,
		"and back the other way");
	t0 = now_ns();
	for (int i = 0; i < ROUNDS; i++)
		if (put(a, 1, 1) != 1 || take(b, 1, 1) != 1 ||
				put(b, 1, 2) != 1 || take(a, 1, 2) != 1)
			break;
	t1 = now_ns();
	printf("# round trip %.2f us (1 KiB, %d rounds, polling)\n",
		(double)(t1 - t0) / ROUNDS / 1000.0, ROUNDS);
	t0 = now_ns();
	put(a, 100000, 3);
	ok(take(b, 100000, 3) >= 99000, "100000 sends: at most 1% lost");
	t1 = now_ns();
	printf("# %.2f Mpps one way (1 KiB UD SENDs)\n",
		100000.0 / (double)(t1 - t0) * 1000.0);
	ok(a->errors == 0 && b->errors == 0, "no error completions");
	tally_transport_destroy(a);
	tally_transport_destroy(b);
	printf("1..%d\n", ntap);
	return nfail != 0;
}
