/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A job's gradient codec: how its workers turn f32 gradients into what
 * the dataplane sums. An operator names it when creating the job
 * (`tallyctl job create NAME --world N --codec SPEC`); tallyd hands it to
 * every worker at the rendezvous; tally_allreduce() applies it.
 *
 * A spec is NAME[,KEY=VALUE]..., e.g. "q8", "randk,density=0.01,seed=7",
 * "sparse,density=0.01,est=sidco-gpd". Names (docs/codecs/):
 *   fixp      shared-scale fixed point, exact i32 sums (the default)
 *   q16 q8 q4 shared-scale stochastic quantization to 16, 8 or 4 bits
 *   ternary   stochastic ternary with a shared scale (TernGrad), as i4
 *   2bit      threshold ternary with a residual (MXNet 2-bit), as i4
 *   sign      sign votes, majority decides (signSGD)
 *   randk     shared-seed random-k: the same k indices on every worker
 *   sparse    block-sparse: blocks of 256 over a threshold
 *   powersgd  PowerSGD: rank-r factors P and Q, summed as f32
 * Keys: density (0 < d <= 1; randk, sparse: the fraction kept), seed
 * (0..2^64-1; the codecs' random draws), est (sparse: sidco-gpd, the
 * default, sidco-exp, sidco-gamma, dgc, topk), ef (0 or 1: error
 * feedback; not
 * 2bit, which always keeps its residual; powersgd: 1 by default),
 * threshold (2bit: t > 0, finite, rounded down to a power of two; 0.5
 * by default, as MXNet's), momentum (sparse: DGC momentum correction
 * and masking, 0 <= m < 1, 0 = off; it keeps DGC's own accumulation, so
 * not with ef=1), rank (powersgd: 1..32, 4 by default), rows (powersgd:
 * the rows of the matrix a tensor is viewed as; 0 = near-square).
 *
 * Codecs with memory (2bit, ef=1, momentum > 0, powersgd) keep state per
 * tensor from one allreduce to the next: <tally/tally.h>'s struct
 * tally_state.
 */
#ifndef TALLY_CODEC_H
#define TALLY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tally_codec_kind {
	TALLY_CODEC_FIXP = 0,
	TALLY_CODEC_Q16,
	TALLY_CODEC_Q8,
	TALLY_CODEC_Q4,
	TALLY_CODEC_TERNARY,
	TALLY_CODEC_2BIT,
	TALLY_CODEC_SIGN,
	TALLY_CODEC_RANDK,
	TALLY_CODEC_SPARSE,
	TALLY_CODEC_POWERSGD,
	TALLY_CODEC_MAX_,
};

enum tally_codec_est {
	TALLY_EST_SIDCO_EXP = 0,
	TALLY_EST_SIDCO_GPD,
	TALLY_EST_SIDCO_GAMMA,
	TALLY_EST_DGC,
	TALLY_EST_TOPK,
	TALLY_EST_MAX_,
};

struct tally_codec {
	enum tally_codec_kind kind;
	double density;		/* randk, sparse; 0 = the default 0.01 */
	uint64_t seed;
	enum tally_codec_est est;
	int ef;			/* error feedback */
	double momentum;	/* sparse: DGC momentum, 0 = off */
	float threshold;	/* 2bit: the threshold as given */
	uint32_t rank;		/* powersgd: the factors' rank */
	uint32_t rows;		/* powersgd: matrix rows, 0 = near-square */
};

/* Defaults of the keys. */
#define TALLY_CODEC_DEF_DENSITY		0.01
#define TALLY_CODEC_DEF_THRESHOLD	0.5f
#define TALLY_CODEC_DEF_RANK		4
/* SIDCo-GP: the estimator that keeps the density asked for (within 20 %
 * on heavy tails and on real gradients: docs/codecs/sparse.md). */
#define TALLY_CODEC_DEF_EST		TALLY_EST_SIDCO_GPD
#define TALLY_CODEC_RANK_MAX		32

/* Longest spec tally_codec_format() writes, with its NUL. */
#define TALLY_CODEC_SPEC_MAX	160

/*
 * Whether codec c keeps memory per tensor between allreduces (a
 * residual, DGC's momentum, PowerSGD's Q): 2bit, ef=1, momentum > 0,
 * powersgd.
 */
int tally_codec_has_memory(const struct tally_codec *c);

/*
 * Parses spec into *c (defaults for what it does not say; padding bytes
 * zeroed, so two parses of one spec compare equal byte for byte).
 * Returns 0, or -EINVAL with a sentence in why (wlen bytes; why may be
 * NULL).
 */
int tally_codec_parse(const char *spec, struct tally_codec *c, char *why,
	size_t wlen);

/*
 * Writes c's canonical spec (the name, then every key that differs from
 * the default, in a fixed order) to buf; parsing it gives c back. Returns
 * its length, or -EINVAL for a c out of range, -ENOSPC when buf is too
 * small.
 */
int tally_codec_format(const struct tally_codec *c, char *buf, size_t len);

/* The name of a kind ("fixp", "q8", ...), "?" when out of range. */
const char *tally_codec_name(enum tally_codec_kind k);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_CODEC_H */
