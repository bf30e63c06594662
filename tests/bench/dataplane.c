/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench dataplane: tally-dp's per-packet path on one lcore against
 * a bare rx -> tx forward of the same frames, in one process.
 *
 * A real EAL (no hugepages, no PCI) and a real ethdev port: net_ring, two
 * rte_rings made into a port with rte_eth_from_rings(). A struct tally_dp
 * is filled the way tally-dp's main.c fills it (one worker, its queues,
 * its neighbour cache, the port by tally_dp_port_init(), one job by
 * tally_dp_job_add()). Complete contribution frames (Ethernet, IPv4 with
 * its checksum, UDP with its checksum, tally header, random i32 payload),
 * one per (set, slot, worker), are put into the port's rx ring a burst at
 * a time; each frame holds an extra reference, so that what the port's
 * user frees only drops that reference and the same bytes come back the
 * next round.
 *
 * Tally pass: after every burst, tally_dp_lcore_poll(), the loop body of
 * a tally-dp worker lcore (rx burst, classify with checksums, aggregate,
 * build and send a result per member of every completed round), then the
 * tx ring is emptied and its frames freed.
 * Floor pass: the same frames injected the same way, but the burst goes
 * rte_eth_rx_burst() -> rte_eth_tx_burst() untouched (l2fwd without the
 * MAC rewrite), then the tx ring is emptied the same way.
 * Two reference passes (not the floor; --no-refs skips them): "read",
 * the floor with every byte of every frame read once in between (a
 * one's-complement sum), and "intake", each frame classified (checksums)
 * and given to the engine, then freed, no result built: what touching
 * the payload costs, and what tally-dp's work costs without its answers.
 * Passes alternate; the best of each side counts. One round of every slot
 * is checked before and after the timed passes, every result frame down
 * to its checksums and the reference sum.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include <tally/limits.h>
#include <tally/mac.h>
#include <tally/proto.h>

#include "dp.h"
#include "net/icrc.h"

#include "bench.h"

#define BURST		TALLY_DP_BURST
#define HDRS_LEN	((unsigned int)(sizeof(struct rte_ether_hdr) + \
	sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr)))
#define JOB_ID		7
#define JOB_TOKEN	UINT64_C(0x7a11be7c40a1f00d)
#define MEMBER_PORT	40000
/* 239.0.0.1 (RTE_IPV4() would shift 239 into an int's sign bit). */
#define GROUP_IP	UINT32_C(0xef000001)
#define RING_SIZE	1024
#define DP_MBUFS	8191	/* each dataplane pool: results in flight */
#define MAX_ELEMS	2048	/* a frame within tally-dp's largest MTU */
#define MAX_ROUNDS	100000000ul
#define MAX_FRAME_MEM	(512ul << 20)	/* of the EAL's 1 GiB */
#define PASS_TARGET_NS	200000000u	/* a tally pass: about 0.2 s */
#define GOAL_RATIO	1.5
#define READ_GOAL	2.0	/* tally at most 2.0x the read reference */
/* RoCEv2: the BTH and DETH between UDP and the tally header. */
#define ROCE_EXTRA	(TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_LEN)
#define MEMBER_QPN(r)	(0x2000u + (r))
#define ROCE_MAX_ELEMS	((4096u - TALLY_HDR_LEN) / 4)	/* 1014 */

/* How the frames' checksums reach the lcore (--cksum). */
enum dpb_cksum {
	CKSUM_SW,	/* valid, verified in software (net_ring) */
	CKSUM_OFFLOAD,	/* valid and flagged good, as by a NIC */
	CKSUM_ZERO,	/* UDP checksum 0: the sender computed none */
};

static const char *const cksum_names[] = {
	[CKSUM_SW] = "sw", [CKSUM_OFFLOAD] = "offload", [CKSUM_ZERO] = "zero",
};

struct dpb_opts {
	unsigned int workers;
	unsigned int elems;
	unsigned int slots;
	unsigned int rounds;	/* 0: calibrate */
	unsigned int passes;
	enum dpb_cksum cksum;
	int json;
	int quick;
	int group;	/* results to a multicast group, one a round */
	int no_refs;	/* skip the reference passes (read, intake) */
	int auth;	/* an authenticated job: tagged frames */
	int roce;	/* RoCEv2 UD SEND frames (implies reset) */
	int cost;	/* the restated cost table: UDP and RoCEv2 */
	const char *icrc;	/* --icrc: the CRC path, NULL: the best */
	int cpu_clock;	/* --cpu-clock: passes timed in thread CPU time */
	int reset;	/* rounds 0 and 1 again and again, the job's
			 * slots emptied every other round (implied by
			 * --auth, whose frames carry tags for those
			 * two rounds): no frame is rewritten */
};

/* What a timed pass runs over the frames. */
enum pass_kind {
	PASS_TALLY,	/* tally_dp_lcore_poll(): the tally side */
	PASS_FLOOR,	/* rx -> tx, untouched: the floor */
	PASS_READ,	/* reference: the floor, every byte read */
	PASS_INTAKE,	/* reference: classify and engine, no results */
	PASS_KINDS_
};

struct dpb {
	struct dpb_opts o;
	struct tally_dp dp;
	struct tally_dp_lcore *lc;
	struct rte_ring *rx;		/* rx queue: we fill it */
	struct rte_ring *tx;		/* tx queue: we empty it */
	int port_made;			/* close it at the end */
	struct rte_mempool *frame_pool;
	struct rte_mbuf **frames;	/* [set][slot][worker] */
	unsigned int per_set;		/* slots x workers */
	unsigned int frame_len;
	unsigned int msg_off;		/* the tally header in a frame */
	unsigned int pad;		/* RoCEv2 PadCnt */
	uint16_t mtu;
	uint64_t round;			/* rounds fed so far: next set */
	uint32_t *ref;			/* reference sum of one slot */
	uint8_t *flat;			/* one result frame, flattened */
	uint64_t *seen;			/* [slot]: members served */
	struct bench_side side[PASS_KINDS_];	/* by enum pass_kind */
	const char *icrc_path;		/* rte_net_crc's, for RoCEv2 */
};

/* Large (the lcore state is cache-aligned): not on the stack. */
static struct dpb bench;

static const struct option long_opts[] = {
	{ "workers", required_argument, NULL, 'w' },
	{ "elems", required_argument, NULL, 'e' },
	{ "slots", required_argument, NULL, 's' },
	{ "rounds", required_argument, NULL, 'r' },
	{ "passes", required_argument, NULL, 'p' },
	{ "cksum", required_argument, NULL, 'c' },
	{ "json", no_argument, NULL, 'j' },
	{ "quick", no_argument, NULL, 'q' },
	{ "auth", no_argument, NULL, 'a' },
	{ "reset", no_argument, NULL, 'R' },
	{ "group", no_argument, NULL, 'g' },
	{ "no-refs", no_argument, NULL, 'n' },
	{ "roce", no_argument, NULL, 'o' },
	{ "cost", no_argument, NULL, 'C' },
	{ "icrc", required_argument, NULL, 'I' },
	{ "cpu-clock", no_argument, NULL, 'K' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tally-bench dataplane [options]\n\n"
		"Feeds complete contribution frames through a net_ring port\n"
		"to tally-dp's lcore loop (tally_dp_lcore_poll) on one lcore,\n"
		"and the same frames through a bare rx -> tx forward of that\n"
		"port.\n\n"
		"  --workers N   job members: frames a slot round, 1..%d\n"
		"                (default 8)\n"
		"  --elems N     i32 elements a frame, 1..%d (default %d)\n"
		"  --slots N     slots in flight (the job's window), 1..%d\n"
		"                (default 128)\n"
		"  --rounds N    rounds of every slot in a timed pass, 1..%lu\n"
		"                (default: as many as take about 0.2 s)\n"
		"  --passes N    timed passes of each side, best counts, 1..1000\n"
		"                (default 5)\n"
		"  --cksum MODE  sw: valid IPv4 and UDP checksums, verified in\n"
		"                software, as on net_ring (default); offload: the\n"
		"                same frames flagged good, as a NIC with checksum\n"
		"                offload hands them over; zero: UDP checksum 0\n"
		"  --json        print one JSON object\n"
		"  --group       the job sends results to a multicast group:\n"
		"                one frame a round instead of one a member\n"
		"  --no-refs     only the tally and floor passes, not the\n"
		"                reference rows (read, intake)\n"
		"  --quick       a tiny run, for smoke tests\n"
		"  --auth        an authenticated job: every frame tagged, "
		"every result\n"
		"                tagged (AES-GMAC); implies --reset\n"
		"  --reset       frames of rounds 0 and 1 only, the job's "
		"slots emptied\n"
		"                every other round (compare with --auth)\n"
		"  --roce        RoCEv2 UD SEND frames (BTH, DETH, ICRC)\n"
		"                to a RoCE job; implies --reset\n"
		"  --cost        the cost table: tally and read of UDP and\n"
		"                RoCEv2 frames of about 1 KiB and 4 KiB of\n"
		"                payload, one after the other in this run;\n"
		"                ratio to read and Gbit/s per lcore\n"
		"  --icrc PATH   the CRC path of the ICRCs: vpclmul16,\n"
		"                clmul4, sse42, neon or scalar (default: the\n"
		"                fastest this CPU runs, as tally-dp)\n"
		"  --cpu-clock   time passes by this thread's CPU clock, not\n"
		"                the wall clock: on a loaded machine, time\n"
		"                others' processes take the core is not counted\n"
		"  -h, --help    this text\n",
		TALLY_MAX_WORKERS, MAX_ELEMS, TALLY_DEFAULT_ELEMS,
		TALLY_MAX_WINDOW, MAX_ROUNDS);
}

