/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Between epoch.c (dead dataplanes, remaps, new epochs), rejoin.c (ranks
 * that come back after a failed call) and rdv.c (the rendezvous that
 * hands both to them). The rest of tallyd uses what tallyd.h declares.
 */
#ifndef TALLYD_EPOCH_H
#define TALLYD_EPOCH_H

#include "tallyd.h"
#include "rdv.h"

/* Programs j's membership under a new wire token at its shards (retried
 * from tallyd_epoch_tick() while busy or failed). */
void tallyd_epoch_program(struct tallyd *d, struct tallyd_job *j);

/*
 * Checks c's rejoin (join message m naming an epoch) of j: fails c and
 * returns false when it is stale, names an epoch j has not had, or its
 * rank rejoins twice.
 */
bool tallyd_rejoin_ok(struct tallyd *d, struct tallyd_rdv_conn *c,
	struct tallyd_job *j, const struct tally_rdv_msg *m);
/* After params went out: c waits among j's rejoiners. */
void tallyd_rejoin_add(struct tallyd *d, struct tallyd_rdv_conn *c,
	struct tallyd_job *j, const struct tally_rdv_msg *m);
/* A rejoiner's member message: it must be its membership's address. */
void tallyd_rejoin_member(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m);
/* Fails every rejoiner of j with err (positive) and the sentence msg. */
void tallyd_rejoin_fail_all(struct tallyd *d, struct tallyd_job *j, int err,
	enum tallyd_join_fail why, const char *msg);
/* c's last message: no live dataplane for j (ENOSPC, fallback "ring"). */
void tallyd_rdv_no_capacity(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tallyd_job *j);

#endif /* TALLYD_EPOCH_H */
