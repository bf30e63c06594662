/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench allreduce: one worker's side of a real allreduce through a
 * dataplane, with libtally over kernel UDP or AF_XDP. Run one per rank (end-to-end
 * tests, the quickstart, benchmarks).
 *
 * Rank r's tensor is generated from (seed, r), so every rank can also
 * generate every other rank's tensor and compute the reference result
 * itself: a wrapping sum for i32; for f32 the shared-scale procedure
 * (global max |x| over all tensors, exponent, sum of encodings, decode).
 * It runs --iters allreduces, restoring its input before each and timing
 * each, then computes the reference (after the timed part, so that the
 * ranks start their allreduces together) and checks every iteration's
 * result against it. With --scale-exp, the f32 results are also held to
 * the documented precision of <tally/fixp.h> against the exact sums.
 * With --cuda the tensor lives in GPU memory and goes through
 * tally_allreduce_cuda() (<tally/tally_cuda.h>): the same references
 * check the device path's result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/fixp.h>
#include <tally/fixp16.h>
#include <tally/proto.h>
#include <tally/tally.h>
#include <tally/tally_cuda.h>

#include "bench.h"
#include "codec_ref.h"
#include "cudabuf.h"
#include "../gpu/fixp_bound.h"

#define BENCH_EXIT_ERROR	3	/* an allreduce failed */
#define DEFAULT_SIZE		(64ull << 20)
#define MAX_SIZE		(8ull << 30)	/* 2^31 elements */
#define MAX_ITERS		100000
#define BLOCK			65536	/* elements generated at a time */

#define MAX_MORE_SHARDS	7	/* --shard: dataplanes after --dp's */

struct ar_opts {
	char dp_addr[INET_ADDRSTRLEN];
	uint16_t dp_port;
	uint16_t dp_nports;
	struct {			/* --shard: a sharded job's others */
		char addr[INET_ADDRSTRLEN];
		uint16_t port;
		uint16_t nports;
	} more[MAX_MORE_SHARDS];
	unsigned int nmore;
	char bind_addr[INET_ADDRSTRLEN];
	int have_bind;
	uint16_t bind_port;
	char group[INET_ADDRSTRLEN];	/* multicast results; "" = unicast */
	unsigned long job;
	uint64_t token;
	unsigned long rank;
	unsigned long world;
	unsigned long long size;	/* bytes */
	int f32;
	int h16;			/* --type bf16 or f16 */
	enum tally_dtype dt;		/* --type */
	unsigned int esz;		/* bytes an element */
	unsigned long lanes;		/* --lanes: bf16/f16 lanes, 0 = rule */
	unsigned long iters;
	unsigned long elems;
	unsigned long window;
	unsigned long timeout_ms;
	unsigned long long seed;
	int json;
	unsigned int given;		/* GIVEN_* flags seen */
	char url[1024];			/* tally://...: join through tallyd */
	char jtoken[65];		/* ... with the job's 64-hex token */
	const char *token_file;		/* --token-file; NULL: TALLY_TOKEN */
	const char *ca;			/* --ca: tallyd's CA (PEM) */
	const char *codec;		/* --codec SPEC (with --dp) */
	int narrow;			/* --narrow: the job's results are */
	unsigned long reopen;		/* joins again after a failure */
	double noise;			/* f32 tensors: a shared one plus
					 * noise x the rank's own; < 0: the
					 * rank's own alone */
	unsigned long pause_ms;		/* between iterations */
	unsigned long watch_pid;	/* --watch-pid: its CPU a call */
	int no_barrier;			/* time without a barrier first */
	int have_scale;			/* --scale-exp given: */
	int scale_exp;			/* f32 tensors times 2^scale_exp */
	int vary;			/* iteration k's tensors: seed + k */
	unsigned long tier;		/* --tier PER: a leaf of PER ranks
					 * of a two-tier job; --rank and
					 * --world are then the total's */
	int auth;			/* keys given: an authenticated job */
	int cuda;			/* --cuda: the tensor in GPU memory */
	struct tally_auth_keys keys;	/* $TALLY_AUTH_KEYS */
	const char *transport;		/* --transport: udp, xdp, ring */
	char *ring_list;		/* --ring: its copy, cut at commas */
	const char *ring[TALLY_MAX_WORKERS]; /* --ring: the members' */
	unsigned int nring;
	const char *ifname;		/* --ifname (xdp) */
	unsigned long queue;		/* --queue (xdp) */
	int op;				/* --op: OP_* */
};

/* --op: the collective timed (docs/collectives.md). */
enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BROADCAST };
static const char *const op_names[] = { "allreduce", "reduce_scatter",
	"allgather", "broadcast" };

#define GIVEN_DP	1u
#define GIVEN_JOB	2u
#define GIVEN_TOKEN	4u
#define GIVEN_RANK	8u
#define GIVEN_WORLD	16u
#define GIVEN_NEEDED	31u

/* What a run found. */
struct ar_run {
	size_t n;
	void *buf;		/* the tensor, reduced in place */
	void *input;		/* rank's input; later the reference */
	void *out;		/* --op reduce_scatter: this rank's shard */
	double *secs;		/* [iters] */
	struct bench_cpu *cpu;	/* [iters]: CPU during each timed call */
	uint64_t *digest;	/* [iters] */
	uint64_t ref_digest;
	double best;
	size_t bad_at;		/* first mismatch of the last iteration */
	unsigned long bad_iter;	/* iterations that differ, 0 = none */
	double worst, bound;	/* --scale-exp: error / max |x|, its bound */
	char check[160];
	struct tally_ctx_stats st;
	struct tally_ctx_info info;	/* the context's job and codec */
	struct bench_cuda *dev;	/* --cuda: the tensor on the device */
};