/* Whether name is one of the CRC paths (net/icrc.h). */
static int
icrc_known(const char *name)
{
	static const char *const paths[] = {
		"vpclmul16", "clmul4", "sse42", "neon", "scalar",
	};

	for (size_t i = 0; i < RTE_DIM(paths); i++)
		if (strcmp(name, paths[i]) == 0)
			return 1;
	return 0;
}

/* One flag with an argument into o; -1 when its value is bad. */
static int
parse_value(int c, const char *arg, struct dpb_opts *o)
{
	unsigned long v = 0;
	int rc = 0;

	switch (c) {
	case 'w':
		rc = bench_parse_uint("workers", arg, 1, TALLY_MAX_WORKERS, &v);
		o->workers = (unsigned int)v;
		break;
	case 'e':
		rc = bench_parse_uint("elems", arg, 1, MAX_ELEMS, &v);
		o->elems = (unsigned int)v;
		break;
	case 's':
		rc = bench_parse_uint("slots", arg, 1, TALLY_MAX_WINDOW, &v);
		o->slots = (unsigned int)v;
		break;
	case 'r':
		rc = bench_parse_uint("rounds", arg, 1, MAX_ROUNDS, &v);
		o->rounds = (unsigned int)v;
		break;
	case 'p':
		rc = bench_parse_uint("passes", arg, 1, 1000, &v);
		o->passes = (unsigned int)v;
		break;
	case 'c':
		for (v = 0; v < RTE_DIM(cksum_names); v++)
			if (strcmp(arg, cksum_names[v]) == 0)
				break;
		if (v == RTE_DIM(cksum_names)) {
			fprintf(stderr, "--cksum: '%s' is not one of sw, "
				"offload, zero\n", arg);
			rc = -1;
		}
		o->cksum = (enum dpb_cksum)v;
		break;
	default:
		rc = -1;
	}
	return rc;
}

/* Bytes of frame buffers the options ask for (mbufs included). */
static size_t
frame_mem(const struct dpb_opts *o)
{
	size_t len = HDRS_LEN + TALLY_HDR_LEN + 4u * o->elems;
	size_t each = sizeof(struct rte_mbuf) + RTE_PKTMBUF_HEADROOM + len;

	return 2 * (size_t)o->slots * o->workers * each;
}

/*
 * Fills o from the command line. Returns 0 to run, 1 when help was asked
 * for, -1 on bad usage (the reason and the usage already on stderr).
 */
static int
parse_opts(int argc, char **argv, struct dpb_opts *o)
{
	int c;

	*o = (struct dpb_opts){ .workers = 8, .elems = TALLY_DEFAULT_ELEMS };
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		} else if (c == 'j') {
			o->json = 1;
		} else if (c == 'g') {
			o->group = 1;
		} else if (c == 'n') {
			o->no_refs = 1;
		} else if (c == 'q') {
			o->quick = 1;
		} else if (c == 'a') {
			o->auth = o->reset = 1;
		} else if (c == 'R') {
			o->reset = 1;
		} else if (c == 'o') {
			o->roce = o->reset = 1;
		} else if (c == 'C') {
			o->cost = o->reset = 1;
		} else if (c == 'I') {
			o->icrc = optarg;
		} else if (c == 'K') {
			o->cpu_clock = 1;
		} else if (c == '?' || parse_value(c, optarg, o) != 0) {
			goto bad;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		goto bad;
	}
	if (o->slots == 0)
		o->slots = o->quick ? 16 : 128;
	if (o->passes == 0)
		o->passes = o->quick ? 1 : 5;
	if (o->rounds == 0 && o->quick)
		o->rounds = 4;
	if (o->icrc != NULL && !icrc_known(o->icrc)) {
		fprintf(stderr, "--icrc: '%s' is not one of vpclmul16, "
			"clmul4, sse42, neon, scalar\n", o->icrc);
		goto bad;
	}
	if (o->roce && (o->auth || o->elems > ROCE_MAX_ELEMS)) {
		fprintf(stderr, "--roce: a plain job's messages of at most "
			"4096 bytes (--elems %u or fewer, no --auth)\n",
			ROCE_MAX_ELEMS);
		goto bad;
	}
	if (frame_mem(o) > MAX_FRAME_MEM) {
		fprintf(stderr, "%zu MiB of frames is more than the %lu MiB "
			"this bench gives them; lower --slots, --workers or "
			"--elems\n", frame_mem(o) >> 20, MAX_FRAME_MEM >> 20);
		goto bad;
	}
	return 0;
bad:
	fputc('\n', stderr);
	usage(stderr);
	return -1;
}

/*
 * The EAL, as the packet-layer tests start it: no hugepages, no PCI, no
 * shared files, a runtime directory of this process's own (removed by
 * eal_fini). DPDK 22.11 refuses --no-huge together with --in-memory.
 */
static int
eal_init(void)
{
	char prefix[64];
	char *args[] = {
		"tally-bench", "--no-huge", "--no-shconf", "--no-pci",
		"--no-telemetry", "-l", "0", "-m", "1024", prefix,
		"--log-level=*:error",
	};

	snprintf(prefix, sizeof(prefix), "--file-prefix=tally-bench-%d",
		(int)getpid());
	rte_openlog_stream(stderr);
	if (rte_eal_init((int)RTE_DIM(args), args) < 0) {
		fprintf(stderr, "tally-bench dataplane: rte_eal_init: %s\n",
			rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

/* Ends the EAL and removes its runtime directory. */
static void
eal_fini(void)
{
	char dir[PATH_MAX];

	/* The EAL leaves its (empty) runtime directory behind. */
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(dir);
}

/* Member r's address: 10.0.0.(1 + r), UDP MEMBER_PORT. */
static rte_be32_t
member_ip(unsigned int r)
{
	return rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 1 + r));
}

/* Member r's MAC: 02:7a:11:00:00:r. */
static struct rte_ether_addr
member_mac(unsigned int r)
{
	return (struct rte_ether_addr){{ 0x02, 0x7a, 0x11, 0, 0,
		(uint8_t)r }};
}

/* The authenticated job's keys: fixed, member w's up key from w. */
static void
bench_keys(struct tally_job_conf *conf)
{
	for (unsigned int i = 0; i < TALLY_KEY_LEN; i++) {
		conf->key_result[i] = (uint8_t)(0xa0 + i);
		for (unsigned int w = 0; w < TALLY_MAX_WORKERS; w++) {
			conf->keys[w].up[i] = (uint8_t)(w * 17 + i);
			conf->keys[w].down[i] = (uint8_t)(w * 17 + i + 1);
		}
	}
}

/*
 * The port (net_ring over two rings), the dataplane's state as tally-dp's
 * main.c builds it, and the job. 0, or -1 with a message.
 */
static int
dp_setup(struct dpb *b)
{
	struct tally_dp *dp = &b->dp;
	struct tally_dp_lcore *lc = &dp->lcores[0];
	struct tally_job_conf conf = {
		.id = JOB_ID,
		.token = JOB_TOKEN,
		.world = (uint8_t)b->o.workers,
		.window = (uint16_t)b->o.slots,
		.max_elems = (uint16_t)b->o.elems,
		.auth = (uint8_t)b->o.auth,
		.roce = (uint8_t)b->o.roce,
		.qkey = TALLY_ROCE_QKEY(JOB_ID),
	};
	static unsigned int setups;
	const char *what;
	char why[256], name[32];
	int port, ret;

	bench_keys(&conf);

	b->rx = rte_ring_create("bench_rx", RING_SIZE, (int)rte_socket_id(),
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	b->tx = rte_ring_create("bench_tx", RING_SIZE, (int)rte_socket_id(),
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (b->rx == NULL || b->tx == NULL) {
		what = "rings";
		ret = -rte_errno;
		goto err;
	}
	/* A name of its own: a port once made keeps its name. */
	snprintf(name, sizeof(name), "tally_bench%u", setups++);
	port = rte_eth_from_rings(name, &b->rx, 1, &b->tx, 1,
		rte_socket_id());
	if (port < 0) {
		what = "rte_eth_from_rings";
		ret = -rte_errno;
		goto err;
	}
	b->port_made = 1;
	/* As setup_lcores() does, for one worker: this thread. */
	dp->port_id = (uint16_t)port;
	dp->nworkers = 1;
	dp->max_jobs = 1;
	dp->self.ip = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 254));
	dp->self.port = rte_cpu_to_be_16(TALLY_UDP_PORT);
	dp->self.nports = 1;
	dp->self.qpn_base = TALLY_ROCE_QPN_BASE;
	lc->dp = dp;
	lc->lcore_id = rte_lcore_id();
	lc->index = 0;
	lc->neigh = tally_net_neigh_create(1024,
		(int)rte_lcore_to_socket_id(lc->lcore_id));
	if (lc->neigh == NULL || tally_dp_lcore_init(lc) != 0) {
		what = "lcore state";
		ret = -ENOMEM;
		goto err;
	}
	b->lc = lc;
	ret = tally_dp_port_init(dp, DP_MBUFS, b->mtu);
	if (ret != 0) {
		what = "tally_dp_port_init";
		goto err;
	}
	/* As setup_queues() does: one worker, no dispatch ring. */
	lc->rxq = 0;
	lc->txq = 0;
	ret = tally_dp_jobs_init(dp);
	if (ret != 0) {
		what = "tally_dp_jobs_init";
		goto err;
	}
	/*
	 * Members' MACs are learned here rather than from a first round:
	 * the lcore learns them from every accepted frame anyway.
	 */
	for (unsigned int r = 0; r < b->o.workers; r++) {
		struct rte_ether_addr mac = member_mac(r);

		conf.members[r].ip = member_ip(r);
		conf.members[r].port = b->o.roce ?
			RTE_BE16(TALLY_ROCE_UDP_PORT) :
			rte_cpu_to_be_16(MEMBER_PORT);
		conf.qpn[r] = MEMBER_QPN(r);
		tally_net_neigh_learn(lc->neigh, member_ip(r), &mac);
	}
	if (b->o.group) {
		conf.group.ip = rte_cpu_to_be_32(GROUP_IP);
		conf.group.port = b->o.roce ? RTE_BE16(TALLY_ROCE_UDP_PORT) :
			rte_cpu_to_be_16(MEMBER_PORT);
	}
	/* No thread is registered with QSBR: this returns at once. */
	ret = tally_dp_job_add(dp, &conf, TALLY_ENC_BIT(TALLY_ENC_I32), why,
		sizeof(why));
	if (ret != 0) {
		what = why;
		goto err;
	}
	return 0;
err:
	fprintf(stderr, "tally-bench dataplane: setup: %s: %s\n", what,
		strerror(ret < 0 ? -ret : ret));
	return -1;
}

/* CRC-32 (zlib's) by a table of its own: no code of tally-dp's. */
static uint32_t
crc32_bench(const uint8_t *p, size_t len)
{
	static uint32_t tab[256];
	uint32_t c = 0xffffffffu;

	if (tab[1] == 0)
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;

			for (int k = 0; k < 8; k++)
				v = (v >> 1) ^ (0xedb88320u & (0u - (v & 1)));
			tab[i] = v;
		}
	for (size_t i = 0; i < len; i++)
		c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return ~c;
}

