/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jobs and the state file: creation (ids, tokens shown once and checked
 * by hash), a save and a load that give back the same jobs, memberships
 * and counters, an atomic write that leaves no temporary file, clear
 * refusals of damaged files, a missing directory and dangling symlinks,
 * failed saves counted and retried, and jobs kept in id order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "tallyd.h"

struct fixture {
	char dir[64];
	struct tallyd d;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || sodium_init() < 0)
		return -1;
	strcpy(f->dir, "/tmp/tallyd-state-test.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	tallyd_conf_defaults(&f->d.conf);
	snprintf(f->d.conf.state_file, sizeof(f->d.conf.state_file),
		"%s/state.json", f->dir);
	f->d.ctl_fd = f->d.rdv_fd = -1;
	*state = f;
	return 0;
}

static void
free_jobs(struct tallyd *d)
{
	while (d->jobs != NULL)
		tallyd_job_free(d, d->jobs);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char path[300];

	free_jobs(&f->d);
	snprintf(path, sizeof(path), "%s/state.json", f->dir);
	unlink(path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct tallyd_job *
mk(struct tallyd *d, const char *name, unsigned int world, char *token)
{
	struct tallyd_job t = { .world = (uint8_t)world, .window = 64,
		.max_elems = 256 };
	struct tallyd_job *j;

	strcpy(t.name, name);
	j = tallyd_job_create(d, &t, token);
	assert_non_null(j);
	return j;
}

static void
create_ids_and_tokens(void **state)
{
	struct fixture *f = *state;
	struct tallyd *d = &f->d;
	char t1[65], t2[65], t3[65];
	struct tallyd_job *a, *b, *c, t = { .world = 1 };

	a = mk(d, "a", 4, t1);
	b = mk(d, "b", 2, t2);
	assert_int_equal(a->id, 1);
	assert_int_equal(b->id, 2);
	assert_int_equal(strlen(t1), 64);
	assert_string_not_equal(t1, t2);
	assert_true(tallyd_job_token_ok(a, t1));
	assert_false(tallyd_job_token_ok(a, t2));
	assert_false(tallyd_job_token_ok(a, "00"));
	t1[0] = t1[0] == '0' ? '1' : '0';
	assert_false(tallyd_job_token_ok(a, t1));

	strcpy(t.name, "a");
	assert_null(tallyd_job_create(d, &t, t3));
	assert_int_equal(errno, EEXIST);

	/* The lowest free id is reused. */
	tallyd_job_free(d, a);
	c = mk(d, "c", 1, t3);
	assert_int_equal(c->id, 1);
	assert_ptr_equal(tallyd_job_find(d, "c"), c);
	assert_ptr_equal(tallyd_job_find_id(d, 2), b);
	assert_null(tallyd_job_find(d, "a"));

	d->conf.max_jobs = 2;
	strcpy(t.name, "d");
	assert_null(tallyd_job_create(d, &t, t3));
	assert_int_equal(errno, ENOSPC);
}

static void
save_and_load(void **state)
{
	struct fixture *f = *state;
	struct tallyd *d = &f->d, e = { .ctl_fd = -1, .rdv_fd = -1 };
	struct tallyd_job *a, *b, *x;
	char ta[65], tb[65], tmp[300], why[300] = "";
	struct tallyd_ctr c;
	struct stat st;

	a = mk(d, "alpha", 2, ta);
	b = mk(d, "beta", 3, tb);
	a->has_members = true;
	a->members[0] = (struct tallyd_member){ 0x0a4d000c, 4791, 0x1c2 };
	a->members[1] = (struct tallyd_member){ 0x0a4d000d, 4791, 0xffffff };
	a->rdma = true;		/* an RDMA job: its Q_Key and QPNs kept */
	a->qkey = 0x7fffffff;
	a->wire_token = 0x0123456789abcdefull;
	a->epoch = 7;
	a->base.rounds = 10;
	a->sh[0].last.rounds = 5;
	a->sh[0].last.bytes_in = 1ull << 40;
	b->group_ip = 0xef000001;
	b->group_port = 5000;
	b->narrow = true;
	b->auth = true;
	for (int i = 0; i < 32; i++)
		b->auth_secret[i] = (uint8_t)i;
	b->idle_timeout_s = 30;
	strcpy(b->codec, "randk,density=0.5");
	d->next_epoch = 7;
	assert_int_equal(tallyd_state_save(d), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->conf.state_file);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(stat(d->conf.state_file, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	e.conf = d->conf;
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), 0);
	assert_int_equal(e.njobs, 2);
	assert_int_equal(e.next_epoch, 7);
	x = tallyd_job_find(&e, "alpha");
	assert_non_null(x);
	assert_int_equal(x->id, a->id);
	assert_int_equal(x->world, 2);
	assert_true(x->has_members);
	assert_memory_equal(x->members, a->members, 2 * sizeof(a->members[0]));
	assert_true(x->rdma);
	assert_int_equal(x->qkey, 0x7fffffff);
	assert_true(x->wire_token == a->wire_token);
	assert_int_equal(x->epoch, 7);
	assert_true(tallyd_job_token_ok(x, ta));
	assert_false(tallyd_job_token_ok(x, tb));
	tallyd_job_counters(x, &c);
	assert_int_equal(c.rounds, 15);
	assert_true(c.bytes_in == 1ull << 40);
	x = tallyd_job_find(&e, "beta");
	assert_non_null(x);
	assert_false(x->has_members);
	assert_false(x->rdma);
	assert_true(x->narrow);
	assert_true(x->auth);
	assert_memory_equal(x->auth_secret, b->auth_secret, 32);
	assert_false(tallyd_job_find(&e, "alpha")->auth);
	{
		/*
		 * Rank 1's keys in membership 0x0123456789abcdef: what
		 * tests/e2e/authkeys.py derives (Python's BLAKE2b) from
		 * the membership secret 093b38a7...6902 that this job's
		 * secret gives (crypto_kdf: 0123456789abcdef, "tallymbr").
		 */
		static const uint8_t want[48] = {
			0x5c, 0x41, 0x6e, 0x7f, 0x6a, 0xc9, 0xbd, 0x97,
			0xf1, 0x44, 0x4f, 0x1a, 0xdc, 0xca, 0x50, 0x26,
			0x1b, 0x70, 0x72, 0x9b, 0x80, 0x5b, 0xce, 0xec,
			0x20, 0xc1, 0xab, 0xd5, 0xec, 0xc2, 0x36, 0xa5,
			0x08, 0x74, 0xa8, 0xe6, 0xab, 0x14, 0xe4, 0x07,
			0x5e, 0x0c, 0x8c, 0x42, 0x24, 0xa5, 0x63, 0xa7,
		};
		struct tally_auth_keys k;

		tallyd_auth_keys(x, 0x0123456789abcdefull, 1, &k);
		assert_memory_equal(&k, want, sizeof(want));
	}
	assert_int_equal(x->group_ip, 0xef000001);
	assert_int_equal(x->group_port, 5000);
	assert_int_equal(x->idle_timeout_s, 30);
	assert_string_equal(x->codec, "randk,density=0.5");
	assert_string_equal(tallyd_job_find(&e, "alpha")->codec, "fixp");
	assert_true(tallyd_job_token_ok(x, tb));
	/* Creation order is kept. */
	assert_string_equal(e.jobs->name, "alpha");
	free_jobs(&e);
}

static void
missing_file_is_a_first_start(void **state)
{
	struct fixture *f = *state;
	char why[300] = "";

	assert_int_equal(tallyd_state_load(&f->d, why, sizeof(why)), 0);
	assert_int_equal(f->d.njobs, 0);
}

static void
damaged_files_are_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"{\"version\":2,\"next_epoch\":0,\"jobs\":[]}",
		"{\"version\":1,\"next_epoch\":0,\"jobs\":{}}",
		"{\"version\":1,\"next_epoch\":0,\"jobs\":[{\"name\":\"a\"}]}",
		"{\"version\":1,\"next_epoch\":0,\"jobs\":[{\"name\":\"a b\","
			"\"id\":1,\"world\":1,\"window\":1,\"max_elems\":1,"
			"\"narrow\":false,\"group_ip\":0,\"group_port\":0,"
			"\"idle_timeout_s\":0,\"token_hash\":\"00\","
			"\"created\":0,\"last_active\":0}]}",
		"{\"version\":1,\"next_epoch\":0,\"jobs\":[{\"name\":\"a\","
			"\"id\":1,\"world\":1,\"window\":1,\"max_elems\":1,"
			"\"narrow\":false,\"group_ip\":0,\"group_port\":0,"
			"\"idle_timeout_s\":0,\"token_hash\":\"00\","
			"\"created\":0,\"last_active\":0}]}",
		"{\"version\":1,\"next_epoch\":0,\"jobs\":[{\"name\":\"a\","
			"\"id\":0,\"world\":1,\"window\":1,\"max_elems\":1,"
			"\"narrow\":false,\"group_ip\":0,\"group_port\":0,"
			"\"idle_timeout_s\":0,\"token_hash\":\"00\","
			"\"created\":0,\"last_active\":0}]}",
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tallyd e = { .conf = f->d.conf };
		char why[300] = "";
		FILE *fp = fopen(f->d.conf.state_file, "w");

		fputs(bad[i], fp);
		fclose(fp);
		if (tallyd_state_load(&e, why, sizeof(why)) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(strstr(why, f->d.conf.state_file));
		free_jobs(&e);
	}
}

/* A save that fails: the errno, the sentence, counted, retried later. */
static void
failed_save_is_counted_and_retried(void **state)
{
	struct fixture *f = *state;
	struct tallyd *d = &f->d;
	char t[65], want[400], tmp[300];
	int64_t now = tallyd_now_ms();

	mk(d, "a", 2, t);
	assert_int_equal(tallyd_state_flush(d, now), -1);	/* clean */
	assert_int_equal(rmdir(f->dir), 0);
	assert_int_equal(tallyd_state_save(d), -ENOENT);
	snprintf(want, sizeof(want), "cannot save state file %s: %s",
		d->conf.state_file, strerror(ENOENT));
	assert_string_equal(d->sf.error, want);
	assert_int_equal(d->st.state_save_failures, 1);
	assert_int_equal(d->st.state_saves, 0);
	assert_true(d->state_dirty);
	assert_true(d->sf.failing);
	/* Not again before its time; then again, and it works. */
	assert_true(tallyd_state_flush(d, now) > 0);
	assert_int_equal(d->st.state_save_failures, 1);
	assert_int_equal(mkdir(f->dir, 0700), 0);
	assert_int_equal(tallyd_state_flush(d, tallyd_now_ms() + 1000), -1);
	assert_int_equal(d->st.state_saves, 1);
	assert_false(d->state_dirty);
	assert_false(d->sf.failing);
	assert_string_equal(d->sf.error, want);		/* the last one, kept */
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->conf.state_file);
	assert_int_equal(access(tmp, F_OK), -1);
}