static const struct option long_opts[] = {
	{ "dp", required_argument, NULL, 'd' },
	{ "shard", required_argument, NULL, 'H' },
	{ "bind", required_argument, NULL, 'b' },
	{ "group", required_argument, NULL, 'g' },
	{ "job", required_argument, NULL, 'j' },
	{ "token", required_argument, NULL, 't' },
	{ "token-file", required_argument, NULL, 'K' },
	{ "ca", required_argument, NULL, 'A' },
	{ "rank", required_argument, NULL, 'r' },
	{ "world", required_argument, NULL, 'w' },
	{ "size", required_argument, NULL, 's' },
	{ "type", required_argument, NULL, 'y' },
	{ "lanes", required_argument, NULL, 'L' },
	{ "iters", required_argument, NULL, 'i' },
	{ "elems", required_argument, NULL, 'e' },
	{ "window", required_argument, NULL, 'W' },
	{ "timeout-ms", required_argument, NULL, 'T' },
	{ "seed", required_argument, NULL, 'S' },
	{ "json", no_argument, NULL, 'J' },
	{ "url", required_argument, NULL, 'U' },
	{ "reopen", required_argument, NULL, 'R' },
	{ "pause-ms", required_argument, NULL, 'P' },
	{ "watch-pid", required_argument, NULL, 'p' },
	{ "codec", required_argument, NULL, 'C' },
	{ "narrow", no_argument, NULL, 'N' },
	{ "noise", required_argument, NULL, 'O' },
	{ "no-barrier", no_argument, NULL, 'B' },
	{ "scale-exp", required_argument, NULL, 'X' },
	{ "vary", no_argument, NULL, 'V' },
	{ "tier", required_argument, NULL, 'E' },
	{ "cuda", no_argument, NULL, 'G' },
	{ "transport", required_argument, NULL, 'x' },
	{ "ifname", required_argument, NULL, 'I' },
	{ "queue", required_argument, NULL, 'Q' },
	{ "op", required_argument, NULL, 'M' },
	{ "ring", required_argument, NULL, 'Y' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tally-bench allreduce --dp IP[:PORT[/NPORTS]] --job N "
		"--token-file F\n"
		"                             --rank R --world W [options]\n"
		"       tally-bench allreduce --url tally://HOST[:PORT]/JOB "
		"--token-file F\n"
		"                             --rank R --world W [options]\n\n"
		"One worker of an allreduce through a tally dataplane (libtally,\n"
		"kernel UDP or AF_XDP); run one per rank. Checks the result against a\n"
		"reference computed from every rank's generated tensor. The\n"
		"token comes from --token-file or TALLY_TOKEN, never the\n"
		"command line (ps shows it to every user).\n\n"
		"  --dp IP[:PORT[/NPORTS]]  dataplane address, first UDP port "
		"(default %u)\n"
		"                           and ports in its range (default 1)\n"
		"  --shard IP[:PORT[/NPORTS]]  one more dataplane of a job\n"
		"                           sharded over --dp's and these\n"
		"                           (up to 7; slot s to the (s mod H)th)\n"
		"  --bind IP[:PORT]         local address (default any, "
		"ephemeral port)\n"
		"  --group IP               the job's results come to this\n"
		"                           multicast group (on the --bind port)\n"
		"  --job N                  job id, 0..65535\n"
		"  --token-file FILE        the file holding the token: 16 hex "
		"digits\n"
		"                           (the wire token) with --dp, the "
		"job's 64\n"
		"                           with --url; without it, "
		"$TALLY_TOKEN\n"
		"  --url URL                join the job through tallyd "
		"(tally_open()):\n"
		"                           tally://HOST[:PORT]/JOB[?ca=FILE]"
		"[&tls=off]\n"
		"  --ca FILE                CA certificates (PEM) for tallyd's "
		"TLS\n"
		"                           certificate (default: the URL's "
		"ca=,\n"
		"                           $TALLY_CA, the system's store)\n"
		"  --reopen N               after a failed allreduce, join "
		"again and\n"
		"                           redo it, up to N times (--url "
		"only)\n"
		"  --pause-ms N             sleep between iterations\n"
		"  --watch-pid PID          also count PID's CPU seconds "
		"during each\n"
		"                           timed allreduce (--json: "
		"watch_cpu_s)\n"
		"  --no-barrier             start each timed allreduce "
		"without a\n"
		"                           barrier (a 1-element allreduce) "
		"first\n"
		"  --codec SPEC             f32 through this codec "
		"(<tally/codec.h>;\n"
		"                           with --url the job's codec "
		"applies)\n"
		"  --narrow                 the job returns narrow sums "
		"(with --dp)\n"
		"  --noise S                f32 tensors as data-parallel "
		"workers'\n"
		"                           gradients: one shared tensor plus "
		"S times\n"
		"                           the rank's own (default: the "
		"rank's own)\n"
		"  --scale-exp P            f32 tensors times 2^P (-149..122), "
		"and the\n"
		"                           results held to the exact sums "
		"within\n"
		"                           fixed point's documented bound\n"
		"  --rank R                 this worker's rank, 0..W-1\n"
		"  --world W                members of the job, 1..%u (up "
		"to 4096: --tier,\n"
		"                           or --url of a two-tier tree)\n"
		"  --size BYTES             tensor size, suffix K, M or G "
		"(default 64M)\n"
		"  --type f32|i32|bf16|f16  element type (default f32); bf16 "
		"and f16\n"
		"                           go through tally_allreduce_typed()\n"
		"  --lanes 0|16|32          bf16/f16 wire lanes (0: the rule of\n"
		"                           <tally/fixp16.h>)\n"
		"  --op OP                  allreduce (default), reduce_scatter\n"
		"                           (--size is what each rank sends),\n"
		"                           allgather (what each gets), broadcast\n"
		"                           from rank 0; host memory, fixp or i32\n"
		"                           (reduce_scatter: or q16, q8, q4)\n"
		"  --iters N                timed allreduces (default 3)\n"
		"  --elems N                elements a packet (default %u)\n"
		"  --window N               slots in flight (default 64)\n"
		"  --timeout-ms N           give up after N ms without a "
		"result (default 5000)\n"
		"  --seed S                 seed of the tensors (default 1)\n"
		"  --vary                   new tensors every iteration "
		"(seed + k)\n"
		"  --tier PER               --dp is the leaf of a two-tier "
		"job whose leaves\n"
		"                           have PER ranks each: this "
		"worker is rank\n"
		"                           R %% PER of leaf R / PER, and the "
		"scale is for W\n"
		"                           (up to 64 x 64; allreduce, f32 or "
		"i32, with --dp)\n"
		"  --cuda                   the tensor in GPU memory (device "
		"0), through\n"
		"                           tally_allreduce_cuda() on a "
		"stream of its own\n"
		"  --transport udp|xdp      kernel UDP (default) or AF_XDP "
		"(root)\n"
		"  --ifname IF              xdp: the interface (default: "
		"the route's)\n"
		"  --queue N                xdp: its receive queue (default "
		"0)\n"
		"  --ring IP:PORT,...       transport ring (the ring fallback, "
		"no\n"
		"                           dataplane): the members' ring "
		"listeners\n"
		"                           in rank order (this rank's its "
		"own); the\n"
		"                           ring's key comes from the token\n"
		"  --json                   print one JSON object\n"
		"  -h, --help               this text\n\n"
		"exit: 0 ok, 1 result differs from the reference, 2 usage, "
		"3 allreduce error\n",
		TALLY_UDP_PORT, TALLY_MAX_WORKERS, TALLY_DEFAULT_ELEMS);
}

/* --ring IP:PORT,...: the list kept (cut in place) for the context. */
static int
parse_ring(struct ar_opts *o, const char *arg)
{
	char *save = NULL, *s;

	free(o->ring_list);
	o->ring_list = strdup(arg);
	o->nring = 0;
	for (s = strtok_r(o->ring_list, ",", &save); s != NULL;
			s = strtok_r(NULL, ",", &save)) {
		if (o->nring == TALLY_MAX_WORKERS) {
			fprintf(stderr, "--ring: at most %u members\n",
				TALLY_MAX_WORKERS);
			return -1;
		}
		o->ring[o->nring++] = s;
	}
	o->transport = "ring";
	return 0;
}

/* Parses "IP" or "IP:PORT" (port 0..65535) of flag name. */
static int
parse_host(const char *name, const char *arg, char *ip, uint16_t *port,
	const char **rest)
{
	const char *colon = strchr(arg, ':');
	size_t len = colon != NULL ? (size_t)(colon - arg) : strlen(arg);
	struct in_addr a;
	unsigned long v;
	char *end;

	if (len >= INET_ADDRSTRLEN)
		goto bad;
	memcpy(ip, arg, len);
	ip[len] = '\0';
	if (inet_pton(AF_INET, ip, &a) != 1)
		goto bad;
	*rest = "";
	if (colon == NULL)
		return 0;
	errno = 0;
	v = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || errno != 0 || v > 65535 ||
			(*end != '\0' && *end != '/'))
		goto bad;
	*port = (uint16_t)v;
	*rest = end;
	return 0;
bad:
	fprintf(stderr, "--%s: '%s' is not IP[:PORT] with an IPv4 address\n",
		name, arg);
	return -1;
}

/* --shard IP[:PORT[/NPORTS]]: one more dataplane of a sharded job. */
static int
parse_shard(const char *arg, struct ar_opts *o)
{
	const char *rest;
	unsigned long v;

	if (o->nmore == MAX_MORE_SHARDS) {
		fprintf(stderr, "--shard: at most %d\n", MAX_MORE_SHARDS);
		return -1;
	}
	o->more[o->nmore].port = TALLY_UDP_PORT;
	o->more[o->nmore].nports = 1;
	if (parse_host("shard", arg, o->more[o->nmore].addr,
			&o->more[o->nmore].port, &rest) != 0)
		return -1;
	if (*rest != '\0') {
		if (bench_parse_uint("shard NPORTS", rest + 1, 1, 1024, &v))
			return -1;
		o->more[o->nmore].nports = (uint16_t)v;
	}
	o->nmore++;
	return 0;
}

static int
parse_dp(const char *arg, struct ar_opts *o)
{
	const char *rest;
	unsigned long v;

	if (parse_host("dp", arg, o->dp_addr, &o->dp_port, &rest) != 0)
		return -1;
	if (*rest == '\0')
		return 0;
	if (bench_parse_uint("dp NPORTS", rest + 1, 1, 1024, &v) != 0)
		return -1;
	o->dp_nports = (uint16_t)v;
	return 0;
}

static int
parse_token(const char *arg, uint64_t *token)
{
	const char *p = arg;
	uint64_t v = 0;
	int i;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (i = 0; p[i] != '\0'; i++) {
		int c = p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
		v = v << 4 | (uint64_t)d;
	}
	if (i != 16 || p[i] != '\0') {
		fprintf(stderr, "the token is not 16 (--dp) or 64 (--url) hex "
			"digits\n");
		return -1;
	}
	*token = v;
	return 0;
}

/*
 * BYTES with an optional K, M or G (powers of 1024), a multiple of 4; 0
 * is an empty tensor (an allreduce that sends nothing, between barriers).
 */
static int
parse_size(const char *arg, unsigned long long *out)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (arg[0] < '0' || arg[0] > '9' || errno != 0)
		goto bad;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	}
	if (*end == 'i' && end[1] == 'B' && mul > 1)
		end += 2;
	if (*end != '\0' || v > MAX_SIZE / mul ||
			(v * mul) % 4 != 0)
		goto bad;
	*out = v * mul;
	return 0;
