/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loading an NCCL net plugin the way NCCL 2.28 does (tests only): dlopen
 * with RTLD_NOW | RTLD_LOCAL, ncclNetPlugin_v11 down to _v6 first, and
 * only in a library that has a net table the collnet table, in the same
 * order. The tests drive version 11 (gpu/nccl/abi.h) and refuse others.
 * A logger in NCCL's shape keeps the last WARN line and counts them.
 */
#ifndef TALLY_TESTS_NCCL_LOAD_H
#define TALLY_TESTS_NCCL_LOAD_H

#include "abi.h"

#define TNL_VERSION_HI	11
#define TNL_VERSION_LO	6

struct tnl_plugin {
	void *dl;
	int net_version;	/* 0: none found */
	int coll_version;
	const struct tally_nccl_net *net;	/* when net_version is 11 */
	const struct tally_nccl_collnet *coll;	/* when coll_version is 11 */
};

/* Loads path into *p; 0, or -1 with why filled (dlerror, no table). */
int tnl_load(const char *path, struct tnl_plugin *p, char *why, size_t len);

/* dlcloses the library. */
void tnl_unload(struct tnl_plugin *p);

/* The logger to pass to init (ncclDebugLogger_t's shape). */
void tnl_logger(int level, unsigned long flags, const char *file, int line,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* WARN lines logged so far, and the last one ("" if none). */
unsigned int tnl_warns(void);
const char *tnl_last_warn(void);

/* With verbose set, every line logged is printed to stderr too. */
void tnl_verbose(int on);

#endif /* TALLY_TESTS_NCCL_LOAD_H */
