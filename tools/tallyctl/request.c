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

/* The most items tallyctl asks for a page (tallyd may send fewer). */
#define TALLYCTL_PAGE	1000

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

/*
 * Adds page's "key" items to *all (the first page becomes *all). Reads
 * "more" and "next" first. Returns 1 when more pages follow (their cursor
 * in *after), 0 at the end, -1 for a page that breaks the contract.
 */
static int
add_page(json_t **all, json_t *page, const char *key, json_int_t *after)
{
	json_t *items = json_object_get(page, key);
	json_t *next = json_object_get(page, "next");
	bool more = json_is_true(json_object_get(page, "more"));
	int ret = more ? 1 : 0;

	if (!json_is_array(items) || (more && (!json_is_integer(next) ||
			json_integer_value(next) <= *after)))
		ret = -1;
	else if (more)
		*after = json_integer_value(next);
	if (ret >= 0 && *all == NULL)
		*all = json_incref(page);
	else if (ret >= 0 && json_array_extend(json_object_get(*all, key),
			items) != 0)
		ret = -1;
	json_decref(page);
	return ret;
}

int
tallyctl_call_list(const struct tallyctl *g, const char *cmd,
	const char *key, json_t **reply)
{
	json_int_t after = -1;
	json_t *all = NULL, *page, *req;
	int ret, more;

	*reply = NULL;
	do {
		req = json_pack("{s:s, s:i}", "cmd", cmd, "limit",
			TALLYCTL_PAGE);
		if (req != NULL && after >= 0 && json_object_set_new(req,
				"after", json_integer(after)) != 0) {
			json_decref(req);
			req = NULL;
		}
		ret = tallyctl_call(g, req, &page);
		if (ret != 0) {
			json_decref(all);
			return ret;
		}
		more = add_page(&all, page, key, &after);
	} while (more > 0);
	if (more < 0) {
		json_decref(all);
		return tallyctl_bad_reply(g, "a page of the listing without "
			"its array, or whose \"next\" does not move on");
	}
	json_object_del(all, "more");
	json_object_del(all, "next");
	*reply = all;
	return TALLYCTL_EXIT_OK;
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
