/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state file: every job, with its token's hash, its programmed
 * membership and its counters, so that a restarted tallyd carries on
 * where it stopped. Written whole and atomically (a temporary file,
 * fsync, rename over the old one, fsync of the directory): a crash leaves
 * either the old file or the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <sodium.h>

#include "tallyd.h"

#define STATE_VERSION 1

static json_t *
ctr_json(const struct tallyd_ctr *c)
{
	const uint64_t *v = (const uint64_t *)(const void *)c;
	json_t *o = json_object();

	for (size_t i = 0; i < TALLYD_NCTR; i++)
		json_object_set_new(o, tallyd_ctr_names[i],
			json_integer((json_int_t)v[i]));
	return o;
}

static void
ctr_load(json_t *o, struct tallyd_ctr *c)
{
	uint64_t *v = (uint64_t *)(void *)c;

	for (size_t i = 0; i < TALLYD_NCTR; i++) {
		json_t *x = json_object_get(o, tallyd_ctr_names[i]);

		v[i] = json_is_integer(x) && json_integer_value(x) > 0 ?
			(uint64_t)json_integer_value(x) : 0;
	}
}

static json_t *
job_state_json(const struct tallyd_job *j)
{
	char hash[65], tok[17];
	json_t *o;

	sodium_bin2hex(hash, sizeof(hash), j->token_hash,
		sizeof(j->token_hash));
	o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:b, s:I, s:I, s:I, s:s, "
		"s:I, s:I, s:o, s:o}",
		"name", j->name, "id", j->id, "world", j->world,
		"window", j->window, "max_elems", j->max_elems,
		"narrow", j->narrow, "group_ip", (json_int_t)j->group_ip,
		"group_port", (json_int_t)j->group_port,
		"idle_timeout_s", (json_int_t)j->idle_timeout_s,
		"token_hash", hash, "created", (json_int_t)j->created,
		"last_active", (json_int_t)j->last_active,
		"counters_base", ctr_json(&j->base),
		"counters_last", ctr_json(&j->last));
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "epoch", json_integer(j->epoch));
	json_object_set_new(o, "codec", json_string(j->codec));
	if (j->has_members) {
		json_t *m = json_array();

		for (unsigned int r = 0; r < j->world; r++)
			json_array_append_new(m, json_pack("{s:I, s:i}", "ip",
				(json_int_t)j->members[r].ip, "port",
				j->members[r].port));
		snprintf(tok, sizeof(tok), "%016llx",
			(unsigned long long)j->wire_token);
		json_object_set_new(o, "members", m);
		json_object_set_new(o, "wire_token", json_string(tok));
	}
	return o;
}

/* Writes all of buf to fd. */
static int
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
tallyd_state_save(struct tallyd *d)
{
	char tmp[300], dir[256];
	json_t *root, *jobs = json_array();
	struct tallyd_job *j;
	char *text;
	int fd, ret;

	for (j = d->jobs; j != NULL; j = j->next)
		json_array_append_new(jobs, job_state_json(j));
	root = json_pack("{s:i, s:I, s:o}", "version", STATE_VERSION,
		"next_epoch", (json_int_t)d->next_epoch, "jobs", jobs);
	text = root != NULL ? json_dumps(root, JSON_INDENT(1)) : NULL;
	json_decref(root);
	if (text == NULL)
		return -ENOMEM;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->conf.state_file);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out_free;
	}
	ret = write_all(fd, text, strlen(text));
	if (ret == 0)
		ret = write_all(fd, "\n", 1);
	if (ret == 0 && fsync(fd) != 0)
		ret = -errno;
	if (close(fd) != 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, d->conf.state_file) != 0)
		ret = -errno;
	if (ret != 0) {
		unlink(tmp);
		goto out_free;
	}
	/* The rename is durable once the directory is. */
	snprintf(dir, sizeof(dir), "%s", d->conf.state_file);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
out_free:
	free(text);
	if (ret != 0)
		tallyd_log("cannot write state file %s: %s",
			d->conf.state_file, strerror(-ret));
	return ret;
}

