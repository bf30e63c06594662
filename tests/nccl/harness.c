/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl-harness: one rank of an NCCL job as far as the net plugin can
 * tell. It loads libnccl-net-tally.so as NCCL 2.28 does (load.c), inits
 * both tables with a logger, checks devices, properties and
 * reduceSupport, runs a ring of point-to-point transfers through the net,
 * forms the collnet group from handles exchanged over its own TCP
 * (coord.c: NCCL's bootstrap stands there), and allreduces tensors
 * through it as NCCL's proxy does (data.c): many requests in flight,
 * polled with test(); then optionally times the plugin against
 * libtally's own call on the same tensor, and has one rank killed while
 * the others wait in test(). One line per check, "ok - " or "not ok - ";
 * exit 0 when every check passed. tests/nccl/nccl_test.sh runs four of
 * them on a testbed; docs/nccl.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/tally.h>

#include "coord.h"
#include "data.h"
#include "harness.h"
#include "load.h"

static int nfail;

/* One check's line, prefixed with the rank. */
void
check(const struct harness *h, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("rank %u: %s - ", h->rank, ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		nfail++;
}

static void
usage(const char *me)
{
	fprintf(stderr,
		"usage: %s --plugin SO --rank R --world W --coord IP:PORT\n"
		"  [--sizes N,N,..] [--chunk ELEMS] [--seed S] [--limit SECS]\n"
		"  [--kill-rank K] [--bench [--bench-iters N]] [--verbose]\n"
		"The collnet's job: TALLY_URL, TALLY_TOKEN_FILE (or\n"
		"TALLY_TOKEN) and TALLY_CA in the environment, as under NCCL.\n",
		me);
	exit(2);
}

/* --sizes: up to HARNESS_MAX_SIZES comma-separated element counts. */
static void
parse_sizes(struct harness *h, char *arg, const char *me)
{
	char *save = NULL;

	h->nsizes = 0;
	for (char *t = strtok_r(arg, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		if (h->nsizes == HARNESS_MAX_SIZES)
			usage(me);
		h->sizes[h->nsizes++] = strtoull(t, NULL, 10);
	}
}

/* The options into *h. */
static void
parse(struct harness *h, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "plugin", 1, NULL, 'p' }, { "rank", 1, NULL, 'r' },
		{ "world", 1, NULL, 'w' }, { "coord", 1, NULL, 'c' },
		{ "sizes", 1, NULL, 's' }, { "chunk", 1, NULL, 'k' },
		{ "seed", 1, NULL, 'S' }, { "limit", 1, NULL, 'L' },
		{ "kill-rank", 1, NULL, 'K' }, { "bench", 0, NULL, 'b' },
		{ "bench-iters", 1, NULL, 'i' }, { "verbose", 0, NULL, 'v' },
		{ NULL, 0, NULL, 0 } };
	static const size_t sizes[] = { 0, 1, 257, 1000003, 16777216 };
	char *colon;
	int o;

	memset(h, 0, sizeof(*h));
	h->chunk = 131072;
	h->seed = 7;
	h->limit = 120;
	h->kill_rank = -1;
	h->bench_iters = 5;
	h->nsizes = sizeof(sizes) / sizeof(sizes[0]);
	memcpy(h->sizes, sizes, sizeof(sizes));
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'p': h->plugin = optarg; break;
		case 'r': h->rank = (unsigned int)atoi(optarg); break;
		case 'w': h->world = (unsigned int)atoi(optarg); break;
		case 'c': h->coord = optarg; break;
		case 's': parse_sizes(h, optarg, argv[0]); break;
		case 'k': h->chunk = strtoull(optarg, NULL, 10); break;
		case 'S': h->seed = strtoull(optarg, NULL, 10); break;
		case 'L': h->limit = atof(optarg); break;
		case 'K': h->kill_rank = atoi(optarg); break;
		case 'b': h->bench = 1; break;
		case 'i': h->bench_iters = (unsigned int)atoi(optarg); break;
		case 'v': h->verbose = 1; break;
		default: usage(argv[0]);
		}
	}
	if (h->plugin == NULL || h->world == 0 || h->world > 64 ||
	    h->rank >= h->world || h->coord == NULL || h->chunk == 0 ||
	    (colon = strchr(h->coord, ':')) == NULL)
		usage(argv[0]);
	*colon = '\0';
	h->coord_port = (unsigned int)atoi(colon + 1);
}

int
main(int argc, char **argv)
{
	struct harness h;
	char why[512];

	parse(&h, argc, argv);
	tnl_verbose(h.verbose);
	if (tnl_load(h.plugin, &h.p, why, sizeof(why)) != 0) {
		check(&h, 0, "load %s: %s", h.plugin, why);
		return 1;
	}
	h.co = coord_open(h.coord, h.coord_port, h.rank, h.world, 60000);
	check(&h, h.co != NULL, "coordination over %s:%u%s%s", h.coord,
		h.coord_port, h.co ? "" : ": ", h.co ? "" : strerror(errno));
	if (h.co == NULL)
		return 1;
	if (phase_tables(&h) == 0 && phase_p2p(&h) == 0 &&
	    phase_join(&h) == 0 && phase_data(&h) == 0 &&
	    phase_bench(&h) == 0)
		phase_kill(&h);
	phase_close(&h);
	coord_close(h.co);
	tnl_unload(&h.p);
	printf("rank %u: %s (%d failed)\n", h.rank, nfail ? "FAIL" : "PASS",
		nfail);
	return nfail ? 1 : 0;
}
