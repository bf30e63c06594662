/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench allreduce, end to end on 127.0.0.1: a test aggregator
 * (loopagg, the real engine) and one tally-bench process per rank. Every
 * rank must exit 0 with "check: ok" (its result equals the reference it
 * computed from all ranks' generated tensors) and print the same digest;
 * a missing rank must make the others exit 3 with the error. With
 * --scale-exp, tiny and huge tensors are held to fixed point's documented
 * precision against the exact sums.
 *
 * argv[1] is the tally-bench executable (meson passes it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loopagg.h"

#define JOB	5
#define TOKEN	UINT64_C(0x00c0ffee00c0ffee)
#define NRANKS	3

extern char **environ;

static const char *bench_path;
static char watch_pid[16];	/* non-empty: ranks get --json --watch-pid */
static const char *extra_args[5];	/* more arguments for every rank */

/* One tally-bench process. */
struct proc {
	pid_t pid;
	char out_path[64];
	int status;
	char out[4096];
};

/* Starts argv with envp; stdout and stderr go to a file. */
static void
spawn(struct proc *p, char **argv, char **envp, unsigned int r)
{
	posix_spawn_file_actions_t fa;

	snprintf(p->out_path, sizeof(p->out_path), "/tmp/tally-bench-%d-%u.out",
		(int)getpid(), r);
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, p->out_path,
		O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
	assert_int_equal(posix_spawn_file_actions_adddup2(&fa, 1, 2), 0);
	assert_int_equal(posix_spawn(&p->pid, bench_path, &fa, NULL, argv,
		envp), 0);
	posix_spawn_file_actions_destroy(&fa);
}

/*
 * Starts rank r of world (with --scale-exp scale unless it is NULL). Odd
 * ranks read the token from a file (--token-file), even ones from
 * TALLY_TOKEN: never from argv.
 */
static void
spawn_rank(struct proc *p, uint16_t port, unsigned int r, unsigned int world,
	const char *type, const char *size, const char *scale)
{
	char dp[32], rank[8], wstr[8], env_token[40], path[64];
	char *argv[34] = {
		(char *)bench_path, "allreduce", "--dp", dp, "--job", "5",
		"--rank", rank, "--world", wstr,
		"--type", (char *)type, "--size", (char *)size,
		"--iters", "2", "--timeout-ms", "1000", "--seed", "7",
	};
	char *envp[] = { env_token, NULL };
	unsigned int n = 20;
	FILE *f;

	if (scale != NULL) {
		argv[n++] = "--scale-exp";
		argv[n++] = (char *)scale;
	}
	if (r % 2) {
		argv[n++] = "--token-file";
		argv[n++] = path;
	}
	for (unsigned int i = 0; extra_args[i] != NULL; i++)
		argv[n++] = (char *)extra_args[i];
	if (watch_pid[0] != '\0') {
		argv[n++] = "--json";
		argv[n++] = "--watch-pid";
		argv[n++] = watch_pid;
	}
	argv[n] = NULL;

	snprintf(dp, sizeof(dp), "127.0.0.1:%u", port);
	snprintf(rank, sizeof(rank), "%u", r);
	snprintf(wstr, sizeof(wstr), "%u", world);
	snprintf(path, sizeof(path), "/tmp/tally-bench-%d-%u.token",
		(int)getpid(), r);
	if (r % 2) {
		f = fopen(path, "w");
		assert_non_null(f);
		fprintf(f, "%016llx\n", (unsigned long long)TOKEN);
		fclose(f);
		snprintf(env_token, sizeof(env_token), "TALLY_X=1");
	} else {
		snprintf(env_token, sizeof(env_token), "TALLY_TOKEN=%016llx",
			(unsigned long long)TOKEN);
	}
	spawn(p, argv, envp, r);
}

/* Waits for p and reads what it printed. */
static void
reap(struct proc *p)
{
	char tok[80];
	FILE *f;
	size_t len;

	assert_int_equal(waitpid(p->pid, &p->status, 0), p->pid);
	snprintf(tok, sizeof(tok), "%.*s.token", (int)(strlen(p->out_path) -
		4), p->out_path);
	unlink(tok);
	f = fopen(p->out_path, "r");
	assert_non_null(f);
	len = fread(p->out, 1, sizeof(p->out) - 1, f);
	p->out[len] = '\0';
	fclose(f);
	unlink(p->out_path);
}

/* The digest line of p's output. */
static const char *
digest_of(const struct proc *p)
{
	const char *d = strstr(p->out, "digest: ");

	assert_non_null(d);
	return d;
}

static void
run_ok(const char *type, const char *size, const char *scale)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = NRANKS, .window = 64,
		.max_elems = 256, .loss_up = 0.01, .loss_down = 0.01,
		.seed = 3,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct proc p[NRANKS];
	unsigned int r;

	assert_non_null(a);
	for (r = 0; r < NRANKS; r++)
		spawn_rank(&p[r], loopagg_port(a), r, NRANKS, type, size,
			scale);
	for (r = 0; r < NRANKS; r++)
		reap(&p[r]);
	loopagg_stop(a, NULL);
	for (r = 0; r < NRANKS; r++) {
		if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0 ||
				strstr(p[r].out, "check: ok\n") == NULL ||
				(scale != NULL &&
				 strstr(p[r].out, "precision: ") == NULL))
			fail_msg("rank %u: status 0x%x, output:\n%s", r,
				p[r].status, p[r].out);
		assert_memory_equal(digest_of(&p[0]), digest_of(&p[r]), 33);
	}
	if (strcmp(size, "0") == 0)
		assert_memory_equal(digest_of(&p[0]),
			"digest: fnv1a64 cbf29ce484222325\n", 33);
	if (getenv("BENCH_TEST_SHOW") != NULL)
		printf("# %s", p[0].out);
}