static int
load_job(struct tallyd *d, json_t *o, char *why, size_t wlen)
{
	json_int_t id, world, window, elems, gip, gport, idle, created, last;
	json_int_t epoch = 0;
	int narrow;
	const char *name, *hash, *wtok = NULL, *codec = "fixp";
	struct tally_codec cc;
	json_t *members = NULL, *base = NULL, *lst = NULL;
	json_error_t err;
	struct tallyd_job *j;
	size_t n = 0;

	if (json_unpack_ex(o, &err, 0, "{s:s, s:I, s:I, s:I, s:I, s:b, s:I, "
			"s:I, s:I, s:s, s:I, s:I, s?I, s?o, s?s, s?o, s?o, s?s}",
			"name", &name, "id", &id, "world", &world,
			"window", &window, "max_elems", &elems,
			"narrow", &narrow, "group_ip", &gip,
			"group_port", &gport, "idle_timeout_s", &idle,
			"token_hash", &hash, "created", &created,
			"last_active", &last, "epoch", &epoch,
			"members", &members, "wire_token", &wtok,
			"counters_base", &base, "counters_last", &lst,
			"codec", &codec) != 0) {
		snprintf(why, wlen, "a job: %s", err.text);
		return -EINVAL;
	}
	if (!tally_rdv_name_ok(name) || id < 1 || id > UINT16_MAX ||
			world < 1 || world > TALLY_MAX_WORKERS || window < 1 ||
			window > 32768 || elems < 1 ||
			elems > TALLY_MAX_ELEMS || gip < 0 ||
			gip > UINT32_MAX || gport < 0 || gport > 65535 ||
			idle < 0 || idle > UINT32_MAX || epoch < 0 ||
			epoch > UINT32_MAX || tallyd_job_find(d, name) != NULL ||
			tally_codec_parse(codec, &cc, NULL, 0) != 0 ||
			strlen(codec) >= TALLY_CODEC_SPEC_MAX ||
			tallyd_job_find_id(d, (uint16_t)id) != NULL) {
		snprintf(why, wlen, "job '%.64s': a value out of range, or "
			"a name or id twice", name);
		return -EINVAL;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	strcpy(j->name, name);
	j->id = (uint16_t)id;
	j->world = (uint8_t)world;
	j->window = (uint16_t)window;
	j->max_elems = (uint16_t)elems;
	j->narrow = narrow;
	j->group_ip = (uint32_t)gip;
	j->group_port = (uint16_t)gport;
	j->idle_timeout_s = (unsigned int)idle;
	j->created = created;
	j->last_active = last;
	j->epoch = (uint32_t)epoch;
	strcpy(j->codec, codec);
	if (sodium_hex2bin(j->token_hash, sizeof(j->token_hash), hash,
			strlen(hash), NULL, &n, NULL) != 0 ||
			n != sizeof(j->token_hash)) {
		free(j);
		snprintf(why, wlen, "job '%s': bad token_hash", name);
		return -EINVAL;
	}
	if (members != NULL) {
		json_t *m;
		size_t r;

		if (!json_is_array(members) ||
				json_array_size(members) != (size_t)world ||
				wtok == NULL || strlen(wtok) != 16 ||
				strspn(wtok, "0123456789abcdef") != 16) {
			free(j);
			snprintf(why, wlen, "job '%s': bad membership", name);
			return -EINVAL;
		}
		json_array_foreach(members, r, m) {
			json_int_t ip = json_integer_value(json_object_get(m,
				"ip"));
			json_int_t port = json_integer_value(
				json_object_get(m, "port"));

			if (ip <= 0 || ip > UINT32_MAX || port < 1 ||
					port > 65535) {
				free(j);
				snprintf(why, wlen, "job '%s': bad member %zu",
					name, r);
				return -EINVAL;
			}
			j->members[r].ip = (uint32_t)ip;
			j->members[r].port = (uint16_t)port;
		}
		j->wire_token = strtoull(wtok, NULL, 16);
		j->has_members = true;
	}
	if (base != NULL)
		ctr_load(base, &j->base);
	if (lst != NULL)
		ctr_load(lst, &j->last);
	tallyd_job_link(d, j);
	return 0;
}

int
tallyd_state_load(struct tallyd *d, char *why, size_t wlen)
{
	json_error_t err;
	json_t *root, *jobs, *o;
	json_int_t version, next_epoch;
	size_t i;
	int ret = 0;

	root = json_load_file(d->conf.state_file, JSON_REJECT_DUPLICATES, &err);
	if (root == NULL) {
		if (access(d->conf.state_file, F_OK) != 0 && errno == ENOENT)
			return 0;	/* first start */
		snprintf(why, wlen, "%s:%d: %s", d->conf.state_file, err.line,
			err.text);
		return -EINVAL;
	}
	if (json_unpack_ex(root, &err, 0, "{s:I, s:I, s:o}", "version",
			&version, "next_epoch", &next_epoch, "jobs",
			&jobs) != 0 || version != STATE_VERSION ||
			!json_is_array(jobs) || next_epoch < 0 ||
			next_epoch > UINT32_MAX) {
		snprintf(why, wlen, "%s: not a version %d state file",
			d->conf.state_file, STATE_VERSION);
		json_decref(root);
		return -EINVAL;
	}
	d->next_epoch = (uint32_t)next_epoch;
	json_array_foreach(jobs, i, o) {
		char r[200];

		if ((ret = load_job(d, o, r, sizeof(r))) != 0) {
			snprintf(why, wlen, "%s: %s", d->conf.state_file, r);
			break;
		}
	}
	json_decref(root);
	return ret;
}
