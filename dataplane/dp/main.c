/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp: the DPDK dataplane. EAL arguments come first and pass through
 * to DPDK; tally-dp's own follow "--":
 *
 *   tally-dp -l 0,1 --vdev net_af_packet0,iface=tb-dp -- --addr 10.77.0.1
 *
 * The main lcore serves the admin socket; every worker lcore owns one UDP
 * port of the range and the slots that map to it.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_eal.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>

#include "dp.h"
#include "net/icrc.h"
#include "tally_config.h"

RTE_LOG_REGISTER(tally_dp_logtype, user.tally.dp, INFO);
#define DP_LOG(level, fmt, ...) rte_log(RTE_LOG_ ## level, \
	tally_dp_logtype, "tally-dp: " fmt "\n", ## __VA_ARGS__)

static struct tally_dp dp;

struct opts {
	const char *addr;
	const char *admin;
	unsigned long udp_port;
	unsigned long eth_port;
	unsigned long idle_us;
	int idle_sleep;			/* --idle-wait sleep */
	unsigned long mtu;
	unsigned long mbufs;
	unsigned long max_jobs;
	unsigned long mem_budget;	/* MiB; 0: a quarter of the host's */
	unsigned long max_job_mem;	/* MiB */
	unsigned long qpn_base;		/* RoCEv2; 0: off */
};

/* A job at most, by default: its job_add fills it in well under 1 s. */
#define DEF_MAX_JOB_MIB	256

static void
usage(FILE *f)
{
	fprintf(f,
"usage: tally-dp [EAL options] -- --addr IPV4 [options]\n"
"\n"
"  --addr IPV4        address tally-dp answers on (ARP, ICMP, tally)\n"
"  --udp-port N       first UDP port of the range, one per worker lcore\n"
"                     (default %d)\n"
"  --eth-port N       DPDK port to use (default 0)\n"
"  --admin PATH       admin socket (default /run/tally/dp.sock)\n"
"  --idle-us N        idle back-off after a run of empty polls: wait on\n"
"                     the port's socket, or sleep N us; 0 busy-polls\n"
"                     (default 0)\n"
"  --idle-wait MODE   how the idle back-off waits: socket (the port's\n"
"                     socket where one lcore polls net_af_xdp or\n"
"                     net_af_packet, a sleep of --idle-us otherwise;\n"
"                     the default) or sleep (always a sleep)\n"
"  --mtu N            port MTU, 68..9600 (default 1500; at most\n"
"                     3506 on net_af_xdp)\n"
"  --mbufs N          mbufs in each pool (default 16383; 65535 on\n"
"                     net_af_xdp, whose sent frames keep their buffers\n"
"                     until the receiver has taken them)\n"
"  --max-jobs N       jobs at once (default 256)\n"
"  --mem-budget MIB   memory all jobs' slots may take together (default:\n"
"                     a quarter of the host's memory)\n"
"  --max-job-mem MIB  memory one job's slots may take (default %d, at\n"
"                     most the budget)\n"
"  --roce-qpn-base N  RoCEv2 (UDP 4791): the worker lcores are UD QPs\n"
"                     N, N+1, ...; 2..16777214 (default 0x%x); 0: off\n"
"  -h, --help         this text\n", TALLY_UDP_PORT, DEF_MAX_JOB_MIB,
		TALLY_ROCE_QPN_BASE);
}