bad:
	fprintf(stderr, "--size: '%s' is not a size of 0..8G, a multiple "
		"of 4 (suffix K, M or G)\n", arg);
	return -1;
}

/* --type: f32, i32, bf16 or f16 into o. Returns 0 or -1. */
static int
parse_type(const char *arg, struct ar_opts *o)
{
	static const char *const names[] = { "f32", "i32", "bf16", "f16" };
	static const enum tally_dtype dts[] = { TALLY_DT_F32, TALLY_DT_I32,
		TALLY_DT_BF16, TALLY_DT_F16 };

	for (int k = 0; k < 4; k++)
		if (strcmp(arg, names[k]) == 0) {
			o->dt = dts[k];
			o->f32 = k == 0;
			o->h16 = k >= 2;
			o->esz = k >= 2 ? 2 : 4;
			return 0;
		}
	fprintf(stderr, "--type: '%s' is not f32, i32, bf16 or f16\n", arg);
	return -1;
}

/* One flag with a value into o; -1 when the value is bad. */
static int
parse_value(int c, const char *arg, struct ar_opts *o)
{
	const char *rest;
	char *end;

	switch (c) {
	case 'd':
		o->given |= GIVEN_DP;
		return parse_dp(arg, o);
	case 'H':
		return parse_shard(arg, o);
	case 'b':
		o->have_bind = 1;
		if (parse_host("bind", arg, o->bind_addr, &o->bind_port,
				&rest) != 0)
			return -1;
		if (*rest == '\0')
			return 0;
		fprintf(stderr, "--bind: '%s' is not IP[:PORT]\n", arg);
		return -1;
	case 'g':
		if (snprintf(o->group, sizeof(o->group), "%s", arg) >=
				(int)sizeof(o->group)) {
			fprintf(stderr, "--group: '%s' is not an IPv4 "
				"address\n", arg);
			return -1;
		}
		return 0;
	case 'j':
		o->given |= GIVEN_JOB;
		return bench_parse_uint("job", arg, 0, 65535, &o->job);
	case 't':
		fprintf(stderr, "--token: a token on the command line is "
			"readable by every user of this host (ps); put it in a "
			"file for --token-file FILE (mode 0600), or in "
			"TALLY_TOKEN\n");
		return -1;
	case 'K':
		o->token_file = arg;
		return 0;
	case 'A':
		o->ca = arg;
		return 0;
	case 'U':
		if (snprintf(o->url, sizeof(o->url), "%s", arg) >=
				(int)sizeof(o->url)) {
			fprintf(stderr, "--url: too long\n");
			return -1;
		}
		o->given |= GIVEN_DP | GIVEN_JOB;
		return 0;
	case 'R':
		return bench_parse_uint("reopen", arg, 0, 1000, &o->reopen);
	case 'B':
		o->no_barrier = 1;
		return 0;
	case 'G':
		o->cuda = 1;
		return 0;
	case 'x':
		o->transport = arg;
		return 0;
	case 'Y':
		return parse_ring(o, arg);
	case 'I':
		o->ifname = arg;
		return 0;
	case 'Q':
		return bench_parse_uint("queue", arg, 0, 65535, &o->queue);
	case 'V':
		o->vary = 1;
		return 0;
	case 'E':
		return bench_parse_uint("tier", arg, 1, TALLY_MAX_WORKERS,
			&o->tier);
	case 'O': {
		char *tail;

		errno = 0;
		o->noise = strtod(arg, &tail);
		if (*arg == '\0' || *tail != '\0' || errno != 0 ||
				!(o->noise >= 0) || o->noise > 1e6) {
			fprintf(stderr, "--noise: '%s' is not a number in "
				"[0, 1e6]\n", arg);
			return -1;
		}
		return 0;
	}
	case 'P':
		return bench_parse_uint("pause-ms", arg, 0, 3600000,
			&o->pause_ms);
	case 'p':
		return bench_parse_uint("watch-pid", arg, 1, 4194304,
			&o->watch_pid);
	case 'X': {
		long v;
		char *tail;

		errno = 0;
		v = strtol(arg, &tail, 10);
		if (*arg == '\0' || *tail != '\0' || errno != 0 || v < -149 ||
				v > 122) {
			fprintf(stderr, "--scale-exp: '%s' is not an integer "
				"in [-149, 122]\n", arg);
			return -1;
		}
		o->have_scale = 1;
		o->scale_exp = (int)v;
		return 0;
	}
	case 'C': {
		struct tally_codec spec;
		char why[160];

		if (tally_codec_parse(arg, &spec, why, sizeof(why)) != 0) {
			fprintf(stderr, "--codec: %s\n", why);
			return -1;
		}
		o->codec = arg;
		return 0;
	}
	case 'r':
		o->given |= GIVEN_RANK;
		return bench_parse_uint("rank", arg, 0,
			TALLY_FIXP_TIER_WORLD_MAX - 1, &o->rank);
	case 'w':
		o->given |= GIVEN_WORLD;
		return bench_parse_uint("world", arg, 1,
			TALLY_FIXP_TIER_WORLD_MAX, &o->world);
	case 's':
		return parse_size(arg, &o->size);
	case 'M':
		for (o->op = 0; o->op < 4; o->op++)
			if (strcmp(arg, op_names[o->op]) == 0)
				return 0;
		fprintf(stderr, "--op: '%s' is not allreduce, reduce_scatter, "
			"allgather or broadcast\n", arg);
		return -1;
	case 'y':
		return parse_type(arg, o);
	case 'L':
		if (strcmp(arg, "0") != 0 && strcmp(arg, "16") != 0 &&
				strcmp(arg, "32") != 0) {
			fprintf(stderr, "--lanes: '%s' is not 0, 16 or 32\n",
				arg);
			return -1;
		}
		o->lanes = strtoul(arg, NULL, 10);
		return 0;
	case 'i':
		return bench_parse_uint("iters", arg, 1, MAX_ITERS, &o->iters);
	case 'e':
		return bench_parse_uint("elems", arg, 1, TALLY_MAX_ELEMS,
			&o->elems);
	case 'W':
		return bench_parse_uint("window", arg, 1, 32768, &o->window);
	case 'T':
		return bench_parse_uint("timeout-ms", arg, 1, 3600000,
			&o->timeout_ms);
	case 'S':
		errno = 0;
		o->seed = strtoull(arg, &end, 0);
		if (arg[0] >= '0' && arg[0] <= '9' && *end == '\0' &&
				errno == 0)
			return 0;
		fprintf(stderr, "--seed: '%s' is not a number\n", arg);
		return -1;
	}
	return -1;
}

/*
 * An authenticated job's keys for this rank (up, down and result, 96 hex
 * digits), from TALLY_AUTH_KEYS, never the command line; unset or
 * empty: a plain job. 0, or -1 with a message.
 */
static int
read_auth_keys(struct ar_opts *o)
{
	const char *s = getenv("TALLY_AUTH_KEYS");
	uint8_t *k = (uint8_t *)&o->keys;

	if (s == NULL || *s == '\0')
		return 0;
	if (strlen(s) != 2 * sizeof(o->keys) ||
			strspn(s, "0123456789abcdefABCDEF") !=
			2 * sizeof(o->keys)) {
		fprintf(stderr, "TALLY_AUTH_KEYS: %zu hex digits\n",
			2 * sizeof(o->keys));
		return -1;
	}
	for (size_t i = 0; i < sizeof(o->keys); i++) {
		char b[3] = { s[2 * i], s[2 * i + 1], 0 };

		k[i] = (uint8_t)strtoul(b, NULL, 16);
	}
	o->auth = 1;
	return 0;
}

/*
 * The token, from --token-file or TALLY_TOKEN: the job's 64 hex digits
 * (for --url) or a wire token's 16. None is fine here (the caller says
 * what is missing); -1 for one that cannot be read or parsed.
 */
static int
read_token(struct ar_opts *o)
{
	char t[80];
	int rc = bench_token_read(o->token_file, t, sizeof(t));

	if (rc == -ENOENT && o->token_file == NULL)
		return 0;
	if (rc != 0)
		return -1;
	o->given |= GIVEN_TOKEN;
	if (strlen(t) == 64 && strspn(t, "0123456789abcdefABCDEF") == 64) {
		strcpy(o->jtoken, t);
		return 0;
	}
	return parse_token(t, &o->token);
}

/* Whether spec is a q16, q8 or q4 codec (what a reduce-scatter takes). */
static int
quant_spec(const char *spec)
{
	struct tally_codec c;
	char why[128];

	return tally_codec_parse(spec, &c, why, sizeof(why)) == 0 &&
		(c.kind == TALLY_CODEC_Q16 || c.kind == TALLY_CODEC_Q8 ||
		c.kind == TALLY_CODEC_Q4);
}

