/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-source counters of the rendezvous (srcs.c): a count per IPv4
 * address, for the per-source connection cap.
 */
#ifndef TALLYD_SRCS_H
#define TALLYD_SRCS_H

#include <stdint.h>

struct tallyd_srcs;

/*
 * A table for up to max distinct sources (1..2^24). Returns NULL with
 * errno EINVAL or ENOMEM.
 */
struct tallyd_srcs *tallyd_srcs_create(unsigned int max);

/* Frees t; NULL is fine. */
void tallyd_srcs_destroy(struct tallyd_srcs *t);

/* ip's count (host order); 0 for a source not in the table. */
unsigned int tallyd_srcs_get(const struct tallyd_srcs *t, uint32_t ip);

/* Adds one to ip's count. Returns 0, or -ENOSPC with max sources held. */
int tallyd_srcs_add(struct tallyd_srcs *t, uint32_t ip);

/* Takes one from ip's count; at 0 the source leaves the table. */
void tallyd_srcs_sub(struct tallyd_srcs *t, uint32_t ip);

/* Distinct sources with a count above 0. */
unsigned int tallyd_srcs_used(const struct tallyd_srcs *t);

#endif /* TALLYD_SRCS_H */
