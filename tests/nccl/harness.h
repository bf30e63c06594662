/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl-harness's state and phases (harness.c runs them in order). Tests
 * only.
 */
#ifndef TALLY_TESTS_NCCL_HARNESS_H
#define TALLY_TESTS_NCCL_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "load.h"

#define HARNESS_MAX_SIZES	16

struct coord;

struct harness {
	/* options */
	const char *plugin;
	unsigned int rank, world;
	char *coord;		/* IP (the ":PORT" cut off) */
	unsigned int coord_port;
	size_t sizes[HARNESS_MAX_SIZES];
	unsigned int nsizes;
	size_t chunk;		/* elements a request for large tensors */
	uint64_t seed;
	double limit;		/* seconds before a tensor counts as hung */
	int kill_rank;		/* -1: none */
	int bench;		/* time the plugin against libtally */
	unsigned int bench_iters;
	int verbose;
	/* state */
	struct tnl_plugin p;
	struct coord *co;
	void *nctx, *cctx;	/* the tables' contexts */
	void *cc;		/* the collnet comm */
	char *handles;		/* every rank's collnet handle */
};

/* Prints one check's line; counts failures. */
void check(const struct harness *h, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* phases.c: 0 to go on, -1 when later phases cannot run. */
int phase_tables(struct harness *h);
int phase_p2p(struct harness *h);
int phase_join(struct harness *h);
int rejoin(struct harness *h);
int phase_data(struct harness *h);
int phase_kill(struct harness *h);
void phase_close(struct harness *h);

/* bench.c: the plugin against libtally's call on one tensor. */
int phase_bench(struct harness *h);

#endif /* TALLY_TESTS_NCCL_HARNESS_H */