/*
 * Fills o from the command line. Returns 0 to run, 1 when help was asked
 * for, -1 on bad usage (the reason and the usage already on stderr).
 */
static int
parse_opts(int argc, char **argv, struct ar_opts *o)
{
	int c;

	*o = (struct ar_opts){ .dp_port = TALLY_UDP_PORT, .dp_nports = 1,
		.size = DEFAULT_SIZE, .f32 = 1, .iters = 3, .seed = 1,
		.noise = -1, .dt = TALLY_DT_F32, .esz = 4 };
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		} else if (c == 'J') {
			o->json = 1;
		} else if (c == 'N') {
			o->narrow = 1;
		} else if (c == '?' || parse_value(c, optarg, o) != 0) {
			goto bad;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		goto bad;
	}
	if (read_token(o) != 0 || read_auth_keys(o) != 0)
		goto bad;
	if ((o->given & GIVEN_NEEDED) != GIVEN_NEEDED) {
		fprintf(stderr, "--dp, --job, a token (--token-file or "
			"TALLY_TOKEN), --rank and --world are needed\n");
		goto bad;
	}
	if (o->rank >= o->world) {
		fprintf(stderr, "--rank %lu is not below --world %lu\n",
			o->rank, o->world);
		goto bad;
	}
	/* With --url, tallyd's two-tier tree places the rank on a leaf. */
	if (o->tier == 0 && o->url[0] == '\0' &&
			o->world > TALLY_MAX_WORKERS) {
		fprintf(stderr, "--world %lu: above %u needs --tier or --url "
			"(a two-tier job)\n", o->world, TALLY_MAX_WORKERS);
		goto bad;
	}
	if (o->tier != 0 && (o->world % o->tier != 0 ||
			o->world / o->tier > TALLY_MAX_WORKERS ||
			o->op != OP_ALLREDUCE || o->h16 || o->url[0] != '\0' ||
			(o->codec != NULL && strcmp(o->codec, "fixp") != 0))) {
		fprintf(stderr, "--tier %lu: --world a multiple of it, of at "
			"most %u leaves; allreduce of f32 or i32 with --dp\n",
			o->tier, TALLY_MAX_WORKERS);
		goto bad;
	}
	if ((o->url[0] != '\0') != (o->jtoken[0] != '\0')) {
		fprintf(stderr, "the token: 64 hex digits go with --url, 16 "
			"with --dp\n");
		goto bad;
	}
	if (o->op != OP_ALLREDUCE && (o->cuda || o->vary || o->have_scale ||
			o->h16 ||
			(o->codec != NULL && strcmp(o->codec, "fixp") != 0 &&
			!(o->op == OP_REDUCE_SCATTER && quant_spec(o->codec))) ||
			(o->op != OP_BROADCAST && o->size / 4 % o->world != 0))) {
		fprintf(stderr, "--op %s: host memory, f32 or i32, codec fixp "
			"(reduce_scatter: or q16, q8, q4), no --vary "
			"or --scale-exp, and a size of whole elements a rank\n",
			op_names[o->op]);
		goto bad;
	}
	if ((unsigned long)o->dp_port + o->dp_nports - 1 > 65535) {
		fprintf(stderr, "--dp: ports run past 65535\n");
		goto bad;
	}
	if (o->h16 && (o->cuda || o->have_scale || o->vary)) {
		fprintf(stderr, "--type bf16/f16: host tensors, without "
			"--scale-exp or --vary\n");
		goto bad;
	}
	return 0;
bad:
	fputc('\n', stderr);
	usage(stderr);
	return -1;
}

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * An f32 element from a draw h: a normal-ish spread in [-1, 1] (the sum
 * of three uniforms), one element in 1024 an outlier up to 16x larger,
 * as gradients have.
 */
static float
gen_f32_of(uint64_t h)
{
	float x = ((float)(h & 0xffff) + (float)(h >> 16 & 0xffff) +
		(float)(h >> 32 & 0xffff)) / 98304.0f - 1.0f;

	if ((h >> 48 & 0x3ff) == 0)
		x *= (float)(2 + (h >> 60));
	return x;
}

/*
 * x rounded to the 16-bit type of --type, to nearest even (bf16: on the
 * bits, x being finite; f16: the compiler's conversion).
 */
static uint16_t
to16(const struct ar_opts *o, float x)
{
	uint32_t u;
	_Float16 h;
	uint16_t b;

	if (o->dt == TALLY_DT_F16) {
		h = (_Float16)x;
		memcpy(&b, &h, sizeof(b));
		return b;
	}
	memcpy(&u, &x, sizeof(u));
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/*
 * Elements [i0, i0 + n) of rank r's tensor, from (seed, r) and the index
 * only, so any piece can be made on its own. f32: the rank's own draws
 * (gen_f32_of()), or with --noise S, as data-parallel workers' gradients
 * are (the same step's gradient on other minibatches): one tensor shared
 * by every rank plus S times the rank's own. i32: any bits (sums wrap).
 */
static void
gen(const struct ar_opts *o, unsigned int r, size_t i0, size_t n, void *out)
{
	uint64_t key = mix(o->seed ^ mix((uint64_t)r + 1));
	uint64_t shared = mix(o->seed ^ mix(0));	/* no rank's key */
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t h = mix(key ^ (i0 + i));

		if (o->h16)
			((uint16_t *)out)[i] = to16(o, o->noise < 0 ?
				gen_f32_of(h) : gen_f32_of(mix(shared ^
				(i0 + i))) + (float)o->noise * gen_f32_of(h));
		else if (!o->f32)
			((int32_t *)out)[i] = (int32_t)(uint32_t)h;
		else if (o->noise < 0)
			((float *)out)[i] = gen_f32_of(h);
		else
			((float *)out)[i] = gen_f32_of(mix(shared ^ (i0 + i))) +
				(float)o->noise * gen_f32_of(h);
		/* |x| < 2^5 without --noise: times 2^122 stays finite. */
		if (o->f32 && o->have_scale)
			((float *)out)[i] = ldexpf(((float *)out)[i],
				o->scale_exp);
	}
}

/* 64-bit FNV-1a over len bytes at p. */
static uint64_t
fnv1a64(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

/*
 * reference() for bf16 and f16 in lanes (the context's): the global max,
 * every rank's encoding in those lanes summed, each sum rounded once.
 */
static int
reference16(const struct ar_opts *o, size_t n, unsigned int lanes, void *ref)
{
	uint16_t *x = malloc(BLOCK * 2);
	int32_t *q = malloc(BLOCK * 4), *acc = calloc(n + 1, 4);
	float amax = 0.0f;
	size_t i0, i, len;
	int e = 0;

	if (x == NULL || q == NULL || acc == NULL) {
		free(x);
		free(q);
		free(acc);
		return -ENOMEM;
	}
	for (unsigned int r = 0; r < o->world; r++)
		for (i0 = 0; i0 < n; i0 += len) {
			float a;

			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			gen(o, r, i0, len, x);
			a = tally_fixp16_absmax(o->dt, x, len);
			amax = a > amax ? a : amax;
		}
	(void)tally_fixp16_exponent(amax, (unsigned int)o->world, lanes,
		o->narrow, &e);
	for (unsigned int r = 0; r < o->world; r++)
		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			gen(o, r, i0, len, x);
			(void)tally_fixp16_encode(o->dt, x, q, 32, len, e);
			for (i = 0; i < len; i++)
				acc[i0 + i] += lanes == 32 ? q[i] :
					(int16_t)q[i];
		}
	(void)tally_fixp16_decode(o->dt, acc, 32, ref, n, e);
	free(x);
	free(q);
	free(acc);
	return 0;
}

/*
 * Writes the reference result to ref (n elements), generating every
 * rank's tensor a block at a time.
 */
static int
reference(const struct ar_opts *o, size_t n, void *ref)
{
	uint32_t *acc = ref;
	float *x = malloc(BLOCK * sizeof(float));
	int32_t *q = malloc(BLOCK * sizeof(int32_t));
	float amax = 0.0f;
	size_t i0, i, len;
	unsigned int r;
	int e = 0;

	if (x == NULL || q == NULL) {
		free(x);
		free(q);
		return -ENOMEM;
	}
	for (r = 0; o->f32 && r < o->world; r++) {
		for (i0 = 0; i0 < n; i0 += len) {
			float a;

			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			gen(o, r, i0, len, x);
			a = tally_fixp_absmax(x, len);
			amax = a > amax ? a : amax;
		}
	}
	if (o->f32)
		(void)tally_fixp_exponent_total(amax, (unsigned int)o->world,
			&e);
	memset(acc, 0, n * 4);
	for (r = 0; r < o->world; r++) {
		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			gen(o, r, i0, len, x);
			if (o->f32)
				tally_fixp_encode(x, q, len, e);
			else
				memcpy(q, x, len * 4);
			for (i = 0; i < len; i++)
				acc[i0 + i] += (uint32_t)q[i];
		}
	}
	for (i0 = 0; o->f32 && i0 < n; i0 += len) {
		len = n - i0 < BLOCK ? n - i0 : BLOCK;
		memcpy(q, acc + i0, len * 4);
		tally_fixp_decode(q, (float *)ref + i0, len, e);
	}
	free(x);
	free(q);
	return 0;
}

