/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lane arithmetic of the aggregator: folding one packet's elements into a
 * slot's 32-bit lanes, and turning finished lanes into a result payload.
 *
 * Lanes are 32-bit words, one per element: f32 for f32 sums and maxima,
 * i32 for everything else (narrow integers and sign votes are widened on
 * the way in). Payloads are read unaligned and little-endian.
 */
#ifndef TALLY_AGG_LANES_H
#define TALLY_AGG_LANES_H

#include <stdint.h>

/* How a round combines its contributions. */
enum tally_lane_op {
	TALLY_OP_SUM,
	TALLY_OP_MAX,
};

/*
 * First contribution of a round: lanes[0..n) = widen(payload). Borrows
 * payload (tally_enc_payload_len(enc, n) bytes). enc must be valid for op.
 */
void tally_lanes_init(uint32_t *lanes, const void *payload,
	enum tally_lane_op op, unsigned int enc, unsigned int n);

/* Every later contribution: lanes[i] = op(lanes[i], widen(payload[i])). */
void tally_lanes_fold(uint32_t *lanes, const void *payload,
	enum tally_lane_op op, unsigned int enc, unsigned int n);

/*
 * Rewrites the n finished lanes of a round in place into the result
 * encoding res_enc (see tally_enc_result()), at the start of lanes, and
 * returns the result's payload length in bytes. world is the number of
 * contributions (sign majority needs it). Maxima and f32/i32 sums are
 * their own result and come back unchanged.
 */
unsigned int tally_lanes_finish(uint32_t *lanes, unsigned int res_enc,
	unsigned int n, unsigned int world);

#endif /* TALLY_AGG_LANES_H */
