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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <sodium.h>

#include "tallyd.h"
#include "cluster.h"

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

json_t *
tallyd_state_job_json(const struct tallyd *d, const struct tallyd_job *j)
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
		"counters_last", ctr_json(&j->sh[0].last));
	if (o == NULL)
		return NULL;
	tallyd_tree_state_json(j, o);
	/* A job on other dataplanes than the first alone (dps.c). */
	if (j->nshards > 1 || j->sh[0].dp != 0)
		json_object_set_new(o, "shards", tallyd_shards_json(d, j,
			false));
	json_object_set_new(o, "epoch", json_integer(j->epoch));
	json_object_set_new(o, "formed_epoch", json_integer(j->formed_epoch));
	json_object_set_new(o, "epoch_reason", tallyd_epoch_json(j));
	if (j->auth) {
		/* The job's secret: the state file is tallyd's alone (0600). */
		char sec[2 * sizeof(j->auth_secret) + 1];

		sodium_bin2hex(sec, sizeof(sec), j->auth_secret,
			sizeof(j->auth_secret));
		json_object_set_new(o, "auth_secret", json_string(sec));
		sodium_memzero(sec, sizeof(sec));
	}
	json_object_set_new(o, "codec", json_string(j->codec));
	if (j->rdma)
		json_object_set_new(o, "qkey", json_integer(j->qkey));
	if (j->has_members) {
		json_t *m = json_array();

		for (unsigned int r = 0; r < j->world; r++)
			json_array_append_new(m, json_pack("{s:I, s:i, s:I}",
				"ip", (json_int_t)j->members[r].ip, "port",
				j->members[r].port, "qpn",
				(json_int_t)j->members[r].qpn));
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

/* Where saves go: the file, or its symlink's target once loaded. */
static const char *
state_path(const struct tallyd *d)
{
	return d->sf.path[0] != '\0' ? d->sf.path : d->conf.state_file;
}

/* The file's text: every job but skip. Caller frees; NULL: no memory. */
static char *
state_text(const struct tallyd *d, const struct tallyd_job *skip)
{
	json_t *root, *jobs = json_array();
	const struct tallyd_job *j;
	char *text;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j != skip && json_array_append_new(jobs,
				tallyd_state_job_json(d, j)) != 0) {
			json_decref(jobs);
			return NULL;
		}
	root = json_pack("{s:i, s:I, s:o}", "version", STATE_VERSION,
		"next_epoch", (json_int_t)d->next_epoch, "jobs", jobs);
	text = root != NULL ? json_dumps(root, JSON_INDENT(1)) : NULL;
	json_decref(root);
	return text;
}

/*
 * Writes text to tmp (created 0600, fsynced) and renames it over path.
 * *step names what failed. Leaves no tmp behind on failure.
 */
static int
write_rename(const char *tmp, const char *path, const char *text,
	const char **step)
{
	int fd, ret;

	*step = "creating the temporary file";
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		0600);
	if (fd < 0)
		return -errno;
	*step = "writing the temporary file";
	ret = write_all(fd, text, strlen(text));
	if (ret == 0)
		ret = write_all(fd, "\n", 1);
	if (ret == 0 && fsync(fd) != 0) {
		*step = "syncing the temporary file";
		ret = -errno;
	}
	if (close(fd) != 0 && ret == 0) {
		*step = "closing the temporary file";
		ret = -errno;
	}
	if (ret == 0 && rename(tmp, path) != 0) {
		*step = "renaming the temporary file over it";
		ret = -errno;
	}
	if (ret != 0)
		unlink(tmp);
	return ret;
}

/*
 * One durable write of text. The directory is opened first, so that a
 * shortage of file descriptors fails before anything changes, and
 * fsynced after the rename, which makes the rename itself durable.
 */