static int
open_ctx(const struct ar_opts *o, struct tally_ctx **ctx)
{
	struct tally_ctx_opts co = {
		.dp_addr = o->dp_addr,
		.dp_port = o->dp_port,
		.dp_nports = o->dp_nports,
		.bind_addr = o->have_bind ? o->bind_addr : NULL,
		.bind_port = o->bind_port,
		.group_addr = o->group[0] != '\0' ? o->group : NULL,
		.job = (uint16_t)o->job,
		.token = o->token,
		.rank = (uint8_t)(o->tier != 0 ? o->rank % o->tier : o->rank),
		.world = (uint8_t)(o->tier != 0 ? o->tier : o->world),
		.scale_world = (uint16_t)(o->tier != 0 ? o->world : 0),
		.window = (uint16_t)o->window,
		.elems = (uint16_t)o->elems,
		.timeout_ms = (unsigned int)o->timeout_ms,
		.codec = o->codec,
		.narrow = (uint8_t)o->narrow,
		.auth = o->auth ? &o->keys : NULL,
		.transport = o->transport,
		.ifname = o->ifname,
		.queue = (uint16_t)o->queue,
	};
	struct tally_shard sh[1 + MAX_MORE_SHARDS];
	uint8_t key[32];
	int rc;

	if (o->nmore > 0) {	/* a sharded job: --dp's first */
		sh[0] = (struct tally_shard){ o->dp_addr, o->dp_port,
			o->dp_nports };
		for (unsigned int h = 0; h < o->nmore; h++)
			sh[1 + h] = (struct tally_shard){ o->more[h].addr,
				o->more[h].port, o->more[h].nports };
		co.shards = sh;
		co.nshards = (uint16_t)(1 + o->nmore);
	}
	if (o->nring > 0) {	/* the ring's key: the token, 4 times */
		if (o->nring != o->world) {
			fprintf(stderr, "tally-bench allreduce: --ring lists %u "
				"members, --world is %lu\n", o->nring, o->world);
			return -EINVAL;
		}
		for (unsigned int i = 0; i < 32; i++)
			key[i] = (uint8_t)(o->token >> (8 * (7 - i % 8)));
		co.ring = o->ring;
		co.ring_key = key;
	}
	if (o->url[0] != '\0') {
		co.shards = NULL;	/* tallyd says */
		co.nshards = 0;
		co.dp_addr = NULL;
		co.bind_addr = NULL;
		co.ca_file = o->ca;
		rc = tally_open_opts(o->url, o->jtoken, (unsigned int)o->rank,
			(unsigned int)o->world, &co, ctx);
	} else {
		rc = tally_ctx_open(&co, ctx);
	}
	if (rc != 0)
		fprintf(stderr, "tally-bench allreduce: %s (%s)\n",
			tally_ctx_error(NULL), strerror(-rc));
	else if (o->lanes != 0)
		(void)tally_ctx_set_lanes(*ctx, (unsigned int)o->lanes);
	return rc;
}

/*
 * The ranks meet: a 1-element i32 sum, untimed, that takes no codec draw.
 * Returns 0, or the error (a->check says why: the allreduce's own
 * sentence, a NACK's status included, or a sum that is not the world).
 */
static int
barrier(const struct ar_opts *o, struct tally_ctx *ctx, struct ar_run *a)
{
	int32_t one = 1;
	int rc = tally_allreduce_i32(ctx, &one, 1);

	if (rc != 0) {
		snprintf(a->check, sizeof(a->check), "barrier: %s",
			tally_ctx_error(ctx));
		return rc;
	}
	if (one != (int32_t)o->world) {
		snprintf(a->check, sizeof(a->check), "the barrier summed %d, "
			"not %lu", one, o->world);
		return -EPROTO;
	}
	return rc;
}

/*
 * One --op call (not allreduce) over the tensor in a->buf: a
 * reduce-scatter of it into a->out (this rank's shard), an all-gather
 * of this rank's shard into it, in place, or a broadcast of rank 0's.
 */
static int
collective(const struct ar_opts *o, struct tally_ctx *ctx, struct ar_run *a)
{
	enum tally_dtype dt = o->f32 ? TALLY_DT_F32 : TALLY_DT_I32;
	size_t cnt = a->n / o->world;

	switch (o->op) {
	case OP_REDUCE_SCATTER:
		return tally_reduce_scatter(ctx, a->buf, a->out, cnt, dt);
	case OP_ALLGATHER:
		return tally_allgather(ctx, (uint32_t *)a->buf +
			o->rank * cnt, a->buf, cnt, dt);
	default:
		return tally_broadcast(ctx, a->buf, a->n, dt, 0);
	}
}

/*
 * One allreduce of the tensor (its input in place): a->buf on the host,
 * or with --cuda the device buffer, on its stream, waited for (the
 * decoding is part of the allreduce). Returns 0 or a negative errno.
 */
static int
reduce(const struct ar_opts *o, struct tally_ctx *ctx, struct ar_run *a)
{
	struct bench_cuda *d = a->dev;
	int rc;

	if (o->op != OP_ALLREDUCE)
		return collective(o, ctx, a);
	if (o->h16)
		return tally_allreduce_typed(ctx, a->buf, a->n, o->dt);
	if (!o->cuda)
		return o->f32 ? tally_allreduce(ctx, a->buf, a->n) :
			tally_allreduce_i32(ctx, a->buf, a->n);
	rc = o->f32 ? tally_allreduce_cuda(ctx, d->d_buf, a->n, d->stream) :
		tally_allreduce_i32_cuda(ctx, d->d_buf, a->n, d->stream);
	return rc != 0 ? rc : bench_cuda_sync(d);
}

/*
 * --cuda: moves the tensor between a->buf and the device (to it: put
 * 1), untimed. Returns 0, or the error with a->check saying so.
 */
static int
device_copy(const struct ar_opts *o, struct ar_run *a, int put)
{
	int rc;

	if (!o->cuda)
		return 0;
	rc = put ? bench_cuda_put(a->dev, a->buf, a->n * o->esz) :
		bench_cuda_get(a->dev, a->buf, a->n * o->esz);
	if (rc != 0)
		snprintf(a->check, sizeof(a->check), "copying the tensor %s "
			"the device failed (%s)", put ? "to" : "from",
			strerror(-rc));
	return rc;
}

/*
 * The timed part: --iters allreduces, input restored before each. With
 * --reopen, a failed one is redone on a context joined afresh.
 */
static int
run_iters(const struct ar_opts *o, struct tally_ctx **ctxp, struct ar_run *a)
{
	unsigned long it, reopened = 0;
	int rc;

	for (it = 0; it < o->iters; it++) {
		struct tally_ctx *ctx = *ctxp;
		struct bench_cpu c0, c1;
		uint64_t t0;

		if (it > 0 && o->pause_ms > 0)
			usleep((useconds_t)(o->pause_ms * 1000));
		if (o->vary) {
			struct ar_opts v = *o;

			v.seed = o->seed + it;
			gen(&v, (unsigned int)o->rank, 0, a->n, a->input);
		}
		memcpy(a->buf, a->input, a->n * o->esz);
		if ((rc = device_copy(o, a, 1)) != 0)
			return rc;
		/*
		 * The ranks start together, as the peers' benchmarks do
		 * (a barrier, then the clock).
		 */
		rc = o->no_barrier ? 0 : barrier(o, ctx, a);
		if (rc == -EPROTO)
			return rc;
		bench_cpu_sample(&c0, (long)o->watch_pid);
		t0 = bench_now_ns();
		/* f32 goes through the job's codec (fixp: the f32 sum). */
		if (rc == 0)
			rc = reduce(o, ctx, a);
		a->secs[it] = (double)(bench_now_ns() - t0) * 1e-9;
		bench_cpu_sample(&c1, (long)o->watch_pid);
		bench_cpu_delta(&c0, &c1, &a->cpu[it]);
		/*
		 * And a barrier after the clock: this rank hashes its result
		 * only once every rank has stopped its clock, so one rank's
		 * untimed work never competes with another's timed
		 * allreduce for the CPU (4 ranks and a dataplane share 2
		 * cores in the testbed).
		 */
		if (rc == 0 && !o->no_barrier) {
			rc = barrier(o, ctx, a);
			if (rc == -EPROTO)
				return rc;
		}
		if (rc != 0 && reopened < o->reopen) {
			printf("reopen: iteration %lu failed: %s (%s)\n",
				it + 1, tally_ctx_error(ctx), strerror(-rc));
			fflush(stdout);
			reopened++;
			tally_ctx_stats(ctx, &a->st);
			tally_ctx_close(ctx);
			*ctxp = NULL;
			if ((rc = open_ctx(o, ctxp)) != 0)
				return rc;
			tally_ctx_info(*ctxp, &a->info);
			printf("reopen: joined again\n");
			fflush(stdout);
			it--;
			continue;
		}
		if (rc != 0) {
			fprintf(stderr, "tally-bench allreduce: iteration %lu: "
				"%s (%s)\n", it + 1, tally_ctx_error(ctx),
				strerror(-rc));
			snprintf(a->check, sizeof(a->check), "%s",
				tally_ctx_error(ctx));
			return rc;
		}
		if ((rc = device_copy(o, a, 0)) != 0)
			return rc;
		a->digest[it] = o->op == OP_REDUCE_SCATTER ?
			fnv1a64(a->out, a->n / o->world * 4) :
			fnv1a64(a->buf, a->n * o->esz);
		if (it == 0 || a->secs[it] < a->best)
			a->best = a->secs[it];
	}
	return 0;
}

