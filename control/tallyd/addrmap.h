/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control-to-data address map (addrmap.c, rendezvous_data_map): which
 * data-network addresses a worker that reaches the rendezvous from a
 * control-network address may claim as its member address.
 */
#ifndef TALLYD_ADDRMAP_H
#define TALLYD_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tallyd_addrmap;

/*
 * Reads the map file at path: lines "CONTROL_IP DATA_IP [DATA_IP]...",
 * dotted quads separated by spaces or tabs, '#' comments, blank lines.
 * A control address may appear on several lines. Returns the map, or
 * NULL with errno (the file's, EINVAL for a bad line, ENOMEM) and the
 * reason, "PATH:LINE: ...", in why.
 */
struct tallyd_addrmap *tallyd_addrmap_load(const char *path, char *why,
	size_t wlen);

/* Frees m; NULL is fine. */
void tallyd_addrmap_destroy(struct tallyd_addrmap *m);

/* Pairs (control, data) the map holds. */
size_t tallyd_addrmap_size(const struct tallyd_addrmap *m);

/* true if m maps control address ctl to data address data (host order). */
bool tallyd_addrmap_allows(const struct tallyd_addrmap *m, uint32_t ctl,
	uint32_t data);

#endif /* TALLYD_ADDRMAP_H */