/*
 * The ICRC of the flat frame f (Ethernet, IPv4 without options, UDP,
 * BTH...), as InfiniBand Annex A17 defines it: 8 bytes of 0xff, then the
 * IPv4 datagram up to its ICRC with TOS, TTL, IPv4 and UDP checksums
 * and BTH byte 4 as 0xff. buf: scratch of 8 + the datagram's length.
 */
static uint32_t
icrc_bench(const uint8_t *f, uint8_t *buf)
{
	const uint8_t *ip = f + sizeof(struct rte_ether_hdr);
	size_t tlen = (size_t)ip[2] << 8 | ip[3];

	memset(buf, 0xff, 8);
	memcpy(buf + 8, ip, tlen - TALLY_ROCE_ICRC_LEN);
	buf[8 + 1] = buf[8 + 8] = buf[8 + 10] = buf[8 + 11] = 0xff;
	buf[8 + 26] = buf[8 + 27] = 0xff;
	buf[8 + 28 + 4] = 0xff;
	return crc32_bench(buf, 8 + tlen - TALLY_ROCE_ICRC_LEN);
}

/* Big-endian 32 bits at p. */
static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Big-endian 32 bits at p. */
static uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

/* A UD SEND's BTH and DETH from member w to tally-dp's first QP at p. */
static void
roce_headers(const struct dpb *b, uint8_t *p, unsigned int w)
{
	p[0] = TALLY_ROCE_OP_UD_SEND;
	p[1] = (uint8_t)(b->pad << 4);
	p[2] = p[3] = 0xff;				/* P_Key */
	put_be32(p + 4, TALLY_ROCE_QPN_BASE);		/* dest QP */
	put_be32(p + 8, 0);				/* PSN */
	put_be32(p + 12, TALLY_ROCE_QKEY(JOB_ID));	/* Q_Key */
	put_be32(p + 16, MEMBER_QPN(w));		/* source QP */
}

/* Writes the frame of worker w to set 'set' of slot 'slot' into m. */
static int
build_frame(struct dpb *b, struct rte_mbuf *m, unsigned int set,
	unsigned int slot, unsigned int w, uint64_t *rng)
{
	const unsigned int plen = b->frame_len - HDRS_LEN;
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	uint8_t *p;
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION,
		.type = TALLY_PT_SUM,
		.flags = (uint8_t)((set ? TALLY_F_SET : 0) |
			(b->o.auth ? TALLY_F_AUTH : 0)),
		.enc = TALLY_ENC_I32,
		.job = JOB_ID,
		.token = JOB_TOKEN,
		.rank = (uint8_t)w,
		.slot = (uint16_t)slot,
		.offset = slot * b->o.elems,
		.count = (uint16_t)b->o.elems,
		.next_block = TALLY_NO_BLOCK,
	};

	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)b->frame_len);
	if (p == NULL)
		return -1;
	eth = (struct rte_ether_hdr *)p;
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	udp = (struct rte_udp_hdr *)(ip + 1);
	eth->dst_addr = b->dp.self.mac;
	eth->src_addr = member_mac(w);
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	*ip = (struct rte_ipv4_hdr){
		.version_ihl = RTE_IPV4_VHL_DEF,
		.total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) +
			sizeof(*udp) + plen)),
		.packet_id = rte_cpu_to_be_16((uint16_t)(slot * 64 + w)),
		.fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG),
		.time_to_live = 64,
		.next_proto_id = IPPROTO_UDP,
		.src_addr = member_ip(w),
		.dst_addr = b->dp.self.ip,
	};
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(MEMBER_PORT);
	udp->dst_port = b->dp.self.port;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + plen));
	udp->dgram_cksum = 0;
	p = (uint8_t *)(udp + 1);
	if (b->o.roce) {
		/* RoCEv2: UDP checksum 0, as the NICs send it. */
		udp->dst_port = RTE_BE16(TALLY_ROCE_UDP_PORT);
		roce_headers(b, p, w);
		p += ROCE_EXTRA;
	}
	h.round = set;
	tally_hdr_encode(&h, p);
	for (unsigned int i = TALLY_HDR_LEN; i < TALLY_HDR_LEN +
			4u * b->o.elems; i += 4) {
		uint64_t z = (*rng += UINT64_C(0x9e3779b97f4a7c15));

		/* splitmix64: the same payloads every run. */
		z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
		z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
		z ^= z >> 31;
		memcpy(p + i, &z, 4);
	}
	if (b->o.auth) {
		struct tally_job_conf kc;
		struct tally_mac_key k;

		bench_keys(&kc);
		if (tally_mac_key_init(&k, kc.keys[w].up) != 0)
			return -1;
		tally_mac_tag(&k, TALLY_MAC_UP, p, p + TALLY_HDR_LEN,
			4u * b->o.elems, p + TALLY_HDR_LEN + 4u * b->o.elems);
	}
	if (b->o.roce) {
		uint8_t *e = rte_pktmbuf_mtod(m, uint8_t *);
		uint32_t ic;

		memset(p + plen - ROCE_EXTRA - b->pad - TALLY_ROCE_ICRC_LEN,
			0, b->pad);
		ic = icrc_bench(e, b->flat);
		p += plen - ROCE_EXTRA - TALLY_ROCE_ICRC_LEN;
		p[0] = (uint8_t)ic;
		p[1] = (uint8_t)(ic >> 8);
		p[2] = (uint8_t)(ic >> 16);
		p[3] = (uint8_t)(ic >> 24);
		return 0;
	}
	/* A real checksum (the lcore verifies it), unless asked not to. */
	if (b->o.cksum != CKSUM_ZERO)
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	if (b->o.cksum == CKSUM_OFFLOAD)
		m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD |
			RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	return 0;
}