static void
f32_three_ranks(void **state)
{
	(void)state;
	run_ok("f32", "1M", NULL);
}

/*
 * Tensors of magnitude 2^-140 (subnormals among them), 2^-100 and 2^120:
 * every result within the documented bound of the exact sums. The old
 * exponent clamp failed the first two.
 */
static void
f32_magnitudes_three_ranks(void **state)
{
	(void)state;
	run_ok("f32", "64K", "-140");
	run_ok("f32", "64K", "-100");
	run_ok("f32", "64K", "120");
}

static void
i32_three_ranks(void **state)
{
	(void)state;
	run_ok("i32", "300004", NULL);
}

/* bf16 and f16 through tally_allreduce_typed(), 1% loss both ways. */
static void
h16_three_ranks(void **state)
{
	(void)state;
	run_ok("bf16", "600004", NULL);
	run_ok("f16", "1M", NULL);
}

/*
 * --size 0: an empty tensor sends nothing, between barriers that still
 * meet; every rank's digest is FNV-1a's offset basis (no bytes).
 */
static void
empty_three_ranks(void **state)
{
	(void)state;
	run_ok("f32", "0", NULL);
	run_ok("i32", "0", NULL);
}

/*
 * --op reduce_scatter through a q8 job's codec: each rank's shard of
 * each call (their draws differ) against the codec's allreduce
 * reference, 1% loss both ways. The digests are the ranks' own shards.
 */
static void
rs_q8_three_ranks(void **state)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = NRANKS, .window = 64,
		.max_elems = 256, .loss_up = 0.01, .loss_down = 0.01,
		.seed = 5,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct proc p[NRANKS];
	unsigned int r;

	(void)state;
	assert_non_null(a);
	extra_args[0] = "--op";
	extra_args[1] = "reduce_scatter";
	extra_args[2] = "--codec";
	extra_args[3] = "q8,seed=9";
	for (r = 0; r < NRANKS; r++)
		spawn_rank(&p[r], loopagg_port(a), r, NRANKS, "f32", "768K",
			NULL);
	extra_args[0] = NULL;
	for (r = 0; r < NRANKS; r++)
		reap(&p[r]);
	loopagg_stop(a, NULL);
	for (r = 0; r < NRANKS; r++)
		if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0 ||
				strstr(p[r].out, "check: ok\n") == NULL)
			fail_msg("rank %u: status 0x%x, output:\n%s", r,
				p[r].status, p[r].out);
}

