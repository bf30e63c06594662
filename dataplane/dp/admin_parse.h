/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket's requests, from JSON text to a command and its
 * arguments: no DPDK, no socket and no tally-dp state, so unit tests and
 * the fuzzer call the very code tally-dp runs. admin.c serves the socket
 * and executes what these return.
 *
 * Every function that can fail returns 0 or -errno and writes a sentence
 * into why (wlen bytes, always terminated), the "error" of the reply.
 */
#ifndef TALLY_DP_ADMIN_PARSE_H
#define TALLY_DP_ADMIN_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <tally/limits.h>
#include <tally/roce.h>

#include "agg/job.h"

enum tally_admin_cmd {
	TALLY_ADMIN_PING,
	TALLY_ADMIN_JOB_ADD,
	TALLY_ADMIN_JOB_DEL,
	TALLY_ADMIN_JOB_LIST,
	TALLY_ADMIN_STATS,
	TALLY_ADMIN_LIST_COMMANDS,
	TALLY_ADMIN_CMD_MAX_,
};

/* A command's name and its request keys, as list_commands shows them. */
const char *tally_admin_cmd_name(enum tally_admin_cmd cmd);
const char *tally_admin_cmd_usage(enum tally_admin_cmd cmd);

/*
 * Parses a request: len bytes of text (borrowed; need not be terminated)
 * holding one JSON object without duplicate keys and with a string "cmd"
 * naming a command. On success *req is the object (the caller's, to
 * json_decref()) and *cmd its command; on failure *req is NULL and the
 * return is -EINVAL (not JSON, not an object with a string "cmd") or
 * -EOPNOTSUPP (no such command).
 */
int tally_admin_parse(const char *text, size_t len, json_t **req,
	enum tally_admin_cmd *cmd, char *why, size_t wlen);

/* The largest message either way on the admin socket. */
#define TALLY_ADMIN_MSG_MAX	(64 * 1024)

/*
 * job_add: {"id": 1..65535, "token": 16 hex digits, "world", "window"
 * (64), "max_elems" (256; for a RoCEv2 job 0 here: tally-dp derives it
 * from its path MTU), "narrow" (false), "members": [{"ip", "port"}
 * ...] by rank (UDP members) or [{"ip", "qpn", "port"?: 4791}, ...]
 * (RoCEv2 members: QPN 2..0xfffffe; a job's members are all one or all
 * the other),
 * "qkey" (0..0x7fffffff; TALLY_ROCE_QKEY(id), <tally/roce.h>), "group": {"ip",
 * "port"} (absent: unicast), "encodings": [NAME...] (absent: all)}.
 * Members are unicast host addresses (not 0.0.0.0/8, 127.0.0.0/8,
 * multicast or 240.0.0.0/4), no two with the same address and port
 * (QPN). Borrows req; fills *c whole (zeroing what the
 * request leaves out) and *encs (TALLY_ENC_BIT of each encoding the
 * members send at full length). Unknown keys are refused. Returns 0 or
 * -EINVAL.
 */
int tally_admin_parse_job_add(json_t *req, struct tally_job_conf *c,
	unsigned int *encs, char *why, size_t wlen);

/* job_del: {"id": 1..65535}. Borrows req. Returns 0 or -EINVAL. */
int tally_admin_parse_job_del(json_t *req, uint16_t *id, char *why,
	size_t wlen);

/*
 * job_list: {"after": 0..65535 (0), "limit": 1..65536 (65536)}: the jobs
 * whose id is above after, at most limit of them. Borrows req. Unknown
 * keys are refused. Returns 0 or -EINVAL.
 */
int tally_admin_parse_job_list(json_t *req, uint16_t *after,
	unsigned int *limit, char *why, size_t wlen);

#endif /* TALLY_DP_ADMIN_PARSE_H */