static int
write_durably(const char *path, const char *text, const char **step)
{
	char tmp[sizeof(((struct tallyd_statefile *)0)->path) + 8];
	char dir[sizeof(tmp)];
	int dfd, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(dir, sizeof(dir), "%s", path);
	*step = "opening its directory";
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	ret = write_rename(tmp, path, text, step);
	if (ret == 0 && fsync(dfd) != 0) {
		*step = "syncing its directory";
		ret = -errno;
	}
	close(dfd);
	return ret;
}

/*
 * A failed save: counted, kept for stats, logged (not every retry).
 * sentence: etcd's reason (NULL: the state file's, from err and step).
 */
static void
save_failed(struct tallyd *d, int err, const char *step,
	const char *sentence)
{
	int64_t now = tallyd_now_ms();
	char was[sizeof(d->sf.error)];

	d->st.state_save_failures++;
	d->sf.streak++;
	d->sf.failing = true;
	d->sf.retry_ms = now + 1000;
	d->state_dirty = true;
	memcpy(was, d->sf.error, sizeof(was));
	if (sentence != NULL)
		snprintf(d->sf.error, sizeof(d->sf.error),
			"cannot save state in etcd: %.400s", sentence);
	else
		snprintf(d->sf.error, sizeof(d->sf.error),
			"cannot save state file %.400s: %s", state_path(d),
			strerror(err));
	d->sf.error_at = tallyd_wall_s();
	if (strcmp(was, d->sf.error) == 0 && d->sf.streak > 1 &&
			now - d->sf.logged_ms < 60000)
		return;
	d->sf.logged_ms = now;
	tallyd_log("%s (%s; %u failed in a row)", d->sf.error, step,
		d->sf.streak);
}

/* tallyd_state_save_except() with etcd (state_etcd.c does the work). */
static int
save_etcd(struct tallyd *d, const struct tallyd_job *skip)
{
	char why[400];
	int ret = tallyd_cluster_save(d, skip, why, sizeof(why));

	if (ret != 0) {
		save_failed(d, -ret, "a txn", why);
		return ret;
	}
	if (d->sf.failing)
		tallyd_log("state saved in etcd again, after %u failed "
			"attempts", d->sf.streak);
	d->st.state_saves++;
	d->sf.failing = false;
	d->sf.streak = 0;
	d->state_dirty = false;
	return 0;
}

int
tallyd_state_save_except(struct tallyd *d, const struct tallyd_job *skip)
{
	const char *step = "rendering";
	char *text;
	int ret;

	if (d->cl != NULL)
		return save_etcd(d, skip);
	text = state_text(d, skip);
	ret = text != NULL ? write_durably(state_path(d), text, &step) :
		-ENOMEM;
	free(text);
	if (ret != 0) {
		save_failed(d, -ret, step, NULL);
		return ret;
	}
	if (d->sf.failing)
		tallyd_log("state file %s saved again, after %u failed "
			"attempts", state_path(d), d->sf.streak);
	d->st.state_saves++;
	d->sf.failing = false;
	d->sf.streak = 0;
	d->state_dirty = false;
	return 0;
}

int
tallyd_state_save(struct tallyd *d)
{
	return tallyd_state_save_except(d, NULL);
}

int64_t
tallyd_state_flush(struct tallyd *d, int64_t now)
{
	if (!d->state_dirty)
		return -1;
	if (!d->sf.failing || now >= d->sf.retry_ms)
		tallyd_state_save(d);
	if (!d->state_dirty)
		return -1;
	return d->sf.retry_ms > now ? d->sf.retry_ms - now : 0;
}

void
tallyd_state_stats(const struct tallyd *d, json_t *o)
{
	json_object_set_new(o, "state_saves",
		json_integer((json_int_t)d->st.state_saves));
	json_object_set_new(o, "state_save_failures",
		json_integer((json_int_t)d->st.state_save_failures));
	json_object_set_new(o, "state_unsaved", json_boolean(d->state_dirty));
	json_object_set_new(o, "state_last_error", d->sf.error[0] != '\0' ?
		json_string(d->sf.error) : json_null());
	json_object_set_new(o, "state_last_error_at", d->sf.error[0] != '\0' ?
		json_integer((json_int_t)d->sf.error_at) : json_null());
	tallyd_cluster_stats(d, o);
}