/* A delete is saved without its job before the job is freed. */
static void
save_except_leaves_one_out(void **state)
{
	struct fixture *f = *state;
	struct tallyd *d = &f->d, e = { .ctl_fd = -1, .rdv_fd = -1 };
	struct tallyd_job *b;
	char t[65], why[300] = "";

	mk(d, "a", 1, t);
	b = mk(d, "b", 1, t);
	mk(d, "c", 1, t);
	assert_int_equal(tallyd_state_save_except(d, b), 0);
	assert_int_equal(d->njobs, 3);
	e.conf = d->conf;
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), 0);
	assert_int_equal(e.njobs, 2);
	assert_non_null(tallyd_job_find(&e, "a"));
	assert_null(tallyd_job_find(&e, "b"));
	assert_non_null(tallyd_job_find(&e, "c"));
	free_jobs(&e);
}

/* Jobs are listed (and saved) in id order: a reused id comes first. */
static void
jobs_are_in_id_order(void **state)
{
	struct fixture *f = *state;
	struct tallyd *d = &f->d, e = { .ctl_fd = -1, .rdv_fd = -1 };
	char t[65], why[300] = "";

	mk(d, "a", 1, t);
	mk(d, "b", 1, t);
	mk(d, "c", 1, t);
	tallyd_job_free(d, tallyd_job_find(d, "a"));
	assert_int_equal(mk(d, "d", 1, t)->id, 1);
	assert_string_equal(d->jobs->name, "d");
	assert_string_equal(d->jobs->next->name, "b");
	assert_int_equal(tallyd_state_save(d), 0);
	e.conf = d->conf;
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), 0);
	assert_string_equal(e.jobs->name, "d");
	assert_string_equal(e.jobs->next->next->name, "c");
	free_jobs(&e);
}

