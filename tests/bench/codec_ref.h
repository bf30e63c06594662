/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reference result of tally_allreduce() for a codec (codec_ref.c):
 * the same computation as every rank's libtally and the dataplane
 * together, done here on the CPU from all ranks' tensors.
 */
#ifndef TALLY_BENCH_CODEC_REF_H
#define TALLY_BENCH_CODEC_REF_H

#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>

struct bench_codec_ref {
	struct tally_codec codec;	/* the job's */
	unsigned int world;
	int narrow;			/* the job's result width */
	uint64_t seed;			/* the codec's seed (codec.seed) */
	uint64_t call;			/* which tally_allreduce() of the
					 * context: 0 for its first */
	size_t n;			/* elements */
	/* Writes elements [i0, i0 + len) of rank r's tensor to out. */
	void (*gen)(const void *arg, unsigned int r, size_t i0, size_t len,
		float *out);
	const void *arg;
	/*
	 * Codecs with memory (tally_codec_has_memory()): every rank's memory
	 * as its libtally keeps it, carried from one call to the next. NULL
	 * before the first call (or after bench_codec_ref_reset(): every
	 * rank starts afresh, as with new states); the calls must then come
	 * in order, call after call.
	 */
	struct bench_ref_mem *mem;
};

/*
 * Writes to ref (n floats) what every rank's tally_allreduce() returns.
 * Returns 0, -EOPNOTSUPP for a codec it cannot compute yet, -ENOMEM,
 * -EINVAL (a codec with memory called out of order), or the codec's own
 * refusal (e.g. -ERANGE: no level for narrow q4, or an infinity; with
 * memory, each rank then keeps what it did not send, as libtally does).
 */
int bench_codec_reference(struct bench_codec_ref *cr, float *ref);

/* Frees cr's memory of the ranks (cr->mem = NULL): a fresh start. */
void bench_codec_ref_reset(struct bench_codec_ref *cr);

#endif /* TALLY_BENCH_CODEC_REF_H */
