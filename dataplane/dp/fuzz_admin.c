/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target fuzz-admin: the admin socket's request parser
 * (admin_parse.c), the code tally-dp runs on every request, fed the
 * input as the request text.
 *
 * Besides ASan (leaks included) and UBSan, it checks what must hold
 * whatever arrives: a refusal says why in a terminated sentence that
 * fits its buffer; a parsed request is an object naming a command; a
 * job_add that parses describes a job tally_job_create() would take, with
 * a real address for every member, nothing past world, and a multicast
 * group or none; a job_del that parses names an id.
 */
#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "admin_parse.h"

#define FUZZ_NAME "fuzz-admin"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal's sentence: non-empty and terminated inside its buffer. */
static void
check_why(const char *why, size_t wlen)
{
	CHECK(memchr(why, '\0', wlen) != NULL);
	CHECK(why[0] != '\0');
}

static void
check_job(const struct tally_job_conf *c)
{
	CHECK(c->world >= 1 && c->world <= TALLY_MAX_WORKERS);
	CHECK(c->window >= 1 && c->window <= TALLY_MAX_WINDOW);
	CHECK(c->max_elems >= 1 && c->max_elems <= TALLY_MAX_ELEMS);
	CHECK(c->narrow == 0 || c->narrow == 1);
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++) {
		if (r < c->world)
			CHECK(c->members[r].ip != 0 && c->members[r].port != 0);
		else
			CHECK(c->members[r].ip == 0 && c->members[r].port == 0);
	}
	if (c->group.ip == 0)
		CHECK(c->group.port == 0);
	else
		CHECK(IN_MULTICAST(ntohl(c->group.ip)) && c->group.port != 0);
}

static void
check_request(json_t *req, enum tally_admin_cmd cmd)
{
	/* Exactly what a reply's "error" gets in admin.c. */
	char why[256];
	struct tally_job_conf c;
	unsigned int encs, limit;
	uint16_t id, after;
	int ret;

	CHECK(json_is_object(req));
	CHECK(cmd < TALLY_ADMIN_CMD_MAX_);
	CHECK(strcmp(json_string_value(json_object_get(req, "cmd")),
		tally_admin_cmd_name(cmd)) == 0);
	memset(why, 0x55, sizeof(why));
	ret = tally_admin_parse_job_add(req, &c, &encs, why, sizeof(why));
	if (ret == 0) {
		check_job(&c);
		CHECK(c.id != 0);
		CHECK(encs != 0 && (encs & ~TALLY_ENC_ALL) == 0);
		CHECK(json_integer_value(json_object_get(req, "id")) == c.id);
	} else {
		CHECK(ret == -EINVAL);
		check_why(why, sizeof(why));
	}
	memset(why, 0x55, sizeof(why));
	ret = tally_admin_parse_job_del(req, &id, why, sizeof(why));
	if (ret == 0) {
		CHECK(json_integer_value(json_object_get(req, "id")) == id);
	} else {
		CHECK(ret == -EINVAL);
		check_why(why, sizeof(why));
	}
	memset(why, 0x55, sizeof(why));
	ret = tally_admin_parse_job_list(req, &after, &limit, why, sizeof(why));
	if (ret == 0) {
		CHECK(limit >= 1 && limit <= 65536);
	} else {
		CHECK(ret == -EINVAL);
		check_why(why, sizeof(why));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum tally_admin_cmd cmd = TALLY_ADMIN_CMD_MAX_;
	char why[256], tiny[4];
	json_t *req;
	int ret;

	memset(why, 0x55, sizeof(why));
	ret = tally_admin_parse((const char *)data, size, &req, &cmd, why,
		sizeof(why));
	if (ret != 0) {
		CHECK(ret == -EINVAL || ret == -EOPNOTSUPP);
		CHECK(req == NULL);
		check_why(why, sizeof(why));
	} else {
		CHECK(req != NULL);
		/* Every command's parsers, whatever the command. */
		check_request(req, cmd);
		json_decref(req);
	}
	/* The same with a buffer too small for any sentence. */
	ret = tally_admin_parse((const char *)data, size, &req, &cmd, tiny,
		sizeof(tiny));
	if (ret != 0)
		CHECK(memchr(tiny, '\0', sizeof(tiny)) != NULL);
	json_decref(req);
	return 0;
}