static void
gen_f32(const void *arg, unsigned int r, size_t i0, size_t len, float *out)
{
	gen(arg, r, i0, len, out);
}

/*
 * A codec's results differ by call (its random draws take a step): each
 * iteration against its own reference; the last one, left in a->input,
 * for the element-wise report. Returns 0, 1 (differs: a->check says
 * where), or -1 (no reference: a->check says why).
 */
static int
check_codec(const struct ar_opts *o, struct ar_run *a)
{
	struct bench_codec_ref cr = {
		.codec = a->info.codec, .world = (unsigned int)o->world,
		.narrow = a->info.narrow, .seed = a->info.codec.seed,
		.n = a->n, .gen = gen_f32, .arg = o,
	};
	unsigned long it;
	int rc;

	for (it = 0; it < o->iters; it++) {
		cr.call = it;
		rc = bench_codec_reference(&cr, a->input);
		if (rc != 0) {
			snprintf(a->check, sizeof(a->check), "FAIL (no "
				"reference for codec %s: %s)",
				tally_codec_name(cr.codec.kind), strerror(-rc));
			bench_codec_ref_reset(&cr);
			return -1;
		}
		if (fnv1a64(a->input, a->n * o->esz) != a->digest[it] &&
				it + 1 < o->iters) {
			snprintf(a->check, sizeof(a->check), "FAIL (iteration "
				"%lu differs from the reference)", it + 1);
			bench_codec_ref_reset(&cr);
			return 1;
		}
	}
	bench_codec_ref_reset(&cr);
	a->ref_digest = a->digest[o->iters - 1];
	return 0;
}

/*
 * Element i of the result against its exact sum (the sum's xsum, which
 * this consumes): 0 within fixp_doc_bound(), else 1 with a->check set.
 * Keeps a->worst.
 */
static int
check_elem(struct ar_run *a, size_t i, struct xsum *sum, float amax,
	unsigned int w)
{
	float r = ((const float *)a->buf)[i];
	double s = xsum_double(sum), b = fixp_doc_bound(s, amax, w), d;

	if (isinf(r)) {
		/* Only where the exact sum is past the floats. */
		d = fabs(s) + b < FLT_MAX || (r > 0) != (s > 0) ? INFINITY :
			0.0;
	} else {
		xsum_add(sum, r, -1);
		d = fabs(xsum_double(sum));
	}
	if (amax > 0.0f && d / amax > a->worst)
		a->worst = d / amax;
	if (d <= b)
		return 0;
	snprintf(a->check, sizeof(a->check), "FAIL (element %zu: %a, the "
		"exact sum %a: error above the bound %a)", i, (double)r, s, b);
	return 1;
}

/*
 * --scale-exp: the result (a->buf) against the exact sums of every
 * rank's tensor, a block at a time: within fixp_doc_bound() everywhere,
 * or an infinity where the exact sum is past the floats. Sets a->worst
 * (largest error / max |x|) and a->bound (its bound). Returns 0, 1 (above
 * the bound: a->check says where) or -1 (out of memory).
 */
static int
check_precision(const struct ar_opts *o, struct ar_run *a)
{
	struct xsum *sum = malloc(BLOCK * sizeof(*sum));
	float *x = malloc(BLOCK * sizeof(float)), amax = 0.0f;
	unsigned int w = (unsigned int)o->world, r;
	size_t i0, i, len;
	int rc = 0;

	if (sum == NULL || x == NULL) {
		free(sum);
		free(x);
		return -1;
	}
	for (r = 0; r < w; r++)
		for (i0 = 0; i0 < a->n; i0 += len) {
			float m;

			len = a->n - i0 < BLOCK ? a->n - i0 : BLOCK;
			gen(o, r, i0, len, x);
			m = tally_fixp_absmax(x, len);
			amax = m > amax ? m : amax;
		}
	/* What fixp_doc_bound() allows, relative to amax, at |S| <= w amax. */
	a->worst = 0.0;
	a->bound = (double)w * ldexp(1.0, -fixp_doc_b(w)) +
		ldexp((double)w + 1.0, -24) +
		(amax > 0.0f ? 0x1p-150 / amax : 0.0);
	for (i0 = 0; i0 < a->n && rc == 0; i0 += len) {
		len = a->n - i0 < BLOCK ? a->n - i0 : BLOCK;
		memset(sum, 0, len * sizeof(*sum));
		for (r = 0; r < w; r++) {
			gen(o, r, i0, len, x);
			for (i = 0; i < len; i++)
				xsum_add(&sum[i], x[i], 1);
		}
		for (i = 0; i < len && rc == 0; i++)
			rc = check_elem(a, i0 + i, &sum[i], amax, w);
	}
	free(sum);
	free(x);
	return rc;
}

/*
 * With --vary: each iteration against the reference of its own tensors
 * (seed + k); the last one, left in a->input, for the element-wise
 * report. Returns 0, or -1 with a->check saying why.
 */
static int
check_vary(const struct ar_opts *o, struct ar_run *a)
{
	struct ar_opts v = *o;
	unsigned long it;

	for (it = 0; it < o->iters; it++) {
		v.seed = o->seed + it;
		if (reference(&v, a->n, a->input) != 0) {
			snprintf(a->check, sizeof(a->check),
				"FAIL (out of memory)");
			return -1;
		}
		if (fnv1a64(a->input, a->n * o->esz) != a->digest[it]) {
			snprintf(a->check, sizeof(a->check), "FAIL (iteration "
				"%lu differs from the reference)", it + 1);
			return -1;
		}
	}
	a->ref_digest = a->digest[o->iters - 1];
	return 0;
}

/*
 * A reduce-scatter through the job's q16/q8/q4 codec: each iteration's
 * shard against the same shard of the codec's allreduce reference of
 * that call (the very bits, docs/collectives.md); the last shard left
 * at the start of a->input. Returns 0, or -1 with a->check set.
 */
static int
check_rs_codec(const struct ar_opts *o, struct ar_run *a)
{
	struct bench_codec_ref cr = {
		.codec = a->info.codec, .world = (unsigned int)o->world,
		.narrow = a->info.narrow, .seed = a->info.codec.seed,
		.n = a->n, .gen = gen_f32, .arg = o,
	};
	size_t cnt = a->n / o->world;
	const uint32_t *shard = (const uint32_t *)a->input + o->rank * cnt;
	int rc = 0;

	for (unsigned long it = 0; it < o->iters && rc == 0; it++) {
		cr.call = it;
		rc = bench_codec_reference(&cr, a->input);
		if (rc != 0)
			snprintf(a->check, sizeof(a->check), "FAIL (no "
				"reference for codec %s: %s)",
				tally_codec_name(cr.codec.kind), strerror(-rc));
		else if (fnv1a64(shard, cnt * 4) != a->digest[it])
			rc = snprintf(a->check, sizeof(a->check), "FAIL "
				"(iteration %lu differs from the codec's "
				"reference)", it + 1);
	}
	bench_codec_ref_reset(&cr);
	if (rc != 0)
		return -1;
	memmove(a->input, shard, cnt * 4);
	return 0;
}