int
tallyd_state_parse_job(struct tallyd *d, json_t *o, struct tallyd_job *j,
	char *why, size_t wlen)
{
	json_int_t id, world, window, elems, gip, gport, idle, created, last;
	json_int_t epoch = 0, qkey = -1;
	int narrow;
	const char *name, *hash, *wtok = NULL, *codec = "fixp", *asec = NULL;
	struct tally_codec cc;
	json_t *members = NULL, *base = NULL, *lst = NULL, *shards = NULL;
	json_error_t err;
	size_t n = 0;

	if (json_unpack_ex(o, &err, 0, "{s:s, s:I, s:I, s:I, s:I, s:b, s:I, "
			"s:I, s:I, s:s, s:I, s:I, s?I, s?o, s?s, s?o, s?o, s?s, "
			"s?s, s?I, s?o}",
			"name", &name, "id", &id, "world", &world,
			"window", &window, "max_elems", &elems,
			"narrow", &narrow, "group_ip", &gip,
			"group_port", &gport, "idle_timeout_s", &idle,
			"token_hash", &hash, "created", &created,
			"last_active", &last, "epoch", &epoch,
			"members", &members, "wire_token", &wtok,
			"counters_base", &base, "counters_last", &lst,
			"codec", &codec, "auth_secret", &asec,
			"qkey", &qkey, "shards", &shards) != 0) {
		snprintf(why, wlen, "a job: %s", err.text);
		return -EINVAL;
	}
	if (!tallyd_tree_name_ok(name) || id < 1 || id > UINT16_MAX ||
			world < 1 || world > TALLY_MAX_WORKERS || window < 1 ||
			window > 32768 || elems < 1 ||
			elems > TALLY_MAX_ELEMS || gip < 0 ||
			gip > UINT32_MAX || gport < 0 || gport > 65535 ||
			idle < 0 || idle > UINT32_MAX || epoch < 0 ||
			epoch > UINT32_MAX ||
			qkey > 0x7fffffff || qkey == 0 ||
			tally_codec_parse(codec, &cc, NULL, 0) != 0 ||
			strlen(codec) >= TALLY_CODEC_SPEC_MAX) {
		snprintf(why, wlen, "job '%.64s': a value out of range", name);
		return -EINVAL;
	}
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
	j->rdma = qkey > 0;	/* an RDMA job keeps its Q_Key */
	j->qkey = j->rdma ? (uint32_t)qkey : 0;
	strcpy(j->codec, codec);
	j->auth = asec != NULL;
	if (asec != NULL && (sodium_hex2bin(j->auth_secret,
			sizeof(j->auth_secret), asec, strlen(asec), NULL, &n,
			NULL) != 0 || n != sizeof(j->auth_secret))) {
		snprintf(why, wlen, "job '%s': bad auth_secret", name);
		return -EINVAL;
	}
	if (sodium_hex2bin(j->token_hash, sizeof(j->token_hash), hash,
			strlen(hash), NULL, &n, NULL) != 0 ||
			n != sizeof(j->token_hash)) {
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
			snprintf(why, wlen, "job '%s': bad membership", name);
			return -EINVAL;
		}
		json_array_foreach(members, r, m) {
			json_int_t ip = json_integer_value(json_object_get(m,
				"ip"));
			json_int_t port = json_integer_value(
				json_object_get(m, "port"));
			json_int_t qpn = json_integer_value(
				json_object_get(m, "qpn"));

			if (ip <= 0 || ip > UINT32_MAX || port < 1 ||
					port > 65535 || qpn < 0 ||
					qpn > 0xffffff) {
				snprintf(why, wlen, "job '%s': bad member %zu",
					name, r);
				return -EINVAL;
			}
			j->members[r].ip = (uint32_t)ip;
			j->members[r].port = (uint16_t)port;
			j->members[r].qpn = (uint32_t)qpn;
		}
		j->wire_token = strtoull(wtok, NULL, 16);
		j->has_members = true;
	}
	if (base != NULL)
		ctr_load(base, &j->base);
	if (lst != NULL)
		ctr_load(lst, &j->sh[0].last);
	if (tallyd_epoch_load(j, o, why, wlen) != 0 ||
			tallyd_tree_state_load(j, o, why, wlen) != 0)
		return -EINVAL;
	return tallyd_shards_load(d, j, shards, why, wlen);
}

