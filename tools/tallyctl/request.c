/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A request's fate as an exit status and a message: tallyd's refusal (1)
 * or a socket that cannot be reached or a reply that is not one (3).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "tallyctl.h"

#define JSON_FLAGS	JSON_REAL_PRECISION(10)

static void
unreachable(const struct tallyctl *g, int err)
{
	const char *p = g->socket;

	switch (err) {
	case ETIMEDOUT:
		fprintf(stderr, "tallyctl: tallyd at %s did not answer within "
			"%u ms\n", p, g->timeout_ms);
		break;
	case ECONNRESET:
		fprintf(stderr, "tallyctl: tallyd at %s closed the connection "
			"without a reply\n", p);
		break;
	case EMSGSIZE:
		fprintf(stderr, "tallyctl: tallyd at %s sent a reply over "
			"%d KiB\n", p, TALLYCTL_REPLY_MAX / 1024);
		break;
	case EPROTO:
		fprintf(stderr, "tallyctl: tallyd at %s sent a malformed reply "
			"(not a JSON object with an errno)\n", p);
		break;
	default:
		fprintf(stderr, "tallyctl: cannot reach tallyd at %s: %s\n", p,
			strerror(err));
		break;
	}
}

int
tallyctl_call(const struct tallyctl *g, json_t *req, json_t **reply)
{
	const char *why;
	json_t *r;
	int ret, err;

	*reply = NULL;
	if (req == NULL) {
		fprintf(stderr, "tallyctl: %s\n", strerror(ENOMEM));
		return TALLYCTL_EXIT_UNREACHABLE;
	}
	ret = tallyctl_client_call(g->socket, g->timeout_ms, req, &r);
	json_decref(req);
	if (ret != 0) {
		unreachable(g, -ret);
		return TALLYCTL_EXIT_UNREACHABLE;
	}
	err = (int)json_integer_value(json_object_get(r, "errno"));
	if (err == 0) {
		*reply = r;
		return TALLYCTL_EXIT_OK;
	}
	if (g->json) {
		json_dumpf(r, stdout, JSON_FLAGS | (g->pretty ? JSON_INDENT(2) :
			0));
		putchar('\n');
		fflush(stdout);
	}
	why = json_string_value(json_object_get(r, "error"));
	if (why != NULL)
		fprintf(stderr, "tallyctl: %s\n", why);
	else
		fprintf(stderr, "tallyctl: tallyd refused the request: %s\n",
			strerror(err));
	json_decref(r);
	return TALLYCTL_EXIT_REFUSED;
}

int
tallyctl_print_json(const struct tallyctl *g, const json_t *reply)
{
	json_t *o = json_copy((json_t *)reply);

	if (o == NULL) {
		fprintf(stderr, "tallyctl: %s\n", strerror(ENOMEM));
		return TALLYCTL_EXIT_UNREACHABLE;
	}
	json_object_del(o, "errno");
	json_dumpf(o, stdout, JSON_FLAGS | (g->pretty ? JSON_INDENT(2) : 0));
	putchar('\n');
	json_decref(o);
	return TALLYCTL_EXIT_OK;
}

int
tallyctl_bad_reply(const struct tallyctl *g, const char *what)
{
	fprintf(stderr, "tallyctl: unexpected reply from tallyd at %s: %s\n",
		g->socket, what);
	return TALLYCTL_EXIT_UNREACHABLE;
}

int
tallyctl_printed(const struct tallyctl *g, int ret)
{
	if (ret == 0)
		return TALLYCTL_EXIT_OK;
	if (ret == -EPROTO)
		return tallyctl_bad_reply(g, "a key the contract promises is "
			"missing");
	fprintf(stderr, "tallyctl: %s\n", strerror(-ret));
	return TALLYCTL_EXIT_UNREACHABLE;
}
