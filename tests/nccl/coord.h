/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The harness's own out-of-band network (what NCCL's bootstrap does for
 * a real job): rank 0 listens on a TCP address, every other rank
 * connects to it; all-gather of equal-sized blobs and barriers go
 * through rank 0. Tests only.
 */
#ifndef TALLY_TESTS_NCCL_COORD_H
#define TALLY_TESTS_NCCL_COORD_H

#include <stddef.h>

struct coord;

/* Joins the group (rank 0 waits for the others, each connects within
 * timeout_ms). NULL with errno on failure. */
struct coord *coord_open(const char *ip, unsigned int port,
	unsigned int rank, unsigned int world, unsigned int timeout_ms);

/* all[r * len ..] = rank r's mine[0..len), on every rank; 0 or -errno. */
int coord_allgather(struct coord *c, const void *mine, size_t len,
	void *all);

/* Returns when every rank called it; 0 or -errno. */
int coord_barrier(struct coord *c);

/* Closes the sockets; NULL is fine. */
void coord_close(struct coord *c);

#endif /* TALLY_TESTS_NCCL_COORD_H */