/* One job of the file into d; a name or an id twice is an error. */
static int
load_job(struct tallyd *d, json_t *o, char *why, size_t wlen)
{
	struct tallyd_job *j = calloc(1, sizeof(*j));
	int ret;

	if (j == NULL)
		return -ENOMEM;
	ret = tallyd_state_parse_job(d, o, j, why, wlen);
	/* A two-tier tree's parts share an id, and only they. */
	if (ret == 0 && (tallyd_job_find(d, j->name) != NULL ||
			tallyd_tree_id_clash(d, j) != NULL)) {
		snprintf(why, wlen, "job '%s': a name or id twice", j->name);
		ret = -EINVAL;
	}
	if (ret != 0) {
		sodium_memzero(j, sizeof(*j));
		free(j);
		return ret;
	}
	tallyd_job_link(d, j);
	return 0;
}

/* why gets "WHAT PATH is a symlink to TARGET, which does not exist". */
static int
dangling(const char *what, const char *path, char *why, size_t wlen)
{
	char to[512];
	ssize_t n = readlink(path, to, sizeof(to) - 1);

	to[n > 0 ? n : 0] = '\0';
	snprintf(why, wlen, "%s %s is a symlink to %s, which does not exist",
		what, path, n > 0 ? to : "?");
	return -ENOENT;
}

/*
 * Checks the state file's directory and the file before a load; a
 * symlinked file's target becomes d->sf.path. Returns 1 for a first start
 * (no file, in a directory that exists), 0 for a file to read, or -errno
 * with why.
 */
static int
state_locate(struct tallyd *d, char *why, size_t wlen)
{
	const char *path = d->conf.state_file;
	char buf[sizeof(d->conf.state_file)], *dir;
	struct stat st;
	int err;

	snprintf(buf, sizeof(buf), "%s", path);
	dir = dirname(buf);
	if (stat(dir, &st) != 0) {
		err = errno;
		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
			return dangling("state directory", dir, why, wlen);
		snprintf(why, wlen, "state directory %s: %s (it must exist "
			"and be writable)", dir, strerror(err));
		return -err;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, wlen, "state directory %s is not a directory",
			dir);
		return -ENOTDIR;
	}
	if (lstat(path, &st) != 0) {
		err = errno;
		if (err == ENOENT)
			return 1;
		snprintf(why, wlen, "state file %s: %s", path, strerror(err));
		return -err;
	}
	if (S_ISLNK(st.st_mode)) {
		char *to = realpath(path, NULL);

		if (to == NULL)
			return dangling("state file", path, why, wlen);
		snprintf(d->sf.path, sizeof(d->sf.path), "%s", to);
		free(to);
		if (stat(d->sf.path, &st) != 0)
			st.st_mode = 0;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, wlen, "state file %s is not a regular file",
			path);
		return -EINVAL;
	}
	return 0;
}

int
tallyd_state_load(struct tallyd *d, char *why, size_t wlen)
{
	json_error_t err;
	json_t *root, *jobs, *o;
	json_int_t version, next_epoch;
	size_t i;
	int ret;

	if (d->cl != NULL)
		return 0;	/* etcd: read by tallyd_cluster_tick() */
	ret = state_locate(d, why, wlen);
	if (ret != 0)
		return ret > 0 ? 0 : ret;	/* 1: first start */
	root = json_load_file(state_path(d), JSON_REJECT_DUPLICATES, &err);
	if (root == NULL) {
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