/* Compares the results with the reference (in a->input now). */
/*
 * check() of an --op call other than allreduce: every iteration's result
 * against its reference, made from every rank's tensor (reduce-scatter:
 * this rank's shard of the allreduce's reference; all-gather: each
 * rank's own shard of its tensor; broadcast: rank 0's tensor).
 */
static int
check_op(const struct ar_opts *o, struct ar_run *a)
{
	size_t cnt = a->n / o->world, len = a->n, i;
	const uint32_t *got = a->buf, *want = a->input;

	if (o->op == OP_REDUCE_SCATTER &&
			a->info.codec.kind != TALLY_CODEC_FIXP) {
		/* Each call its own draws: checked call by call there. */
		if (check_rs_codec(o, a) != 0)
			return -1;
		a->ref_digest = a->digest[o->iters - 1];
		snprintf(a->check, sizeof(a->check), "ok");
		return 0;
	} else if (o->op == OP_REDUCE_SCATTER) {
		if (reference(o, a->n, a->input) != 0) {
			snprintf(a->check, sizeof(a->check), "FAIL (out of "
				"memory)");
			return -1;
		}
		memmove(a->input, (uint32_t *)a->input + o->rank * cnt,
			cnt * 4);
		got = a->out;
		len = cnt;
	} else if (o->op == OP_ALLGATHER) {
		for (unsigned long r = 0; r < o->world; r++)
			gen(o, (unsigned int)r, r * cnt, cnt,
				(uint32_t *)a->input + r * cnt);
	} else {
		gen(o, 0, 0, a->n, a->input);
	}
	a->ref_digest = fnv1a64(a->input, len * 4);
	for (i = 0; i < len && got[i] == want[i]; i++)
		;
	if (i < len) {
		snprintf(a->check, sizeof(a->check), "FAIL (%s: first "
			"mismatch at %zu)", op_names[o->op], i);
		return -1;
	}
	for (unsigned long it = 0; it < o->iters; it++)
		if (a->digest[it] != a->ref_digest) {
			snprintf(a->check, sizeof(a->check), "FAIL (iteration "
				"%lu differs from the reference)", it + 1);
			return -1;
		}
	snprintf(a->check, sizeof(a->check), "ok");
	return 0;
}

static int
check(const struct ar_opts *o, struct ar_run *a)
{
	const uint32_t *got = a->buf, *want = a->input;
	unsigned long it;
	size_t i;

	if (o->op != OP_ALLREDUCE)
		return check_op(o, a);
	if (o->vary && !(o->f32 && a->info.codec.kind != TALLY_CODEC_FIXP)) {
		if (check_vary(o, a) != 0)
			return -1;
		goto compare_last;
	}
	if (o->f32 && a->info.codec.kind != TALLY_CODEC_FIXP) {
		int rc;

		if (o->vary) {
			snprintf(a->check, sizeof(a->check), "FAIL (no "
				"reference for --vary with codec %s)",
				tally_codec_name(a->info.codec.kind));
			return -1;
		}
		rc = check_codec(o, a);

		if (rc != 0)
			return -1;
		goto compare_last;
	}
	if ((o->h16 ? reference16(o, a->n, o->dt == TALLY_DT_BF16 ?
			a->info.lanes_bf16 : a->info.lanes_f16, a->input) :
			reference(o, a->n, a->input)) != 0) {
		snprintf(a->check, sizeof(a->check), "FAIL (out of memory)");
		return -1;
	}
	a->ref_digest = fnv1a64(a->input, a->n * o->esz);
compare_last:
	for (i = 0; o->h16 && i < a->n && ((const uint16_t *)a->buf)[i] ==
			((const uint16_t *)a->input)[i]; i++)
		;
	for (; !o->h16 && i < a->n && got[i] == want[i]; i++)
		;
	if (i < a->n) {
		if (o->h16)
			snprintf(a->check, sizeof(a->check), "FAIL (first "
				"mismatch at %zu: got %04x, want %04x)", i,
				((const uint16_t *)a->buf)[i],
				((const uint16_t *)a->input)[i]);
		else if (o->f32)
			snprintf(a->check, sizeof(a->check), "FAIL (first "
				"mismatch at %zu: got %.9g, want %.9g)", i,
				((const float *)a->buf)[i],
				((const float *)a->input)[i]);
		else
			snprintf(a->check, sizeof(a->check), "FAIL (first "
				"mismatch at %zu: got %d, want %d)", i,
				(int32_t)got[i], (int32_t)want[i]);
		return -1;
	}
	for (it = 0; it < o->iters && !o->vary && !(o->f32 &&
			a->info.codec.kind != TALLY_CODEC_FIXP); it++) {
		if (a->digest[it] != a->ref_digest) {
			snprintf(a->check, sizeof(a->check), "FAIL (iteration "
				"%lu differs from the reference)", it + 1);
			return -1;
		}
	}
	if (o->f32 && o->have_scale &&
			a->info.codec.kind == TALLY_CODEC_FIXP) {
		struct ar_opts last = *o;	/* --vary: the last tensors */
		int rc;

		if (o->vary)
			last.seed = o->seed + o->iters - 1;
		rc = check_precision(&last, a);

		if (rc < 0)
			snprintf(a->check, sizeof(a->check), "FAIL (out of "
				"memory)");
		if (rc != 0)
			return -1;
	}
	snprintf(a->check, sizeof(a->check), "ok");
	return 0;
}

/* --type's name. */
static const char *
type_name(const struct ar_opts *o)
{
	return o->dt == TALLY_DT_BF16 ? "bf16" : o->dt == TALLY_DT_F16 ?
		"f16" : o->f32 ? "f32" : "i32";
}

/* Gbit/s of tensor in the best call; 0 for an empty one (--size 0). */
static double
goodput(const struct ar_opts *o, const struct ar_run *a)
{
	return a->best > 0 ? (double)o->size * 8 / a->best * 1e-9 : 0.0;
}

/*
 * --cuda: the device, the path the context took and its staging, and the
 * device counters (wait / net: the share of the network time the host
 * spent waiting for the GPU's encoding, what the double buffering did
 * not hide).
 */
static void
print_cuda(const struct ar_run *a)
{
	const struct tally_ctx_stats *s = &a->st;

	printf("cuda: %s, path %s, segment %u elements, staging %llu B\n",
		a->dev != NULL ? a->dev->device : "?",
		tally_cuda_path_name(a->info.cuda_path),
		(unsigned int)a->info.cuda_segment,
		(unsigned long long)a->info.cuda_staging);
	printf("cuda stats: calls %llu, segments %llu, staged_bytes %llu, "
		"wait_ns %llu, net_ns %llu, wait/net %.4f\n",
		(unsigned long long)s->cuda_calls,
		(unsigned long long)s->cuda_segments,
		(unsigned long long)s->cuda_staged_bytes,
		(unsigned long long)s->cuda_wait_ns,
		(unsigned long long)s->cuda_net_ns, s->cuda_net_ns > 0 ?
		(double)s->cuda_wait_ns / (double)s->cuda_net_ns : 0.0);
}

static void
print_text(const struct ar_opts *o, const struct ar_run *a, int ok)
{
	const struct tally_ctx_stats *s = &a->st;
	unsigned long it;

	printf("allreduce: rank %lu of %lu, job %lu, %s, %llu B "
		"(%zu elements)\n", o->rank, o->world, o->job,
		type_name(o), o->size, a->n);
	if (o->h16)
		printf("lanes: %u, %s results\n", o->dt == TALLY_DT_BF16 ?
			a->info.lanes_bf16 : a->info.lanes_f16,
			a->info.narrow ? "narrow" : "wide");
	if (o->f32) {
		char spec[TALLY_CODEC_SPEC_MAX] = "?";

		tally_codec_format(&a->info.codec, spec, sizeof(spec));
		printf("codec: %s, %s results\n", spec, a->info.narrow ?
			"narrow" : "wide");
	}
	printf("dataplane: %s:%u/%u, elems %lu, window %lu, timeout %lu ms, "
		"seed %llu\n", o->dp_addr, o->dp_port, o->dp_nports,
		o->elems ? o->elems : TALLY_DEFAULT_ELEMS,
		o->window ? o->window : 64,
		o->timeout_ms ? o->timeout_ms : 5000, o->seed);
	printf("transport: %s\n", a->info.transport != NULL ?
		a->info.transport : "?");
	if (o->cuda)
		print_cuda(a);
	for (it = 0; it < o->iters && ok; it++)
		printf("iter %lu: %.6f s\n", it + 1, a->secs[it]);
	if (ok) {
		printf("best: %.6f s, goodput %.3f Gbit/s\n", a->best,
			goodput(o, a));
		printf("digest: fnv1a64 %016llx\n",
			(unsigned long long)a->digest[o->iters - 1]);
	}
	printf("stats: packets_sent %llu, retransmits %llu, results %llu, "
		"duplicates %llu, nacks %llu, bytes_sent %llu, "
		"bytes_received %llu, bundled %llu, stale %llu, forged %llu, "
		"rack %llu, probes %llu, timeouts %llu, spurious %llu, "
		"gap_nacks %llu, result_gaps %llu, gap_resends %llu\n",
		(unsigned long long)s->packets_sent,
		(unsigned long long)s->retransmits,
		(unsigned long long)s->results,
		(unsigned long long)s->duplicates,
		(unsigned long long)s->nacks,
		(unsigned long long)s->bytes_sent,
		(unsigned long long)s->bytes_received,
		(unsigned long long)s->bundled,
		(unsigned long long)s->stale,
		(unsigned long long)s->forged,
		(unsigned long long)s->rack,
		(unsigned long long)s->probes,
		(unsigned long long)s->timeouts,
		(unsigned long long)s->spurious,
		(unsigned long long)s->gap_nacks,
		(unsigned long long)s->result_gaps,
		(unsigned long long)s->gap_resends);
	if (o->have_scale && a->bound > 0.0)
		printf("precision: scale 2^%d, worst error %.3g of max |x|, "
			"bound %.3g\n", o->scale_exp, a->worst, a->bound);
	if (ok)
		printf("check: %s\n", a->check);
	else
		printf("error: %s\n", a->check);
}