/* Parses a number in lo..hi into *v; 0 or -EINVAL with a message. */
static int
num(const char *flag, const char *s, unsigned long lo, unsigned long hi,
	unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(s, &end, 0);
	if (errno != 0 || *end != '\0' || *s == '\0' || *v < lo || *v > hi) {
		fprintf(stderr, "tally-dp: %s: '%s' is not a number in "
			"%lu..%lu\n", flag, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

/* --idle-wait MODE into *sleep; 0 or -EINVAL with a message. */
static int
idle_wait_arg(const char *s, int *sleep)
{
	if (strcmp(s, "socket") == 0 || strcmp(s, "sleep") == 0) {
		*sleep = strcmp(s, "sleep") == 0;
		return 0;
	}
	fprintf(stderr, "tally-dp: --idle-wait: '%s' is not socket or "
		"sleep\n", s);
	return -EINVAL;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "udp-port", required_argument, NULL, 'u' },
		{ "eth-port", required_argument, NULL, 'e' },
		{ "admin", required_argument, NULL, 's' },
		{ "idle-us", required_argument, NULL, 'i' },
		{ "idle-wait", required_argument, NULL, 'w' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "mbufs", required_argument, NULL, 'n' },
		{ "max-jobs", required_argument, NULL, 'j' },
		{ "mem-budget", required_argument, NULL, 'b' },
		{ "max-job-mem", required_argument, NULL, 'B' },
		{ "roce-qpn-base", required_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a': o->addr = optarg; break;
		case 's': o->admin = optarg; break;
		case 'u': ret = num("--udp-port", optarg, 1, 65535, &o->udp_port); break;
		case 'e': ret = num("--eth-port", optarg, 0, RTE_MAX_ETHPORTS - 1, &o->eth_port); break;
		case 'i': ret = num("--idle-us", optarg, 0, 100000, &o->idle_us); break;
		case 'w': ret = idle_wait_arg(optarg, &o->idle_sleep); break;
		case 'm': ret = num("--mtu", optarg, 68, 9600, &o->mtu); break;
		case 'n': ret = num("--mbufs", optarg, 1023, 1u << 22, &o->mbufs); break;
		case 'j': ret = num("--max-jobs", optarg, 1, 65536, &o->max_jobs); break;
		case 'b': ret = num("--mem-budget", optarg, 1, 1ul << 30, &o->mem_budget); break;
		case 'B': ret = num("--max-job-mem", optarg, 1, 1ul << 30, &o->max_job_mem); break;
		case 'q': ret = num("--roce-qpn-base", optarg, 0, TALLY_ROCE_QPN_MAX - 1, &o->qpn_base); break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			ret = -EINVAL;
		}
		if (ret != 0)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "tally-dp: unexpected argument '%s'\n",
			argv[optind]);
		return -EINVAL;
	}
	if (o->addr == NULL) {
		fprintf(stderr, "tally-dp: --addr is required\n");
		return -EINVAL;
	}
	if (inet_pton(AF_INET, o->addr, &dp.self.ip) != 1) {
		fprintf(stderr, "tally-dp: --addr: '%s' is not an IPv4 "
			"address\n", o->addr);
		return -EINVAL;
	}
	return 0;
}

/*
 * The job memory limits in bytes: --mem-budget (a quarter of the host's
 * memory when not given) and --max-job-mem (DEF_MAX_JOB_MIB), the latter
 * never above the former.
 */
static void
set_mem_limits(const struct opts *o)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	dp.mem_budget = (uint64_t)o->mem_budget << 20;
	if (dp.mem_budget == 0)
		dp.mem_budget = pages > 0 && psize > 0 ?
			(uint64_t)pages * (uint64_t)psize / 4 : 1ull << 30;
	dp.max_job_mem = (uint64_t)(o->max_job_mem != 0 ? o->max_job_mem :
		DEF_MAX_JOB_MIB) << 20;
	if (dp.max_job_mem > dp.mem_budget)
		dp.max_job_mem = dp.mem_budget;
}

/* The admin socket this process made, removed at exit if still ours. */
static char admin_path[108];
static struct stat admin_st;

static void
admin_cleanup(void)
{
	struct stat st;

	if (admin_path[0] != '\0' && lstat(admin_path, &st) == 0 &&
			st.st_ino == admin_st.st_ino &&
			st.st_dev == admin_st.st_dev)
		unlink(admin_path);
}

/*
 * Takes the admin socket, after the checks of the command line and
 * before the port is set up: a second tally-dp must not touch the port
 * of a running one. Exits with a sentence when it cannot.
 */