/* What tallyd refuses to start over, and a symlink written through. */
static void
state_directory_and_symlinks(void **state)
{
	struct fixture *f = *state;
	struct tallyd e = { .ctl_fd = -1, .rdv_fd = -1 };
	char why[600] = "", want[600], p[200], q[200];
	struct stat st;

	e.conf = f->d.conf;
	snprintf(e.conf.state_file, sizeof(e.conf.state_file),
		"%s/none/state.json", f->dir);
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "state directory %s/none: %s (it must "
		"exist and be writable)", f->dir, strerror(ENOENT));
	assert_string_equal(why, want);

	snprintf(p, sizeof(p), "%s/gone", f->dir);
	snprintf(q, sizeof(q), "%s/link", f->dir);
	assert_int_equal(symlink(p, q), 0);
	snprintf(e.conf.state_file, sizeof(e.conf.state_file),
		"%s/link/state.json", f->dir);
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "state directory %s is a symlink to %s, "
		"which does not exist", q, p);
	assert_string_equal(why, want);
	unlink(q);

	snprintf(e.conf.state_file, sizeof(e.conf.state_file),
		"%s/state.json", f->dir);
	assert_int_equal(symlink(p, e.conf.state_file), 0);
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "is a symlink to"));

	/* A live symlink: saves go to its target, the link stays. */
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(q, sizeof(q), "%s/gone/real.json", f->dir);
	unlink(e.conf.state_file);
	assert_int_equal(symlink(q, e.conf.state_file), 0);
	assert_int_equal(tallyd_state_save(&f->d), 0);	/* writes the link's */
	assert_int_equal(lstat(f->d.conf.state_file, &st), 0);
	assert_true(S_ISREG(st.st_mode));		/* ...name: not loaded */
	unlink(f->d.conf.state_file);
	assert_int_equal(symlink(q, e.conf.state_file), 0);
	{
		FILE *fp = fopen(q, "w");

		fputs("{\"version\":1,\"next_epoch\":3,\"jobs\":[]}", fp);
		fclose(fp);
	}
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), 0);
	assert_int_equal(e.next_epoch, 3);
	assert_int_equal(tallyd_state_save(&e), 0);
	assert_int_equal(lstat(e.conf.state_file, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(q, &st), 0);
	unlink(e.conf.state_file);
	unlink(q);
	rmdir(p);
}