/*
 * The CPU of each timed call, after "seconds": this process's CPU
 * seconds, the machine's busy and total ticks, and with --watch-pid the
 * watched process's CPU seconds (-1: unreadable). Ends inside the
 * "watch_cpu_s" (or "host_ticks") array, as "seconds" is left.
 */
static void
print_cpu(const struct ar_opts *o, const struct ar_run *a)
{
	unsigned long it;

	printf("],\"cpu_s\":[");
	for (it = 0; it < o->iters; it++)
		printf("%s%.6f", it ? "," : "", a->cpu[it].proc_s);
	printf("],\"host_ticks\":[");
	for (it = 0; it < o->iters; it++)
		printf("%s[%llu,%llu]", it ? "," : "", a->cpu[it].host_busy,
			a->cpu[it].host_total);
	if (o->watch_pid == 0)
		return;
	printf("],\"watch_cpu_s\":[");
	for (it = 0; it < o->iters; it++)
		printf("%s%.3f", it ? "," : "", a->cpu[it].watch_s);
}

static void
print_json(const struct ar_opts *o, const struct ar_run *a, int ok)
{
	const struct tally_ctx_stats *s = &a->st;
	unsigned long it;

	printf("{\"bench\":\"allreduce\",\"params\":{\"dp\":\"%s\","
		"\"dp_port\":%u,\"dp_nports\":%u,\"job\":%lu,\"rank\":%lu,"
		"\"world\":%lu,\"type\":\"%s\",\"size\":%llu,\"elements\":%zu,"
		"\"elems\":%lu,\"window\":%lu,\"timeout_ms\":%lu,"
		"\"iters\":%lu,\"seed\":%llu,\"op\":\"%s\"}", o->dp_addr, o->dp_port,
		o->dp_nports, o->job, o->rank, o->world,
		type_name(o), o->size, a->n,
		o->elems ? o->elems : TALLY_DEFAULT_ELEMS,
		o->window ? o->window : 64,
		o->timeout_ms ? o->timeout_ms : 5000, o->iters, o->seed,
		op_names[o->op]);
	if (ok) {
		printf(",\"seconds\":[");
		for (it = 0; it < o->iters; it++)
			printf("%s%.6f", it ? "," : "", a->secs[it]);
		print_cpu(o, a);
		printf("],\"best_s\":%.6f,\"goodput_gbps\":%.4f,"
			"\"digest\":\"%016llx\"", a->best,
			goodput(o, a),
			(unsigned long long)a->digest[o->iters - 1]);
	}
	printf(",\"stats\":{\"packets_sent\":%llu,\"retransmits\":%llu,"
		"\"results\":%llu,\"duplicates\":%llu,\"nacks\":%llu,"
		"\"bytes_sent\":%llu,\"bytes_received\":%llu,"
		"\"bundled\":%llu,\"stale\":%llu,\"forged\":%llu,"
		"\"rack\":%llu,\"probes\":%llu,\"timeouts\":%llu,"
		"\"spurious\":%llu,\"gap_nacks\":%llu,\"result_gaps\":%llu,"
		"\"gap_resends\":%llu},",
		(unsigned long long)s->packets_sent,
		(unsigned long long)s->retransmits,
		(unsigned long long)s->results,
		(unsigned long long)s->duplicates,
		(unsigned long long)s->nacks,
		(unsigned long long)s->bytes_sent,
		(unsigned long long)s->bytes_received,
		(unsigned long long)s->bundled,
		(unsigned long long)s->stale,
		(unsigned long long)s->forged,
		(unsigned long long)s->rack,
		(unsigned long long)s->probes,
		(unsigned long long)s->timeouts,
		(unsigned long long)s->spurious,
		(unsigned long long)s->gap_nacks,
		(unsigned long long)s->result_gaps,
		(unsigned long long)s->gap_resends);
	if (o->cuda) {
		printf("\"cuda\":{\"device\":");
		bench_json_string(stdout, a->dev != NULL ? a->dev->device :
			"?");
		printf(",\"path\":\"%s\",\"segment\":%u,\"staging\":%llu,"
			"\"calls\":%llu,\"segments\":%llu,"
			"\"staged_bytes\":%llu,\"wait_ns\":%llu,"
			"\"net_ns\":%llu},",
			tally_cuda_path_name(a->info.cuda_path),
			(unsigned int)a->info.cuda_segment,
			(unsigned long long)a->info.cuda_staging,
			(unsigned long long)a->st.cuda_calls,
			(unsigned long long)a->st.cuda_segments,
			(unsigned long long)a->st.cuda_staged_bytes,
			(unsigned long long)a->st.cuda_wait_ns,
			(unsigned long long)a->st.cuda_net_ns);
	}
	if (o->have_scale && a->bound > 0.0)
		printf("\"scale_exp\":%d,\"worst_error\":%.6g,"
			"\"error_bound\":%.6g,", o->scale_exp, a->worst,
			a->bound);
	printf(ok ? "\"check\":" : "\"error\":");
	bench_json_string(stdout, a->check);
	printf("}\n");
}

static void
free_run(struct ar_run *a)
{
	free(a->buf);
	free(a->input);
	free(a->out);
	free(a->secs);
	free(a->cpu);
	free(a->digest);
	bench_cuda_free(a->dev);
}

int
bench_allreduce(int argc, char **argv)
{
	struct ar_run a = { 0 };
	struct tally_ctx *ctx = NULL;
	struct ar_opts o;
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	a.n = (size_t)(o.size / o.esz);
	a.buf = malloc(a.n * o.esz + 4);	/* + 4: not malloc(0) */
	a.input = malloc(a.n * o.esz + 4);
	a.secs = calloc(o.iters, sizeof(*a.secs));
	a.digest = calloc(o.iters, sizeof(*a.digest));
	a.cpu = calloc(o.iters, sizeof(*a.cpu));
	a.out = malloc(a.n / o.world * 4 + 4);
	if (a.buf == NULL || a.input == NULL || a.secs == NULL ||
			a.out == NULL ||
			a.digest == NULL || a.cpu == NULL) {
		fprintf(stderr, "tally-bench allreduce: out of memory for "
			"%llu B\n", o.size);
		free_run(&a);
		return BENCH_EXIT_ERROR;
	}
	gen(&o, (unsigned int)o.rank, 0, a.n, a.input);
	if (o.cuda && bench_cuda_new(a.n * o.esz, &a.dev) != 0) {
		free_run(&a);
		return BENCH_EXIT_ERROR;
	}
	if (open_ctx(&o, &ctx) != 0) {
		free_run(&a);
		return BENCH_EXIT_ERROR;
	}
	tally_ctx_info(ctx, &a.info);
	rc = run_iters(&o, &ctx, &a);
	if (ctx != NULL) {
		tally_ctx_stats(ctx, &a.st);
		tally_ctx_info(ctx, &a.info);	/* with its staging now */
	}
	tally_ctx_close(ctx);
	if (rc == 0)
		rc = check(&o, &a) == 0 ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
	else
		rc = BENCH_EXIT_ERROR;
	if (o.json)
		print_json(&o, &a, rc != BENCH_EXIT_ERROR);
	else
		print_text(&o, &a, rc != BENCH_EXIT_ERROR);
	free_run(&a);
	return rc;
}