static int
open_admin(const char *path)
{
	int fd = tally_dp_admin_open(path);

	if (fd == -EADDRINUSE)
		rte_exit(1, "admin socket %s: another tally-dp is running and "
			"answers there; stop it first, or give this one another "
			"--admin\n", path);
	if (fd == -EEXIST)
		rte_exit(1, "admin socket %s: the path exists and is not a "
			"tally-dp socket; remove it or choose another --admin\n",
			path);
	if (fd < 0)
		rte_exit(1, "admin socket %s: %s\n", path, strerror(-fd));
	if (lstat(path, &admin_st) == 0) {
		snprintf(admin_path, sizeof(admin_path), "%s", path);
		atexit(admin_cleanup);
	}
	return fd;
}

static void
on_signal(int sig)
{
	(void)sig;
	dp.stop = 1;
}

/* Per worker lcore: index, queues, ring, neighbour cache. */
static int
setup_lcores(void)
{
	unsigned int lcore_id;
	uint16_t i = 0;

	RTE_LCORE_FOREACH_WORKER(lcore_id) {
		struct tally_dp_lcore *lc;

		if (i == TALLY_DP_MAX_WORKERS)
			break;
		lc = &dp.lcores[i];
		lc->dp = &dp;
		lc->lcore_id = lcore_id;
		lc->index = i;
		lc->neigh = tally_net_neigh_create(1024,
			(int)rte_lcore_to_socket_id(lcore_id));
		if (lc->neigh == NULL || tally_dp_lcore_init(lc) != 0)
			return -ENOMEM;
		i++;
	}
	dp.nworkers = i;
	return i > 0 ? 0 : -ENOENT;
}

/* After the port is up: queues and, for software dispatch, rings. */
static int
setup_queues(void)
{
	for (uint16_t i = 0; i < dp.nworkers; i++) {
		struct tally_dp_lcore *lc = &dp.lcores[i];
		char name[RTE_RING_NAMESIZE];

		lc->txq = i;
		lc->rxq = i < dp.nb_rxq ? i : UINT16_MAX;
		/* rte_flow steers UDP ports, never RoCEv2's QPNs. */
		if ((dp.steer_flow && dp.self.qpn_base == 0) ||
				dp.nworkers == 1)
			continue;
		snprintf(name, sizeof(name), "tally_lc%u", i);
		lc->ring = rte_ring_create(name, 4096,
			(int)rte_lcore_to_socket_id(lc->lcore_id), RING_F_SC_DEQ);
		if (lc->ring == NULL)
			return -rte_errno;
	}
	return 0;
}

