/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control-socket requests (docs/control.md, "Control socket") from JSON
 * to a struct: no I/O and no daemon state, so the fuzzer calls it as is.
 */
#ifndef TALLYD_CTL_PARSE_H
#define TALLYD_CTL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>

#include "rdv/msg.h"

enum tallyd_ctl_cmd {
	TALLYD_CTL_PING,
	TALLYD_CTL_JOB_CREATE,
	TALLYD_CTL_JOB_LIST,
	TALLYD_CTL_JOB_SHOW,
	TALLYD_CTL_JOB_DELETE,
	TALLYD_CTL_STATS,
	TALLYD_CTL_LIST_COMMANDS,
	TALLYD_CTL_MAX_,
};

/* job_create's "dataplanes": names of 1..31 of [A-Za-z0-9_.-]. */
#define TALLYD_CTL_MAX_DPS	8
#define TALLYD_CTL_DP_NAME_MAX	31
/* job_create's "leaves": 1..64 dataplanes; a tree's total world. */
#define TALLYD_CTL_MAX_LEAVES	64
#define TALLYD_CTL_TREE_WORLD_MAX	4096

struct tallyd_ctl_req {
	enum tallyd_ctl_cmd cmd;
	char name[TALLY_RDV_NAME_MAX + 1];	/* job_create/show/delete */
	/* job_create; defaults filled in */
	unsigned int world;
	unsigned int window;
	unsigned int max_elems;
	bool has_max_elems;	/* given; else TALLY_DEFAULT_ELEMS, and an
				 * RDMA job's fits the path MTU */
	bool narrow;
	bool rdma;		/* "transport": "rdma" (else "udp") */
	bool auth;		/* an authenticated job (docs/protocol.md) */
	uint32_t group_ip;			/* host order; 0: none */
	uint16_t group_port;
	unsigned int idle_timeout_s;
	bool has_idle_timeout;			/* else: the daemon's */
	char codec[TALLY_CODEC_SPEC_MAX];	/* canonical spec; "fixp" */
	unsigned int ndataplanes;		/* 0: the first dataplane */
	char dataplanes[TALLYD_CTL_MAX_DPS][TALLYD_CTL_DP_NAME_MAX + 1];
	/* A two-tier tree ("leaves" and "spine"; world is then the total) */
	unsigned int nleaves;			/* 0: a flat job */
	char leaves[TALLYD_CTL_MAX_LEAVES][TALLYD_CTL_DP_NAME_MAX + 1];
	char spine[TALLYD_CTL_DP_NAME_MAX + 1];
	/* job_list: a page of the jobs with an id above after */
	unsigned int after;
	unsigned int limit;			/* 0: as many as fit */
	bool paged;				/* after or limit given */
};

/* The largest job_list "limit". */
#define TALLYD_CTL_LIMIT_MAX	65535

/* The command's name and usage line, for list_commands. */
const char *tallyd_ctl_cmd_name(enum tallyd_ctl_cmd c);
const char *tallyd_ctl_cmd_usage(enum tallyd_ctl_cmd c);

/*
 * Parses one request of len bytes. Borrows buf. Returns 0, -EINVAL (bad
 * JSON, a missing or bad key, an unknown key) or -EOPNOTSUPP (unknown
 * command), with a sentence in why.
 */
int tallyd_ctl_parse(const char *buf, size_t len, struct tallyd_ctl_req *r,
	char *why, size_t wlen);

#endif /* TALLYD_CTL_PARSE_H */
