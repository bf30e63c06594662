/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bf16 and f16 reduce-scatter (coll.c's tally_reduce_scatter()):
 * the whole send tensor into the shared-scale fixed point of
 * <tally/fixp16.h> with one MAX round over all of it, as the f32
 * reduce-scatter takes its scale, in the lanes tally_allreduce_typed()
 * would take (tally_ctx_lanes()), then SCATTER rounds; only this rank's
 * shard comes back, and it is rounded once to the type. So rank r gets
 * the very bits of shard r of a tally_allreduce_typed() of the same
 * tensors.
 */
#include "ctx.h"

/*
 * Reduce-scatter of dt (bf16 or f16): send's world x count elements,
 * this rank's shard of the sums into recv. Called after coll.c's
 * checks (count > 0). Borrows send and recv.
 */
int
tally_lib_rs16(struct tally_ctx *ctx, const uint16_t *send, uint16_t *recv,
	size_t count, enum tally_dtype dt)
{
	return tally_lib_fixp16_run(ctx, TALLY_PT_SCATTER, send, recv,
		count * ctx->rank, count * ctx->world, count, dt);
}