/*
 * A sharded job keeps its dataplanes, in slot order, and each shard's
 * last reading; a configuration without one of them refuses the file.
 */
static void
sharded_jobs_save_and_load(void **state)
{
	static const char *const names[] = { "dp0", "b", "c" };
	struct fixture *f = *state;
	struct tallyd *d = &f->d, e = { .ctl_fd = -1, .rdv_fd = -1 };
	struct tallyd_job t = { .world = 2, .window = 64, .max_elems = 256,
		.nshards = 2, .sh = { { .dp = 2 }, { .dp = 0 } } }, *j, *x;
	char tok[65], why[300] = "";
	struct tallyd_ctr c;

	for (unsigned int i = 0; i < 3; i++)
		strcpy(d->dps[i].name, names[i]);
	d->ndps = 3;
	strcpy(t.name, "sharded");
	j = tallyd_job_create(d, &t, tok);
	assert_non_null(j);
	assert_int_equal(j->nshards, 2);
	j->base.rounds = 10;
	j->sh[0].last.rounds = 3;
	j->sh[1].last.rounds = 4;
	tallyd_job_counters(j, &c);
	assert_int_equal(c.rounds, 17);
	assert_non_null(mk(d, "plain", 1, tok));
	assert_int_equal(tallyd_state_save(d), 0);

	e.conf = d->conf;
	memcpy(e.dps, d->dps, sizeof(e.dps));
	e.ndps = 3;
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), 0);
	x = tallyd_job_find(&e, "sharded");
	assert_non_null(x);
	assert_int_equal(x->nshards, 2);
	assert_int_equal(x->sh[0].dp, 2);
	assert_int_equal(x->sh[1].dp, 0);
	assert_int_equal(x->sh[0].last.rounds, 3);
	assert_int_equal(x->sh[1].last.rounds, 4);
	tallyd_job_counters(x, &c);
	assert_int_equal(c.rounds, 17);
	x = tallyd_job_find(&e, "plain");
	assert_int_equal(x->nshards, 1);
	assert_int_equal(x->sh[0].dp, 0);
	free_jobs(&e);

	e.ndps = 2;		/* "c" is gone from the configuration */
	assert_int_equal(tallyd_state_load(&e, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "dataplane 'c'"));
	free_jobs(&e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(create_ids_and_tokens, setup,
			teardown),
		cmocka_unit_test_setup_teardown(save_and_load, setup, teardown),
		cmocka_unit_test_setup_teardown(sharded_jobs_save_and_load,
			setup, teardown),
		cmocka_unit_test_setup_teardown(missing_file_is_a_first_start,
			setup, teardown),
		cmocka_unit_test_setup_teardown(damaged_files_are_refused,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			failed_save_is_counted_and_retried, setup, teardown),
		cmocka_unit_test_setup_teardown(save_except_leaves_one_out,
			setup, teardown),
		cmocka_unit_test_setup_teardown(jobs_are_in_id_order, setup,
			teardown),
		cmocka_unit_test_setup_teardown(state_directory_and_symlinks,
			setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
