/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The harness's tensors and requests: each rank's inputs are a function
 * of (seed, rank, index), so every rank computes the expected sums of all
 * ranks itself; a tensor goes to the collnet as NCCL's proxy sends it, in
 * requests of a chunk each, all in flight at once (a NULL request is
 * posted again later), polled with test() until done. Tests only.
 */
#ifndef TALLY_TESTS_NCCL_DATA_H
#define TALLY_TESTS_NCCL_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

/* Input kinds: i32 (any value), f32 in eighths within +-250 (their sums
 * are exact in fixed point and in float alike), f32 uniform in [-1, 1)
 * (checked against the fixed-point reference request by request), bf16
 * and f16 in quarters within +-8 (a sum of up to 8 ranks needs at most
 * 8 significant bits, which bf16 has: exact in the type, so libtally's
 * sum rounded once to it must be that sum, bit for bit). */
enum {
	DATA_I32 = 0, DATA_F32_EIGHTHS, DATA_F32_UNIFORM, DATA_BF16_QUARTERS,
	DATA_F16_QUARTERS, DATA_NKINDS
};

/* Bytes of one element of kind (4, or 2 for bf16 and f16). */
size_t data_esize(int kind);

/* The NCCL type (TALLY_NCCL_*) of kind's elements. */
int data_type(int kind);

/* x[0..n) of rank for kind, seeded. */
void data_fill(void *x, size_t n, int kind, uint64_t seed, unsigned int rank);

/* The expected sums over world ranks into out[0..n), for requests of
 * chunk elements (the fixed-point scale is per request). */
void data_expect(void *out, size_t n, int kind, uint64_t seed,
	unsigned int world, size_t chunk);

/* Index of the first element of got that differs from want, or n. */
size_t data_diff(const void *got, const void *want, size_t n, int kind);

/* What one drive() did. */
struct drive_res {
	double secs;		/* first post to last done */
	unsigned int requests;
	unsigned int nulls;	/* posts answered with NULL (back-pressure) */
	int nccl;		/* test()'s or iallreduce()'s error, 0 if none */
	double err_after;	/* when it came, seconds after the first post */
};

/*
 * Allreduce send -> recv (n elements of NCCL type) through the collnet
 * comm cc in requests of chunk elements (n 0: one empty request); gives
 * up after limit seconds (a hang: nccl = -1).
 */
void drive(const struct tally_nccl_collnet *cn, void *cc, void *send,
	void *recv, size_t n, int type, size_t chunk, void *smh, void *rmh,
	double limit, struct drive_res *res);

/* CLOCK_MONOTONIC in seconds. */
double data_now(void);

#endif /* TALLY_TESTS_NCCL_DATA_H */