static void
teardown(void)
{
	for (uint16_t i = 0; i < dp.nworkers; i++) {
		struct tally_dp_lcore *lc = &dp.lcores[i];
		void *m = NULL;

		while (lc->ring != NULL && rte_ring_dequeue(lc->ring, &m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(lc->ring);
		tally_dp_lcore_fini(lc);
		tally_net_neigh_destroy(lc->neigh);
	}
}

/*
 * RoCEv2's QPNs (one a worker lcore, below the multicast QPN) and its
 * UDP port (outside tally's range); exits with a sentence when they do
 * not fit.
 */
static void
check_roce(const struct opts *o)
{
	dp.self.qpn_base = (uint32_t)o->qpn_base;
	if (o->qpn_base == 0)
		return;
	if (o->qpn_base < 2 || o->qpn_base + dp.nworkers > TALLY_ROCE_QPN_MAX)
		rte_exit(1, "--roce-qpn-base %#lx: %u QPNs must lie in "
			"2..0xfffffe (0 turns RoCEv2 off)\n", o->qpn_base,
			dp.nworkers);
	if (o->udp_port <= TALLY_ROCE_UDP_PORT &&
			o->udp_port + dp.nworkers > TALLY_ROCE_UDP_PORT)
		rte_exit(1, "--udp-port %lu: the range holds RoCEv2's port "
			"%d; move it, or turn RoCEv2 off (--roce-qpn-base 0)\n",
			o->udp_port, TALLY_ROCE_UDP_PORT);
}

/* What a path of tally's own folding is, for the log; "" for DPDK's. */
static const char *
icrc_own(const char *path)
{
	if (strcmp(path, "vpclmul16") == 0)
		return " (sixteen-lane AVX-512 VPCLMULQDQ folding from 256 "
			"bytes, four-lane PCLMULQDQ from 64; rte_net_crc sse42 "
			"under 16 bytes)";
	if (strcmp(path, "clmul4") == 0)
		return " (four-lane PCLMULQDQ folding; rte_net_crc sse42 "
			"under 16 bytes)";
	return "";
}

/*
 * Says which rte_net_crc path takes the ICRCs, and how fast it runs
 * here (64 KiB, 16 times): a scalar path is a tenth of the vector's.
 */
static void
announce_icrc(void)
{
	static uint8_t buf[65536];
	const char *path = tally_icrc_init();
	uint64_t t0, t1;
	volatile uint32_t crc = 0;

	if (dp.self.qpn_base == 0) {
		DP_LOG(INFO, "RoCEv2: off (--roce-qpn-base 0)");
		return;
	}
	t0 = rte_get_tsc_cycles();
	for (int i = 0; i < 16; i++)
		crc ^= tally_crc32(buf, sizeof(buf));
	t1 = rte_get_tsc_cycles();
	DP_LOG(INFO, "RoCEv2: UD QPNs %#x..%#x on UDP %d, P_Key %#x, path "
		"MTU %u; ICRC by %s%s%s, %.1f GB/s", dp.self.qpn_base,
		dp.self.qpn_base + dp.nworkers - 1, TALLY_ROCE_UDP_PORT,
		TALLY_ROCE_PKEY_FULL, tally_roce_pmtu(dp.mtu),
		icrc_own(path) ? "" : "rte_net_crc ", path, icrc_own(path),
		t1 > t0 ? 16.0 * sizeof(buf) * (double)rte_get_tsc_hz() /
		(double)(t1 - t0) / 1e9 : 0.0);
}

/* Sets up and says how the worker lcores wait when idle (idle.c). */
static void
announce_idle(const struct opts *o)
{
	int fd = tally_dp_idle_init(&dp, !o->idle_sleep);

	if (dp.idle_us == 0)
		DP_LOG(INFO, "idle: busy poll (--idle-us 0)");
	else if (fd >= 0)
		DP_LOG(INFO, "idle: wait on the port's socket (fd %d) after "
			"empty polls", fd);
	else
		DP_LOG(INFO, "idle: sleep %u us after empty polls (%s)",
			dp.idle_us, fd == -ENOTSUP ? "--idle-wait sleep" :
			fd == -EXDEV ? "several lcores or queues" :
			"no socket of the port's found");
}

static void
announce(const struct opts *o)
{
	struct rte_eth_dev_info info;
	char mac[RTE_ETHER_ADDR_FMT_SIZE];

	rte_eth_dev_info_get(dp.port_id, &info);
	rte_ether_format_addr(mac, sizeof(mac), &dp.self.mac);
	DP_LOG(INFO, "port %u (%s) %s, %s UDP %lu..%lu, mtu %lu",
		dp.port_id, info.driver_name, mac, o->addr, o->udp_port,
		o->udp_port + dp.nworkers - 1, o->mtu);
	DP_LOG(INFO, "%u worker lcore(s), %u rx queue(s); steering: %s",
		dp.nworkers, dp.nb_rxq, dp.steer_flow ?
		"rte_flow (UDP port -> queue)" : dp.nworkers == 1 ?
		"none needed (one worker)" :
		"software dispatch over rte_ring (no rte_flow on this port)");
	DP_LOG(INFO, "results: %s; %lu mbufs a pool; admin socket %s",
		dp.tx_chains ? "shared payload, chained per member" :
		"linearized per member (port sends no chains)", o->mbufs,
		o->admin);
	announce_idle(o);
	DP_LOG(INFO, "jobs: at most %u, %llu MiB of slots in all, %llu MiB "
		"each", dp.max_jobs, (unsigned long long)(dp.mem_budget >> 20),
		(unsigned long long)(dp.max_job_mem >> 20));
	announce_icrc();
}

int
main(int argc, char **argv)
{
	struct opts o = {
		.admin = "/run/tally/dp.sock", .udp_port = TALLY_UDP_PORT,
		.mtu = 1500, .mbufs = 0, .max_jobs = 256,
		.qpn_base = TALLY_ROCE_QPN_BASE,
	};
	unsigned int lcore_id;
	int ret, afd;

	ret = rte_eal_init(argc, argv);
	if (ret < 0)
		rte_exit(2, "invalid EAL arguments (see --help of DPDK's EAL)\n");
	argc -= ret;
	argv += ret;
	argv[0] = (char *)"tally-dp";
	if (parse_args(argc, argv, &o) != 0) {
		usage(stderr);
		rte_eal_cleanup();
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	dp.port_id = (uint16_t)o.eth_port;
	dp.self.port = htons((uint16_t)o.udp_port);
	dp.idle_us = (unsigned int)o.idle_us;
	dp.max_jobs = (unsigned int)o.max_jobs;
	set_mem_limits(&o);
	if (rte_eth_dev_count_avail() == 0)
		rte_exit(1, "no DPDK port: bind a NIC, or give one with "
			"--vdev (e.g. net_af_packet0,iface=eth1)\n");
	if (!rte_eth_dev_is_valid_port(dp.port_id))
		rte_exit(1, "--eth-port %u: no such DPDK port\n", dp.port_id);
	if (setup_lcores() != 0)
		rte_exit(1, "need at least one worker lcore besides the main "
			"one (e.g. -l 0,1)\n");
	dp.self.nports = dp.nworkers;
	if (o.udp_port + dp.nworkers - 1 > 65535)
		rte_exit(1, "--udp-port %lu: no room for %u ports\n",
			o.udp_port, dp.nworkers);
	check_roce(&o);
	{
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(dp.port_id, &info) != 0)
			info.driver_name = NULL;
		if (info.driver_name != NULL &&
				info.max_tx_queues < dp.nworkers)
			rte_exit(1, "port %u has %u tx queue(s); %u worker "
				"lcores need one each (af_packet: qpairs=%u)\n",
				dp.port_id, info.max_tx_queues, dp.nworkers,
				dp.nworkers);
		/*
		 * net_af_xdp receives into the pool, and a frame it sent
		 * holds its buffer until the receiver has taken it (on a
		 * veth: through the peer's queues and socket); its pool is
		 * laid out by xdp_pool.c.
		 */
		if (o.mbufs == 0)
			o.mbufs = info.driver_name != NULL &&
				strstr(info.driver_name, "af_xdp") != NULL ?
				65535 : 16383;
	}
	afd = open_admin(o.admin);
	ret = tally_dp_port_init(&dp, (unsigned int)o.mbufs, (uint16_t)o.mtu);
	if (ret == -EMSGSIZE)
		rte_exit(1, "--mtu %lu: port %u (net_af_xdp) carries at most "
			"MTU %u (a 4 KiB mbuf's data room less %u bytes of "
			"mbuf and %u of XDP headroom); give --mtu %u or less, "
			"or use net_pcap or a NIC for larger frames\n", o.mtu,
			dp.port_id, dp.max_mtu, RTE_PKTMBUF_HEADROOM,
			TALLY_DP_XDP_HEADROOM, dp.max_mtu);
	if (ret != 0)
		rte_exit(1, "port %u: %s\n", dp.port_id, strerror(-ret));
	if (setup_queues() != 0 || tally_dp_jobs_init(&dp) != 0)
		rte_exit(1, "out of memory for rings or jobs\n");
	if (tally_dp_telemetry_init(&dp) != 0)
		DP_LOG(WARNING, "telemetry commands not registered");
	announce(&o);

	for (uint16_t i = 0; i < dp.nworkers; i++)
		rte_eal_remote_launch(tally_dp_lcore_main, &dp.lcores[i],
			dp.lcores[i].lcore_id);
	DP_LOG(INFO, "running");
	ret = tally_dp_admin_serve(&dp, afd);
	dp.stop = 1;
	RTE_LCORE_FOREACH_WORKER(lcore_id)
		rte_eal_wait_lcore(lcore_id);
	DP_LOG(INFO, "stopping");
	close(afd);
	admin_cleanup();
	admin_path[0] = '\0';
	tally_dp_port_close(&dp);
	teardown();
	tally_dp_jobs_fini(&dp);
	rte_eal_cleanup();
	return ret == 0 ? 0 : 1;
}