/* The frames, one mbuf each from a pool of their own. */
static int
frames_setup(struct dpb *b)
{
	unsigned int n = 2 * b->per_set, i;
	uint64_t rng = 1;

	b->frame_pool = rte_pktmbuf_pool_create("bench_frames", n, 0, 0,
		(uint16_t)(RTE_PKTMBUF_HEADROOM + b->frame_len),
		(int)rte_socket_id());
	b->frames = calloc(n, sizeof(*b->frames));
	b->ref = calloc(b->o.elems, sizeof(*b->ref));
	b->flat = malloc(b->frame_len);
	b->seen = calloc(b->o.slots, sizeof(*b->seen));
	if (b->frame_pool == NULL || b->frames == NULL || b->ref == NULL ||
			b->flat == NULL || b->seen == NULL) {
		fprintf(stderr, "tally-bench dataplane: setup: out of memory "
			"for %u frames\n", n);
		return -1;
	}
	for (i = 0; i < n; i++) {
		unsigned int set = i / b->per_set;
		unsigned int s = i % b->per_set / b->o.workers;
		unsigned int w = i % b->o.workers;

		b->frames[i] = rte_pktmbuf_alloc(b->frame_pool);
		if (b->frames[i] == NULL ||
				build_frame(b, b->frames[i], set, s, w, &rng)) {
			fprintf(stderr, "tally-bench dataplane: setup: frame "
				"%u\n", i);
			return -1;
		}
	}
	return 0;
}

/* Frees whatever is in ring r. */
static void
empty_ring(struct rte_ring *r)
{
	void *m;

	while (r != NULL && rte_ring_dequeue(r, &m) == 0)
		rte_pktmbuf_free(m);
}

/* Undoes dp_setup() and frames_setup(), as far as they went. */
static void
teardown(struct dpb *b)
{
	struct tally_dp *dp = &b->dp;

	if (b->port_made)
		tally_dp_port_close(dp);
	empty_ring(b->rx);
	empty_ring(b->tx);
	if (b->frames != NULL)
		for (unsigned int i = 0; i < 2 * b->per_set; i++)
			rte_pktmbuf_free(b->frames[i]);
	if (b->lc != NULL) {
		tally_dp_lcore_fini(b->lc);
		tally_net_neigh_destroy(b->lc->neigh);
	} else {
		tally_net_neigh_destroy(dp->lcores[0].neigh);
	}
	tally_dp_jobs_fini(dp);
	if (dp->hdr_pool != dp->pool)
		rte_mempool_free(dp->hdr_pool);
	rte_mempool_free(dp->pool);
	rte_mempool_free(b->frame_pool);
	rte_ring_free(b->rx);
	rte_ring_free(b->tx);
	free(b->frames);
	free(b->ref);
	free(b->flat);
	free(b->seen);
}

/*
 * Writes round into frame m's tally header, as its sender would have,
 * and mends the UDP checksum for it (RFC 1624) when the frame has one.
 */
