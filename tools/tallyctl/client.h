/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One request to tallyd's control socket and its reply: Unix
 * SOCK_SEQPACKET, one JSON object per message each way (docs/control.md).
 */
#ifndef TALLYCTL_CLIENT_H
#define TALLYCTL_CLIENT_H

#include <jansson.h>

/* The largest reply tallyctl takes. */
#define TALLYCTL_REPLY_MAX	(64 * 1024)

/*
 * Connects to the socket at path, sends req (borrowed) and waits for the
 * reply, timeout_ms in all. Returns 0 with *reply, a JSON object with an
 * integer "errno" (the caller owns it), or -errno: connect's (-ENOENT,
 * -ECONNREFUSED, -EACCES, -ENAMETOOLONG...), -ETIMEDOUT (no connection or
 * no reply in time), -ECONNRESET (closed without a reply), -EMSGSIZE (a
 * reply over TALLYCTL_REPLY_MAX) or -EPROTO (a reply that is not an
 * object with an integer errno).
 */
int tallyctl_client_call(const char *path, unsigned int timeout_ms,
	const json_t *req, json_t **reply);

#endif /* TALLYCTL_CLIENT_H */
