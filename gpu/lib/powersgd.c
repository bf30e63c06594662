/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PowerSGD through the dataplane (codec "powersgd"): the tensor, plus
 * the residual with error feedback, is viewed as a rows x cols matrix M;
 * P = M Q is summed over the ranks, orthonormalized, Q = M^T P summed,
 * and every rank returns P Q^T: the sum over ranks of each one's
 * projection of M onto the columns of P. Both sums go through
 * shared-scale fixed point, so every rank holds the same P and Q, bit for
 * bit, and returns the same result. The summed Q is kept as the next
 * call's starting Q (the warm start); the first Q is drawn from the
 * job's seed, the same on every rank. With error feedback each rank keeps
 * r = M - P Q_own^T, what its own Q did not carry (Vogels et al., 2019).
 */
#include <errno.h>
#include <string.h>

#include <tally/feedback.h>
#include <tally/powersgd.h>

#include "ctx.h"

/*
 * The Q round refused (an infinity): nothing of this call reached the
 * sum, so r = M and the next call starts Q afresh. Returns rc.
 */
static int
keep_all(struct tally_state *st, const float *m, size_t n, int rc)
{
	if (st->resid != NULL)
		memcpy(st->resid, m, n * sizeof(*m));
	return rc;
}

int
tally_lib_allreduce_powersgd(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n)
{
	uint32_t rank = st->codec.rank, rows = st->rows, cols = st->cols;
	size_t np = (size_t)rows * rank, nq = (size_t)cols * rank;
	int rc, e;

	/* Buffers first, so that a failure leaves the slots in step. */
	rc = tally_lib_grow_fixp(ctx, np > nq ? np : nq);
	if (rc != 0)
		return rc;
	ctx->codec_calls++;
	if (st->resid != NULL)
		tally_ef_apply(buf, buf, st->resid, n);
	if (!st->q_ready)
		tally_psgd_init_q(st->q, cols, rank, st->codec.seed);
	tally_psgd_p(buf, n, rows, cols, st->q, rank, st->p);
	rc = tally_lib_fixp_sum(ctx, st->p, np, &e);
	if (rc != 0)
		return rc == -ERANGE ? keep_all(st, buf, n, rc) : rc;
	tally_psgd_orthonormalize(st->p, rows, rank);
	/* This rank's Q, and what it leaves over, before Q is summed. */
	tally_psgd_q(buf, n, rows, cols, st->p, rank, st->q);
	if (st->resid != NULL) {
		tally_psgd_decompress(st->p, st->q, rows, cols, rank, 1.0f,
			st->resid, n);
		(void)tally_ef_update(st->resid, buf, st->resid, n);
	}
	rc = tally_lib_fixp_sum(ctx, st->q, nq, &e);
	if (rc != 0) {
		st->q_ready = 0;
		return rc == -ERANGE ? keep_all(st, buf, n, rc) : rc;
	}
	st->q_ready = 1;
	tally_psgd_decompress(st->p, st->q, rows, cols, rank, 1.0f, buf, n);
	return 0;
}