static inline void
stamp_round(struct rte_mbuf *m, uint64_t round)
{
	uint8_t *p = rte_pktmbuf_mtod_offset(m, uint8_t *, HDRS_LEN +
		offsetof(struct tally_wire_hdr, round));
	struct rte_udp_hdr *udp = rte_pktmbuf_mtod_offset(m,
		struct rte_udp_hdr *, HDRS_LEN - sizeof(*udp));
	uint64_t be = rte_cpu_to_be_64(round);
	uint16_t old[4], now[4], ck;
	uint32_t sum;

	memcpy(old, p, sizeof(old));
	memcpy(now, &be, sizeof(now));
	memcpy(p, &be, sizeof(be));
	if (udp->dgram_cksum == 0)
		return;
	sum = (uint16_t)~udp->dgram_cksum;
	for (unsigned int i = 0; i < 4; i++)
		sum += (uint16_t)~old[i] + (uint32_t)now[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ck = (uint16_t)~sum;
	udp->dgram_cksum = ck == 0 ? 0xffff : ck;
}

/*
 * Puts n frames into the port's rx ring, each stamped with round and
 * with one more reference: the free at the other end drops it, and the
 * frame stays for the next round. Returns n, or 0 when the ring is full.
 */
static inline unsigned int
inject(struct dpb *b, struct rte_mbuf **f, unsigned int n, uint64_t round)
{
	for (unsigned int i = 0; i < n; i++) {
		if (!b->o.reset)
			stamp_round(f[i], round);
		rte_mbuf_refcnt_update(f[i], 1);
	}
	if (likely(rte_ring_enqueue_bulk(b->rx, (void **)f, n, NULL) == n))
		return n;
	for (unsigned int i = 0; i < n; i++)
		rte_mbuf_refcnt_update(f[i], -1);
	return 0;
}

/* Frees what the port sent; returns how many frames. */
static inline uint64_t
drain(struct dpb *b)
{
	struct rte_mbuf *m[64];
	unsigned int n;
	uint64_t total = 0;

	while ((n = rte_ring_dequeue_burst(b->tx, (void **)m, 64, NULL)) > 0) {
		rte_pktmbuf_free_bulk(m, n);
		total += n;
	}
	return total;
}

/* The floor: one burst rx -> tx, untouched. Returns frames taken. */
static inline uint16_t
forward(uint16_t port, uint64_t *dropped)
{
	struct rte_mbuf *pkts[BURST];
	uint16_t n, sent;

	n = rte_eth_rx_burst(port, 0, pkts, BURST);
	sent = rte_eth_tx_burst(port, 0, pkts, n);
	if (unlikely(sent < n)) {
		*dropped += n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
	return n;
}

/* Asks for every cache line of m's first segment. */
static inline void
prefetch_all(const struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);

	for (unsigned int off = 0; off < m->data_len;
			off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(p + off);
}

/*
 * Reference (not the floor): the bare forward, and one read of
 * every byte of every frame in between, a one's-complement sum over the
 * frame (the function tally-dp's software checksum uses), each frame
 * prefetched while its predecessor is read, as the lcore does. What
 * touching the payload costs in this harness, with nothing else done.
 */
static inline uint16_t
forward_read(uint16_t port, uint64_t *dropped, uint64_t *sink)
{
	struct rte_mbuf *pkts[BURST];
	uint16_t n, sent;

	n = rte_eth_rx_burst(port, 0, pkts, BURST);
	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			prefetch_all(pkts[i + 1]);
		*sink += tally_net_raw_cksum(rte_pktmbuf_mtod(pkts[i], void *),
			rte_pktmbuf_data_len(pkts[i]));
	}
	sent = rte_eth_tx_burst(port, 0, pkts, n);
	if (unlikely(sent < n)) {
		*dropped += n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
	return n;
}

/*
 * Reference: tally-dp's intake without its answers. Each frame of a
 * burst classified (IPv4 and UDP checksums verified) and given to the
 * engine (tally_agg_process(), with the lcore's counters: rounds complete
 * as in a tally pass), then freed; no result is built or sent, no
 * neighbour learned, no per-job counter kept. Frames prefetched as the
 * lcore does. Returns the frames taken; *refused counts frames that were
 * not tally frames or that the engine did not take.
 */
static inline uint16_t
intake(struct dpb *b, uint64_t *refused)
{
	struct rte_mbuf *pkts[BURST];
	const struct tally_jobtab *tab = atomic_load_explicit(&b->dp.tab,
		memory_order_acquire);
	uint16_t n;

	n = rte_eth_rx_burst(b->dp.port_id, 0, pkts, BURST);
	for (uint16_t i = 0; i < n; i++) {
		struct tally_net_rx rx;
		struct tally_verdict v;
		enum tally_verdict_kind k = TALLY_V_DROP;

		if (i + 1 < n)
			prefetch_all(pkts[i + 1]);
		if (tally_net_classify(pkts[i], &b->dp.self, &rx) ==
				TALLY_NET_TALLY)
			k = tally_agg_process(tab, &b->lc->agg, rx.payload,
				rx.len, &rx.src, &v);
		*refused += k != TALLY_V_TAKEN && k != TALLY_V_COMPLETE;
	}
	rte_pktmbuf_free_bulk(pkts, n);
	return n;
}

/* What one pass saw, to be checked after it. */
struct pass_count {
	uint64_t injected;
	uint64_t taken;		/* frames the loop took from the port */
	uint64_t drained;	/* frames the port sent */
	uint64_t dropped;	/* frames the floor's tx refused, or the
				   intake's engine did not take */
	uint64_t sink;		/* what the read reference summed */
	int full;		/* the rx ring refused a burst */
};

/*
 * Timed: rounds rounds of every slot, a burst at a time into the port,
 * through tally-dp's loop, the bare forward or a reference (kind), the
 * sent frames freed after every burst.
 */
/* The pass clock: monotonic, or this thread's CPU time (--cpu-clock). */
static uint64_t
pass_clock(const struct dpb *b)
{
	struct timespec ts;

	if (!b->o.cpu_clock)
		return bench_now_ns();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
run_pass(struct dpb *b, enum pass_kind kind, unsigned int rounds,
	struct pass_count *pc, uint64_t *ns)
{
	const int tally = kind == PASS_TALLY;
	struct tally_dp_lcore *lc = b->lc;
	const unsigned int per_set = b->per_set;
	const uint16_t port = b->dp.port_id;
	uint64_t t0;

	*pc = (struct pass_count){ 0 };
	t0 = pass_clock(b);
	for (unsigned int r = 0; r < rounds; r++) {
		struct rte_mbuf **f = b->frames +
			((b->round + r) & 1) * per_set;
		unsigned int n;

		/* --reset: rounds 0 and 1 again, on emptied slots. */
		if (b->o.reset && ((b->round + r) & 1) == 0)
			tally_job_reset(b->dp.jobs[0]);

		for (unsigned int i = 0; i < per_set; i += n) {
			n = RTE_MIN((unsigned int)BURST, per_set - i);
			if (unlikely(inject(b, f + i, n, b->round + r) != n)) {
				pc->full = 1;
				goto out;
			}
			pc->injected += n;
			if (tally)
				pc->taken += tally_dp_lcore_poll(lc);
			else if (kind == PASS_FLOOR)
				pc->taken += forward(port, &pc->dropped);
			else if (kind == PASS_READ)
				pc->taken += forward_read(port, &pc->dropped,
					&pc->sink);
			else
				pc->taken += intake(b, &pc->dropped);
			pc->drained += drain(b);
		}
	}
out:
	*ns = pass_clock(b) - t0;
	/* The engine's slots moved on; the forwards touched no slot. */
	if (tally || kind == PASS_INTAKE)
		b->round += rounds;
}

/* Whether the dataplane refused or lost anything; says what if so. */
static int
check_counters(const struct dpb *b)
{
	const struct tally_agg_stats *ag = &b->lc->agg;
	const struct tally_dp_stats *st = &b->lc->st;
	int bad = 0;

	for (unsigned int s = 1; s < TALLY_ST_MAX_; s++) {
		if (ag->drops[s] == 0)
			continue;
		fprintf(stderr, "tally-bench dataplane: engine refused %llu "
			"frames: %s\n", (unsigned long long)ag->drops[s],
			tally_status_name(s));
		bad = 1;
	}
	for (unsigned int w = 1; w < TALLY_NET_DROP_MAX_; w++) {
		if (st->net_drops[w] == 0)
			continue;
		fprintf(stderr, "tally-bench dataplane: lcore dropped %llu "
			"frames: %s\n", (unsigned long long)st->net_drops[w],
			tally_net_drop_name(w));
		bad = 1;
	}
	if (ag->duplicates || ag->resent || ag->nacks || st->tx_dropped ||
			st->no_neigh || st->no_mbuf || st->misrouted ||
			st->ring_full || ag->drops[0] || st->net_drops[0]) {
		fprintf(stderr, "tally-bench dataplane: duplicates %llu, "
			"resent %llu, nacks %llu, tx_dropped %llu, no_neigh "
			"%llu, no_mbuf %llu, misrouted %llu\n",
			(unsigned long long)ag->duplicates,
			(unsigned long long)ag->resent,
			(unsigned long long)ag->nacks,
			(unsigned long long)st->tx_dropped,
			(unsigned long long)st->no_neigh,
			(unsigned long long)st->no_mbuf,
			(unsigned long long)st->misrouted);
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* Result frames a completed round sends: one, or one a member. */
static unsigned int
per_round(const struct dpb *b)
{
	return b->o.group ? 1 : b->o.workers;
}

/* A tally pass: every frame taken, every round complete, its results. */
static int
check_tally_pass(const struct dpb *b, unsigned int rounds,
	const struct pass_count *pc, uint64_t completed, uint64_t results)
{
	uint64_t frames = (uint64_t)rounds * b->per_set;
	uint64_t rs = (uint64_t)rounds * b->o.slots;

	if (pc->full || pc->injected != frames || pc->taken != frames ||
			completed != rs || results != rs * per_round(b) ||
			pc->drained != results) {
		fprintf(stderr, "tally-bench dataplane: tally pass of %u "
			"rounds: %llu of %llu frames injected, %llu taken; "
			"%llu rounds completed of %llu; %llu results built, "
			"%llu sent, expected %llu\n", rounds,
			(unsigned long long)pc->injected,
			(unsigned long long)frames,
			(unsigned long long)pc->taken,
			(unsigned long long)completed, (unsigned long long)rs,
			(unsigned long long)results,
			(unsigned long long)pc->drained,
			(unsigned long long)(rs * per_round(b)));
		check_counters(b);
		return -1;
	}
	return check_counters(b);
}

/* A timed tally pass, checked. */
static int
tally_pass(struct dpb *b, unsigned int rounds, uint64_t *ns)
{
	uint64_t c0 = b->lc->agg.completed, r0 = b->lc->st.results;
	struct pass_count pc;

	run_pass(b, PASS_TALLY, rounds, &pc, ns);
	return check_tally_pass(b, rounds, &pc, b->lc->agg.completed - c0,
		b->lc->st.results - r0);
}

/*
 * A timed pass of the floor or the read reference: every frame forwarded
 * and sent.
 */
static int
forward_pass(struct dpb *b, enum pass_kind kind, unsigned int rounds,
	uint64_t *ns)
{
	uint64_t frames = (uint64_t)rounds * b->per_set;
	struct pass_count pc;

	run_pass(b, kind, rounds, &pc, ns);
	if (pc.full || pc.taken != frames || pc.drained != frames ||
			pc.dropped != 0) {
		fprintf(stderr, "tally-bench dataplane: %s pass of %u "
			"rounds: %llu frames taken, %llu sent, %llu refused; "
			"expected %llu\n",
			kind == PASS_FLOOR ? "floor" : "read", rounds,
			(unsigned long long)pc.taken,
			(unsigned long long)pc.drained,
			(unsigned long long)pc.dropped,
			(unsigned long long)frames);
		return -1;
	}
	return 0;
}

/*
 * A timed pass of the intake reference: every frame taken and counted,
 * every round completed, nothing sent.
 */
static int
intake_pass(struct dpb *b, unsigned int rounds, uint64_t *ns)
{
	uint64_t frames = (uint64_t)rounds * b->per_set;
	uint64_t c0 = b->lc->agg.completed;
	struct pass_count pc;

	run_pass(b, PASS_INTAKE, rounds, &pc, ns);
	if (pc.full || pc.taken != frames || pc.dropped != 0 ||
			pc.drained != 0 || b->lc->agg.completed - c0 !=
				(uint64_t)rounds * b->o.slots) {
		fprintf(stderr, "tally-bench dataplane: intake pass of %u "
			"rounds: %llu frames taken, %llu refused, %llu sent, "
			"%llu rounds completed; expected %llu frames\n", rounds,
			(unsigned long long)pc.taken,
			(unsigned long long)pc.dropped,
			(unsigned long long)pc.drained,
			(unsigned long long)(b->lc->agg.completed - c0),
			(unsigned long long)frames);
		check_counters(b);
		return -1;
	}
	return check_counters(b);
}

/* A timed pass of kind, checked; its time added to its side. */
static int
timed_pass(struct dpb *b, enum pass_kind kind)
{
	uint64_t ns;
	int rc;

	if (kind == PASS_TALLY)
		rc = tally_pass(b, b->o.rounds, &ns);
	else if (kind == PASS_INTAKE)
		rc = intake_pass(b, b->o.rounds, &ns);
	else
		rc = forward_pass(b, kind, b->o.rounds, &ns);
	if (rc == 0)
		bench_side_add(&b->side[kind], ns);
	return rc;
}

/* b->ref = the wrapping i32 sum of the workers' frames to (set, slot). */
static void
reference(struct dpb *b, unsigned int set, unsigned int slot)
{
	struct rte_mbuf **f = b->frames + (set * b->o.slots + slot) *
		b->o.workers;

	memset(b->ref, 0, b->o.elems * sizeof(*b->ref));
	for (unsigned int w = 0; w < b->o.workers; w++) {
		const uint8_t *pl = rte_pktmbuf_mtod_offset(f[w],
			const uint8_t *, b->msg_off + TALLY_HDR_LEN);

		for (unsigned int i = 0; i < b->o.elems; i++) {
			uint32_t x;

			memcpy(&x, pl + 4 * i, 4);
			b->ref[i] += x;
		}
	}
}

/* Whether the UDP checksum over the pseudo-header and datagram holds. */
static int
udp_cksum_ok(const struct rte_ipv4_hdr *ip, const struct rte_udp_hdr *udp)
{
	uint32_t sum = (uint32_t)rte_ipv4_phdr_cksum(ip, 0) +
		rte_raw_cksum(udp, rte_be_to_cpu_16(udp->dgram_len));

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

#define BAD(...) do { \
	fprintf(stderr, "tally-bench dataplane: result frame: " __VA_ARGS__); \
	return -1; \
} while (0)

/*
 * The RoCEv2 part of a result frame f (flat) to member r (0 for the
 * group): UDP to 4791, a UD SEND of the default partition to the
 * member's QP (the multicast QP for the group) from tally-dp's first QP
 * with the job's Q_Key, PadCnt as sent, and an ICRC that holds.
 */
static int
check_roce(struct dpb *b, const uint8_t *f, unsigned int r)
{
	const uint8_t *u = f + sizeof(struct rte_ether_hdr) +
		sizeof(struct rte_ipv4_hdr), *bth = u + 8;
	const unsigned int len = b->frame_len - sizeof(struct rte_ether_hdr) -
		sizeof(struct rte_ipv4_hdr);
	const uint8_t *ic = f + b->frame_len - TALLY_ROCE_ICRC_LEN;
	uint32_t want = b->o.group ? TALLY_ROCE_QPN_MCAST : MEMBER_QPN(r);
	uint32_t got = (uint32_t)ic[0] | (uint32_t)ic[1] << 8 |
		(uint32_t)ic[2] << 16 | (uint32_t)ic[3] << 24;
	static uint8_t scratch[8 + 9600];

	if ((u[2] << 8 | u[3]) != TALLY_ROCE_UDP_PORT ||
			(unsigned int)(u[4] << 8 | u[5]) != len ||
			bth[0] != TALLY_ROCE_OP_UD_SEND ||
			(bth[1] >> 4 & 3) != b->pad ||
			bth[2] != 0xff || bth[3] != 0xff ||
			(get_be32(bth + 4) & 0xffffffu) != want ||
			get_be32(bth + 12) != TALLY_ROCE_QKEY(JOB_ID) ||
			(get_be32(bth + 16) & 0xffffffu) !=
				TALLY_ROCE_QPN_BASE) {
		fprintf(stderr, "tally-bench dataplane: result frame: UDP, "
			"BTH or DETH wrong (member %u)\n", r);
		return -1;
	}
	/* icrc_bench() masks a copy: the frame stays as it came. */
	if (icrc_bench(f, scratch) != got) {
		fprintf(stderr, "tally-bench dataplane: result frame: ICRC "
			"wrong (member %u)\n", r);
		return -1;
	}
	return 0;
}

/*
 * Checks one result frame of a round on set 'set': Ethernet, IPv4 and
 * UDP headers (checksums included) to a member that has not had this
 * slot's result yet, the tally header, and the payload against the sum.
 */
static int
check_result(struct dpb *b, const struct rte_mbuf *m, unsigned int set)
{
	const unsigned int blen = TALLY_HDR_LEN + 4u * b->o.elems +
		(b->o.auth ? TALLY_TAG_LEN : 0);
	const struct rte_ether_hdr *eth;
	const struct rte_ipv4_hdr *ip;
	const struct rte_udp_hdr *udp;
	const uint8_t *msg;
	struct rte_ether_addr mac;
	struct tally_hdr h = { 0 };
	unsigned int r;

	if (m->pkt_len != b->frame_len)
		BAD("%u B, expected %u\n", m->pkt_len, b->frame_len);
	/* Headers and payload lie in two segments: flatten them. */
	eth = rte_pktmbuf_read(m, 0, m->pkt_len, b->flat);
	if (eth == NULL)
		BAD("segments hold less than pkt_len\n");
	ip = (const struct rte_ipv4_hdr *)(eth + 1);
	udp = (const struct rte_udp_hdr *)(ip + 1);
	if (b->o.group) {
		/* To the group, which every member joined. */
		r = 0;
		mac = (struct rte_ether_addr){ .addr_bytes = { 0x01, 0x00,
			0x5e, 0x00, 0x00, 0x01 } };
		if (ip->dst_addr != rte_cpu_to_be_32(GROUP_IP))
			BAD("to %08x, not the group\n",
				rte_be_to_cpu_32(ip->dst_addr));
	} else {
		r = rte_be_to_cpu_32(ip->dst_addr) - RTE_IPV4(10, 0, 0, 1);
		if (r >= b->o.workers)
			BAD("to %08x, not a member\n",
				rte_be_to_cpu_32(ip->dst_addr));
		mac = member_mac(r);
	}
	if (!rte_is_same_ether_addr(&eth->dst_addr, &mac) ||
			!rte_is_same_ether_addr(&eth->src_addr,
				&b->dp.self.mac) ||
			eth->ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4))
		BAD("Ethernet header wrong (member %u)\n", r);
	if (ip->version_ihl != RTE_IPV4_VHL_DEF ||
			rte_raw_cksum(ip, sizeof(*ip)) != 0xffff ||
			rte_be_to_cpu_16(ip->total_length) !=
				b->frame_len - sizeof(*eth) ||
			ip->next_proto_id != IPPROTO_UDP ||
			ip->src_addr != b->dp.self.ip ||
			(ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_MF_FLAG |
				RTE_IPV4_HDR_OFFSET_MASK)) != 0)
		BAD("IPv4 header wrong (member %u)\n", r);
	msg = (const uint8_t *)(udp + 1);
	if (b->o.roce) {
		if (check_roce(b, (const uint8_t *)eth, r) != 0)
			return -1;
		msg += ROCE_EXTRA;
	} else if (udp->src_port != b->dp.self.port ||
			udp->dst_port != RTE_BE16(MEMBER_PORT) ||
			rte_be_to_cpu_16(udp->dgram_len) !=
				sizeof(*udp) + blen ||
			udp->dgram_cksum == 0 || !udp_cksum_ok(ip, udp)) {
		BAD("UDP header or checksum wrong (member %u)\n", r);
	}
	if (tally_hdr_decode(msg, blen, &h) != TALLY_ST_OK ||
			h.type != TALLY_PT_SUM_RESULT || h.job != JOB_ID ||
			h.slot >= b->o.slots ||
			h.offset != (uint32_t)h.slot * b->o.elems ||
			h.count != b->o.elems ||
			h.enc != tally_enc_result(TALLY_ENC_I32, 0) ||
			(h.flags & TALLY_F_SET) != (set ? TALLY_F_SET : 0) ||
			h.round != (b->o.reset ? b->round & 1 : b->round) ||
			!(h.flags & TALLY_F_AUTH) != !b->o.auth)
		BAD("tally header wrong (member %u, slot %u, set %u)\n", r,
			h.slot, set);
	if (b->seen[h.slot] & UINT64_C(1) << r)
		BAD("member %u got slot %u twice\n", r, h.slot);
	b->seen[h.slot] |= b->o.group ? (b->o.workers == 64 ? UINT64_MAX :
		(UINT64_C(1) << b->o.workers) - 1) : UINT64_C(1) << r;
	reference(b, set, h.slot);
	for (unsigned int i = 0; i < b->o.elems; i++) {
		uint32_t got;

		memcpy(&got, msg + TALLY_HDR_LEN + 4 * i, 4);
		if (got != b->ref[i])
			BAD("slot %u set %u member %u: element %u is 0x%08x, "
				"the sum is 0x%08x\n", h.slot, set, r, i, got,
				b->ref[i]);
	}
	return 0;
}

#undef BAD

/*
 * Untimed: one round of every slot through tally-dp's loop, every result
 * frame checked (check_result) and every member given every slot's.
 */
static int
verify_round(struct dpb *b)
{
	const unsigned int set = (unsigned int)(b->round & 1);
	const uint64_t full = b->o.workers == 64 ? UINT64_MAX :
		(UINT64_C(1) << b->o.workers) - 1;
	struct rte_mbuf **f = b->frames + set * b->per_set;
	uint64_t results = 0;
	unsigned int n;
	int rc = 0;

	memset(b->seen, 0, b->o.slots * sizeof(*b->seen));
	if (b->o.reset && (b->round & 1) == 0)
		tally_job_reset(b->dp.jobs[0]);
	for (unsigned int i = 0; i < b->per_set; i += n) {
		struct rte_mbuf *m[64];
		unsigned int k;

		n = RTE_MIN((unsigned int)BURST, b->per_set - i);
		if (inject(b, f + i, n, b->round) != n ||
				tally_dp_lcore_poll(b->lc) != n) {
			fprintf(stderr, "tally-bench dataplane: verify: a "
				"burst was not taken whole\n");
			return -1;
		}
		while ((k = rte_ring_dequeue_burst(b->tx, (void **)m, 64,
				NULL)) > 0) {
			for (unsigned int j = 0; j < k && rc == 0; j++)
				rc = check_result(b, m[j], set);
			rte_pktmbuf_free_bulk(m, k);
			results += k;
		}
		if (rc != 0)
			return -1;
	}
	b->round++;
	for (unsigned int s = 0; s < b->o.slots; s++) {
		if (b->seen[s] != full) {
			fprintf(stderr, "tally-bench dataplane: verify: slot "
				"%u set %u: results reached members %llx of "
				"%llx\n", s, set,
				(unsigned long long)b->seen[s],
				(unsigned long long)full);
			check_counters(b);	/* says why, if it knows */
			return -1;
		}
	}
	if (results != (uint64_t)b->o.slots * per_round(b)) {
		fprintf(stderr, "tally-bench dataplane: verify: %llu result "
			"frames, expected %u\n", (unsigned long long)results,
			b->o.slots * per_round(b));
		return -1;
	}
	return check_counters(b);
}

static int
tally_pass_cb(void *arg, unsigned int rounds, uint64_t *ns)
{
	return tally_pass(arg, rounds, ns);
}

/*
 * Whether a run times passes of kind: the cost table only tally and
 * read; RoCEv2 has no intake reference (its ICRC is the lcore's).
 */
static int
pass_wanted(const struct dpb *b, enum pass_kind kind)
{
	if (kind == PASS_TALLY || (kind == PASS_READ && b->o.cost))
		return 1;
	if (b->o.cost)
		return 0;
	if (kind == PASS_INTAKE && b->o.roce)
		return 0;
	return kind == PASS_FLOOR || !b->o.no_refs;
}

/*
 * Verify, calibrate, alternate timed passes (tally, floor, the
 * references), verify again.
 */
static int
dpb_run(struct dpb *b)
{
	if (verify_round(b) != 0 || verify_round(b) != 0)
		return -1;
	if (b->o.rounds == 0 && bench_calibrate(tally_pass_cb, b,
			MAX_ROUNDS, PASS_TARGET_NS, &b->o.rounds) != 0)
		return -1;
	for (unsigned int p = 0; p < b->o.passes; p++)
		for (int k = 0; k < PASS_KINDS_; k++)
			if (pass_wanted(b, (enum pass_kind)k) &&
					timed_pass(b, (enum pass_kind)k) != 0)
				return -1;
	if (verify_round(b) != 0 || verify_round(b) != 0)
		return -1;
	return 0;
}

static struct bench_figures
figures_of(const struct dpb *b, const struct bench_side *sd)
{
	return bench_figures_of(sd, (double)b->o.rounds * b->per_set,
		b->o.elems);
}

/* The port's driver ("net_ring"). */
static const char *
driver_name(const struct dpb *b)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(b->dp.port_id, &info) != 0 ||
			info.driver_name == NULL)
		return "?";
	return info.driver_name;
}

/* Gbit/s of payload and of wire (frame, FCS, preamble, gap) a lcore. */
static double
payload_gbit(const struct dpb *b, double ns_pkt)
{
	return 32.0 * b->o.elems / ns_pkt;
}

static double
wire_gbit(const struct dpb *b, double ns_pkt)
{
	return 8.0 * (b->frame_len + RTE_ETHER_CRC_LEN + 20) / ns_pkt;
}

static void
report_text(const struct dpb *b, const char *cpu)
{
	struct bench_figures ft = figures_of(b, &b->side[PASS_TALLY]);
	struct bench_figures ff = figures_of(b, &b->side[PASS_FLOOR]);
	struct bench_figures fr = figures_of(b, &b->side[PASS_READ]);
	struct bench_figures fi = figures_of(b, &b->side[PASS_INTAKE]);
	double ratio = ft.seconds / ff.seconds;
	double rs = (double)b->o.rounds * b->o.slots;
	char b1[32], b2[32];

	printf("machine: %s, %u cores online\n", cpu, bench_cores_online());
	printf("params:  workers %u, elems %u (i32), slots %u, rounds %u, "
		"passes %u%s%s%s\n", b->o.workers, b->o.elems, b->o.slots,
		b->o.rounds, b->o.passes, b->o.quick ? " (quick)" : "",
		b->o.auth ? ", authenticated job (AES-GMAC tags)" :
		b->o.reset ? ", plain job, --reset" : "",
		b->o.cpu_clock ? ", thread CPU clock" : "");
	printf("port:    %s (rx and tx rte_rings), mtu %u; 1 worker lcore "
		"(lcore %u), bursts of %d; results %s\n", driver_name(b),
		b->mtu, b->lc->lcore_id, BURST, b->dp.tx_chains ?
		"chained (header mbuf + indirect mbuf of the body; the "
		"last member's headers in the body's headroom)" :
		"linearized (the port takes no chains)");
	static const char *const cksum_what[] = {
		[CKSUM_SW] = "valid, verified in software",
		[CKSUM_OFFLOAD] = "valid, flagged good as by a NIC",
		[CKSUM_ZERO] = "UDP 0, IPv4 verified in software",
	};

	printf("frames:  %u B (Ethernet, IPv4, UDP, %stally header, "
		"payload%s), %u of them (2 sets x slots x workers); "
		"checksums %s (--cksum %s)\n\n", b->frame_len,
		b->o.roce ? "BTH, DETH, " : "", b->o.roce ? ", ICRC" : "",
		2 * b->per_set, cksum_what[b->o.cksum],
		cksum_names[b->o.cksum]);
	printf("%-6s %12s %12s %10s %8s   (per lcore: lcore %u)\n", "side",
		"frames/s", "elements/s", "ns/frame", "spread",
		b->lc->lcore_id);
	bench_print_row("tally", &ft);
	bench_print_row("floor", &ff);
	if (pass_wanted(b, PASS_READ))
		bench_print_row("read", &fr);
	if (pass_wanted(b, PASS_INTAKE))
		bench_print_row("intake", &fi);
	printf("\ntally: results sent/s %s (%u per completed round), "
		"completions/s %s\n",
		bench_sci(b1, sizeof(b1), rs * per_round(b) / ft.seconds),
		per_round(b), bench_sci(b2, sizeof(b2), rs / ft.seconds));
	printf("floor: rx -> tx of the same frames, untouched (no parsing, "
		"no checksums, no results)\n");
	if (pass_wanted(b, PASS_INTAKE)) {
		printf("intake: reference: rx, classification (checksums) "
			"and the engine, then free; no result built\n");
		printf("tally - intake: %.1f ns/frame (the results); intake - "
			"read: %.1f\n", ft.ns_pkt - fi.ns_pkt,
			fi.ns_pkt - fr.ns_pkt);
	}
	if (pass_wanted(b, PASS_READ)) {
		printf("read:   reference: the floor with every byte of every "
			"frame read once (a one's-complement sum); read - "
			"floor: %.1f ns/frame\n", fr.ns_pkt - ff.ns_pkt);
		printf("ratio tally/read: %.2fx (goal <= %.1fx: %s); per "
			"lcore %.2f Gbit/s of payload, %.2f on the wire\n",
			ft.seconds / fr.seconds, READ_GOAL, b->o.quick ?
			"not judged" : ft.seconds / fr.seconds <= READ_GOAL ?
			"met" : "not met", payload_gbit(b, ft.ns_pkt),
			wire_gbit(b, ft.ns_pkt));
	}
	printf("ratio tally/floor: %.2fx\n", ratio);
	printf("goal: ratio <= %.1fx: %s\n", GOAL_RATIO,
		b->o.quick ? "not judged (quick run)" :
		ratio <= GOAL_RATIO ? "met" : "not met");
}

static void
json_side(const char *name, const struct bench_figures *f)
{
	printf("\"%s\":{\"seconds\":%.6f,\"frames_per_s\":%.4e,"
		"\"elements_per_s\":%.4e,\"ns_per_frame\":%.3f,"
		"\"spread\":%.4f},", name, f->seconds, f->pkts_s, f->elems_s,
		f->ns_pkt, f->spread);
}

static void
report_json(const struct dpb *b, const char *cpu)
{
	struct bench_figures ft = figures_of(b, &b->side[PASS_TALLY]);
	struct bench_figures ff = figures_of(b, &b->side[PASS_FLOOR]);
	struct bench_figures fr = figures_of(b, &b->side[PASS_READ]);
	struct bench_figures fi = figures_of(b, &b->side[PASS_INTAKE]);
	double ratio = ft.seconds / ff.seconds;
	double rs = (double)b->o.rounds * b->o.slots;

	printf("{\"bench\":\"dataplane\",\"machine\":{\"cpu\":");
	bench_json_string(stdout, cpu);
	printf(",\"cores\":%u},", bench_cores_online());
	printf("\"params\":{\"workers\":%u,\"elems\":%u,\"slots\":%u,"
		"\"rounds\":%u,\"passes\":%u,\"quick\":%s,\"frame_bytes\":%u,"
		"\"lcores\":1,\"burst\":%d,\"port\":", b->o.workers,
		b->o.elems, b->o.slots, b->o.rounds, b->o.passes,
		b->o.quick ? "true" : "false", b->frame_len, BURST);
	bench_json_string(stdout, driver_name(b));
	printf(",\"results_chained\":%s,\"cksum\":\"%s\"},",
		b->dp.tx_chains ? "true" : "false", cksum_names[b->o.cksum]);
	json_side("tally", &ft);
	json_side("floor", &ff);
	if (pass_wanted(b, PASS_READ)) {
		printf("\"refs\":{");
		json_side("read", &fr);
		if (pass_wanted(b, PASS_INTAKE))
			json_side("intake", &fi);
		printf("\"note\":\"references, not the floor\"},");
		printf("\"ratio_read\":%.4f,\"gbit_per_lcore\":%.3f,",
			ft.seconds / fr.seconds, payload_gbit(b, ft.ns_pkt));
	}
	printf("\"results_per_s\":%.4e,\"completions_per_s\":%.4e,"
		"\"ratio\":%.4f,", rs * per_round(b) / ft.seconds,
		rs / ft.seconds, ratio);
	printf("\"goal\":{\"ratio\":%.2f,\"met\":%s}}\n", GOAL_RATIO,
		b->o.quick ? "null" : ratio <= GOAL_RATIO ? "true" : "false");
}

/*
 * b's frame geometry from its options: where the tally header lies, the
 * frame's length, and an MTU that carries it (for RoCEv2, one whose path
 * MTU holds the message). 0, or -1 with a message.
 */
static int
geometry(struct dpb *b)
{
	unsigned int msg = TALLY_HDR_LEN + 4u * b->o.elems +
		(b->o.auth ? TALLY_TAG_LEN : 0), p;

	b->per_set = b->o.slots * b->o.workers;
	b->msg_off = HDRS_LEN + (b->o.roce ? ROCE_EXTRA : 0);
	b->pad = 0;
	b->frame_len = b->msg_off + msg;
	b->mtu = (uint16_t)RTE_MAX(1500u, b->frame_len -
		(unsigned int)sizeof(struct rte_ether_hdr));
	if (!b->o.roce)
		return 0;
	b->pad = (4 - msg % 4) % 4;
	b->frame_len += b->pad + TALLY_ROCE_ICRC_LEN;
	for (p = 256; p < msg && p < 4096; p *= 2)
		;
	if (p < msg)	/* parse_opts() refused it */
		return -1;
	b->mtu = (uint16_t)RTE_MAX(1500u, p + TALLY_ROCE_IP_OVERHEAD);
	return 0;
}

/* EAL, port, job and frames for b's options; run; report unless cost. */
static int
run_one(struct dpb *b, const char *cpu)
{
	int rc;

	if (geometry(b) != 0)
		return BENCH_EXIT_USAGE;
	if (dp_setup(b) != 0 || frames_setup(b) != 0) {
		teardown(b);
		return BENCH_EXIT_FAIL;
	}
	rc = dpb_run(b);
	if (rc == 0 && !b->o.cost) {
		if (b->o.json)
			report_json(b, cpu);
		else
			report_text(b, cpu);
	} else if (rc != 0) {
		fprintf(stderr, "tally-bench dataplane: verification failed\n");
	}
	teardown(b);
	return rc == 0 ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
}

/* One row of the cost table, measured. */
struct cost_row {
	const char *path;
	unsigned int payload;	/* bytes of payload a frame */
	unsigned int frame;	/* bytes a frame, without FCS */
	double tally_ns, read_ns, spread;
	double gbit, wire;
};

/* The cost table's runs: about 1 KiB and 4 KiB of i32 a frame, UDP and
 * RoCEv2 (a message of the 1024 and 4096-byte path MTUs). */
static const struct cost_cfg {
	int roce;
	unsigned int elems;
} cost_cfgs[] = {
	{ 0, 256 }, { 1, 246 }, { 0, 1024 }, { 1, 1014 },
};

static void
cost_print(const struct dpb *b, const char *cpu, const struct cost_row *r,
	unsigned int n)
{
	printf("machine: %s, %u cores online\n", cpu, bench_cores_online());
	printf("params:  workers %u, slots %u, passes %u%s, i32, rounds 0 "
		"and 1 again (--reset); UDP checksums %s; ICRC by "
		"%s; 1 worker lcore, bursts of %d, net_ring; %s clock\n\n",
		b->o.workers, b->o.slots, b->o.passes,
		b->o.quick ? " (quick)" : "", cksum_names[b->o.cksum],
		b->icrc_path, BURST, b->o.cpu_clock ? "thread CPU" : "wall");
	printf("%-7s %8s %7s %9s %9s %7s %7s %9s %9s\n", "path",
		"payload", "frame", "tally ns", "read ns", "ratio", "spread",
		"Gbit/s", "wire Gb/s");
	for (unsigned int i = 0; i < n; i++)
		printf("%-7s %8u %7u %9.1f %9.1f %6.2fx %6.1f%% %9.2f %9.2f\n",
			r[i].path, r[i].payload, r[i].frame, r[i].tally_ns,
			r[i].read_ns, r[i].tally_ns / r[i].read_ns,
			100 * r[i].spread, r[i].gbit, r[i].wire);
	printf("\nratio: tally's ns a frame over read's (the same frames "
		"forwarded, each byte read once), measured in turn\n");
	printf("Gbit/s: payload taken a lcore (contributions; results go out "
		"at the same rate); wire: frames + FCS, preamble and gap\n");
	for (unsigned int i = 0; i < n; i++)
		printf("goal: %s %u B: ratio <= %.1fx: %s\n", r[i].path,
			r[i].payload, READ_GOAL, b->o.quick ? "not judged "
			"(quick run)" : r[i].tally_ns / r[i].read_ns <=
			READ_GOAL ? "met" : "not met");
}

static void
cost_json(const struct dpb *b, const char *cpu, const struct cost_row *r,
	unsigned int n)
{
	printf("{\"bench\":\"dataplane-cost\",\"machine\":{\"cpu\":");
	bench_json_string(stdout, cpu);
	printf(",\"cores\":%u},\"params\":{\"workers\":%u,\"slots\":%u,"
		"\"passes\":%u,\"quick\":%s,\"icrc\":\"%s\",\"clock\":"
		"\"%s\"},\"rows\":[",
		bench_cores_online(), b->o.workers, b->o.slots, b->o.passes,
		b->o.quick ? "true" : "false", b->icrc_path,
		b->o.cpu_clock ? "cpu" : "wall");
	for (unsigned int i = 0; i < n; i++)
		printf("%s{\"path\":\"%s\",\"payload_bytes\":%u,"
			"\"frame_bytes\":%u,\"tally_ns\":%.3f,\"read_ns\":"
			"%.3f,\"ratio\":%.4f,\"gbit_per_lcore\":%.3f,"
			"\"wire_gbit_per_lcore\":%.3f,\"goal_met\":%s}",
			i ? "," : "", r[i].path, r[i].payload, r[i].frame,
			r[i].tally_ns, r[i].read_ns, r[i].tally_ns /
			r[i].read_ns, r[i].gbit, r[i].wire, b->o.quick ?
			"null" : r[i].tally_ns / r[i].read_ns <= READ_GOAL ?
			"true" : "false");
	printf("],\"goal_ratio\":%.1f}\n", READ_GOAL);
}

/*
 * The cost table: each of cost_cfgs in turn in this process (the EAL
 * up), its tally and read passes alternating, then one table.
 */
static int
cost_table(struct dpb *b, const char *cpu)
{
	const struct dpb_opts base = b->o;
	const char *icrc = b->icrc_path;
	struct cost_row rows[RTE_DIM(cost_cfgs)];
	int rc = BENCH_EXIT_OK;

	for (unsigned int i = 0; i < RTE_DIM(cost_cfgs) && rc == 0; i++) {
		struct bench_figures ft, fr;

		memset(b, 0, sizeof(*b));
		b->o = base;
		b->o.elems = cost_cfgs[i].elems;
		b->o.roce = cost_cfgs[i].roce;
		b->icrc_path = icrc;
		rc = run_one(b, cpu);
		if (rc != 0)
			break;
		ft = figures_of(b, &b->side[PASS_TALLY]);
		fr = figures_of(b, &b->side[PASS_READ]);
		rows[i] = (struct cost_row){
			.path = b->o.roce ? "RoCEv2" : "UDP",
			.payload = 4 * b->o.elems, .frame = b->frame_len,
			.tally_ns = ft.ns_pkt, .read_ns = fr.ns_pkt,
			.spread = ft.spread, .gbit = payload_gbit(b, ft.ns_pkt),
			.wire = wire_gbit(b, ft.ns_pkt),
		};
	}
	if (rc != 0)
		return rc;
	b->o = base;
	if (base.json)
		cost_json(b, cpu, rows, RTE_DIM(rows));
	else
		cost_print(b, cpu, rows, RTE_DIM(rows));
	return rc;
}

int
bench_dataplane(int argc, char **argv)
{
	struct dpb *b = &bench;
	char cpu[256];
	int rc;

	rc = parse_opts(argc, argv, &b->o);
	if (rc != 0)
		return rc > 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	if (eal_init() != 0)
		return BENCH_EXIT_FAIL;
	b->icrc_path = tally_icrc_init();
	if (b->o.icrc != NULL) {
		rc = tally_icrc_set_path(b->o.icrc);
		if (rc != 0) {
			fprintf(stderr, "--icrc %s: %s\n", b->o.icrc,
				strerror(-rc));
			eal_fini();
			return BENCH_EXIT_FAIL;
		}
		b->icrc_path = b->o.icrc;
	}
	bench_cpu_model(cpu, sizeof(cpu));
	rc = b->o.cost ? cost_table(b, cpu) : run_one(b, cpu);
	eal_fini();
	return rc;
}