/* World 3 with only 2 ranks running: both exit 3 and say why. */
static void
missing_rank_exits_3(void **state)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = NRANKS, .window = 64,
		.max_elems = 256,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct proc p[NRANKS - 1];
	unsigned int r;

	(void)state;
	assert_non_null(a);
	for (r = 0; r < NRANKS - 1; r++)
		spawn_rank(&p[r], loopagg_port(a), r, NRANKS, "f32", "64K",
			NULL);
	for (r = 0; r < NRANKS - 1; r++)
		reap(&p[r]);
	loopagg_stop(a, NULL);
	for (r = 0; r < NRANKS - 1; r++) {
		if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 3 ||
				strstr(p[r].out, "error: no result") == NULL)
			fail_msg("rank %u: status 0x%x, output:\n%s", r,
				p[r].status, p[r].out);
	}
}

/*
 * --json --watch-pid PID: each timed call's CPU, this rank's and PID's
 * (here the test, busy in loopagg's thread), and the machine's ticks,
 * one figure a call.
 */
static void
json_cpu_three_ranks(void **state)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = NRANKS, .window = 64,
		.max_elems = 256,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct proc p[NRANKS];
	unsigned int r;
	double c0, c1, w0, w1;
	unsigned long long b0, t0, b1, t1;
	const char *q;

	(void)state;
	assert_non_null(a);
	snprintf(watch_pid, sizeof(watch_pid), "%d", (int)getpid());
	for (r = 0; r < NRANKS; r++)
		spawn_rank(&p[r], loopagg_port(a), r, NRANKS, "f32", "4M",
			NULL);
	watch_pid[0] = '\0';
	for (r = 0; r < NRANKS; r++)
		reap(&p[r]);
	loopagg_stop(a, NULL);
	for (r = 0; r < NRANKS; r++) {
		q = strstr(p[r].out, "\"cpu_s\":[");
		if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0 ||
				q == NULL || sscanf(q, "\"cpu_s\":[%lf,%lf],"
				"\"host_ticks\":[[%llu,%llu],[%llu,%llu]],"
				"\"watch_cpu_s\":[%lf,%lf]", &c0, &c1, &b0, &t0,
				&b1, &t1, &w0, &w1) != 8)
			fail_msg("rank %u: status 0x%x, output:\n%s", r,
				p[r].status, p[r].out);
		/* A 4 MiB call costs a rank CPU; none is negative. */
		assert_true(c0 > 0.0 && c1 > 0.0);
		assert_true(b0 <= t0 && b1 <= t1);
		assert_true(w0 >= 0.0 && w1 >= 0.0);
	}
}

/* A token on the command line is refused, with how to pass it instead. */
static void
token_in_argv_refused(void **state)
{
	char *argv[] = {
		(char *)bench_path, "allreduce", "--dp", "127.0.0.1:1",
		"--job", "5", "--token", "00c0ffee00c0ffee", "--rank", "0",
		"--world", "1", NULL,
	};
	char *envp[] = { NULL };
	struct proc p;

	(void)state;
	spawn(&p, argv, envp, 99);
	reap(&p);
	if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 2 ||
			strstr(p.out, "--token-file") == NULL ||
			strstr(p.out, "TALLY_TOKEN") == NULL)
		fail_msg("status 0x%x, output:\n%s", p.status, p.out);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(f32_three_ranks),
		cmocka_unit_test(f32_magnitudes_three_ranks),
		cmocka_unit_test(i32_three_ranks),
		cmocka_unit_test(h16_three_ranks),
		cmocka_unit_test(empty_three_ranks),
		cmocka_unit_test(rs_q8_three_ranks),
		cmocka_unit_test(missing_rank_exits_3),
		cmocka_unit_test(token_in_argv_refused),
		cmocka_unit_test(json_cpu_three_ranks),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s TALLY-BENCH\n", argv[0]);
		return 2;
	}
	bench_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
