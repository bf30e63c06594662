/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's check of jobs against tally-dp's limits (control/tallyd/
 * limits.c): nothing is refused before tally-dp's first ping; then a job
 * over tally-dp's per-job memory (the 2 GiB of window 32768 x max_elems
 * 8192), a job whose packets exceed the MTU for its codec (fixp at 1400
 * with 336 elements, q8 widened at 1500 with 1024), and jobs that with
 * tallyd's others exceed the budget are refused with errno and
 * sentence; the same q8 job narrow, and fixp at the exact fit, pass; an
 * authenticated job's keys count against the per-job cap; a job_add
 * carries the codec's encodings.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include <tally/limits.h>

#include "tallyd.h"

static struct tallyd d;

/* A job as job create makes it (no id or token needed here). */
static struct tallyd_job
job(const char *name, unsigned int window, unsigned int elems,
	const char *codec, bool narrow)
{
	struct tallyd_job j = {
		.world = 4, .window = (uint16_t)window, .nshards = 1,
		.max_elems = (uint16_t)elems, .narrow = narrow,
	};

	strcpy(j.name, name);
	strcpy(j.codec, codec);
	return j;
}

/* tally-dp's ping with the given MTU, 1 GiB of budget, 256 MiB a job. */
static void
ping(unsigned int mtu)
{
	json_t *r = json_pack("{s:i, s:i, s:i, s:I, s:I, s:I}", "errno", 0,
		"mtu", mtu, "max_jobs", 256, "mem_budget", (json_int_t)1 << 30,
		"mem_used", (json_int_t)0, "max_job_mem", (json_int_t)256 << 20);

	tallyd_limits_from_ping(&d.dps[0].limits, r);
	json_decref(r);
}

static void
unknown_accepts(void **state)
{
	struct tallyd_job j = job("big", 32768, 8192, "fixp", false);
	char why[256] = "";

	(void)state;
	memset(&d, 0, sizeof(d));
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
}

static void
too_much_memory(void **state)
{
	struct tallyd_job j = job("big", 32768, 8192, "fixp", false);
	char why[256] = "";

	(void)state;
	ping(9000);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-E2BIG);
	assert_string_equal(why, "job 'big' needs 2050.1 MiB at tally-dp "
		"(window 32768 x max_elems 8192); it takes at most 256.0 MiB a "
		"job (tally-dp --max-job-mem)");
	/* Checked again at join, where tally-dp may have restarted. */
	assert_int_equal(tallyd_limits_check(&d, &j, false, why, sizeof(why)),
		-E2BIG);
}

static void
packets_over_mtu(void **state)
{
	struct tallyd_job j = job("f", 64, 336, "fixp", false);
	char why[256] = "";

	(void)state;
	ping(1400);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-EMSGSIZE);
	assert_string_equal(why, "job 'f': max_elems 336 with codec fixp makes "
		"1412-byte packets (f32, widened results), over tally-dp's MTU "
		"of 1400; at most max_elems 333");
	j.max_elems = 333;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	/* An authenticated job's packets carry a 16-byte tag as well. */
	j.auth = true;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-EMSGSIZE);
	assert_string_equal(why, "job 'f': max_elems 333 with codec fixp makes "
		"1416-byte packets (f32, widened results), over tally-dp's MTU "
		"of 1400; at most max_elems 329");
	j.max_elems = 329;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	ping(1500);
	j = job("q", 64, 1024, "q8", false);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-EMSGSIZE);
	assert_string_equal(why, "job 'q': max_elems 1024 with codec q8 makes "
		"4164-byte packets (i8, widened results), over tally-dp's MTU "
		"of 1500; at most max_elems 358");
	j.narrow = true;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	j = job("s", 64, 1440, "sign", true);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
}

/* The budget counts every job tallyd has, programmed or not. */
static void
over_budget(void **state)
{
	struct tallyd_job a[5], j;
	char why[256] = "";

	(void)state;
	ping(9000);
	for (unsigned int i = 0; i < 5; i++) {
		a[i] = job("a", 16000, 2000, "fixp", false); /* 245 MiB */
		a[i].next = i > 0 ? &a[i - 1] : NULL;
	}
	d.jobs = &a[2];		/* three of them: 735 MiB */
	j = job("b", 16000, 2000, "fixp", false);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	d.jobs = &a[3];		/* four: 980 MiB, and j makes 1225 */
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-ENOMEM);
	assert_string_equal(why, "job 'b' needs 245.2 MiB at tally-dp; the "
		"other jobs take 980.6 of its 1024.0 MiB (tally-dp "
		"--mem-budget)");
	/* A join checks the job alone. */
	assert_int_equal(tallyd_limits_check(&d, &j, false, why, sizeof(why)),
		0);
	d.jobs = NULL;
}

/*
 * An authenticated job also holds its members' expanded keys: a job that
 * fits the per-job cap plain does not with them.
 */
static void
auth_keys_count(void **state)
{
	uint64_t slots = tally_job_mem_bytes(16000, 2000);
	struct tallyd_job j = job("k", 16000, 2000, "fixp", false);
	char why[256] = "";
	json_t *r;

	(void)state;
	j.world = 64;
	assert_int_equal(tally_job_mem(16000, 2000, 64, 1),
		slots + 129 * 1024);
	r = json_pack("{s:i, s:i, s:i, s:I, s:I, s:I}", "errno", 0, "mtu", 9000,
		"max_jobs", 256, "mem_budget", (json_int_t)1 << 30, "mem_used",
		(json_int_t)0, "max_job_mem", (json_int_t)(slots + 64 * 1024));
	tallyd_limits_from_ping(&d.dps[0].limits, r);
	json_decref(r);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	j.auth = true;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-E2BIG);
}

static void
job_add_encodings(void **state)
{
	struct tallyd_job j = job("q", 64, 256, "q8", false);
	json_t *req = json_object(), *e;

	(void)state;
	tallyd_limits_job_add(&j, req);
	e = json_object_get(req, "encodings");
	assert_int_equal(json_array_size(e), 1);
	assert_string_equal(json_string_value(json_array_get(e, 0)), "i8");
	json_decref(req);
	j = job("f", 64, 256, "", false);
	assert_int_equal(tallyd_limits_encs(&j),
		TALLY_ENC_BIT(TALLY_ENC_I32) | TALLY_ENC_BIT(TALLY_ENC_F32));
	j = job("p", 64, 256, "powersgd,rank=2", false);
	assert_int_equal(tallyd_limits_encs(&j),
		TALLY_ENC_BIT(TALLY_ENC_I32) | TALLY_ENC_BIT(TALLY_ENC_F32));
	j = job("t", 64, 256, "ternary", false);
	assert_int_equal(tallyd_limits_encs(&j), TALLY_ENC_BIT(TALLY_ENC_I4));
}

/* tally-dp's ping at MTU 1500 with RoCEv2 whose path MTU is pmtu. */
static void
ping_roce(unsigned int pmtu)
{
	json_t *r = json_pack("{s:i, s:i, s:i, s:I, s:I, s:I, s:{s:[i], "
		"s:i, s:i}}", "errno", 0, "mtu", 1500, "max_jobs", 256,
		"mem_budget", (json_int_t)1 << 30, "mem_used", (json_int_t)0,
		"max_job_mem", (json_int_t)256 << 20, "roce", "qpns", 256,
		"pkey", 65535, "pmtu", pmtu);

	tallyd_limits_from_ping(&d.dps[0].limits, r);
	json_decref(r);
}

/*
 * An RDMA job's messages against tally-dp's RoCEv2 path MTU (1024 at
 * Ethernet 1500): the default 256 elements do not fit (1064 bytes),
 * 246 do; what fits is what job create gives an RDMA job by default; a
 * UDP job of 256 still fits the MTU; without RoCEv2 nothing fits.
 */
static void
rdma_messages_over_pmtu(void **state)
{
	struct tallyd_job j = job("r", 64, 256, "fixp", false);
	char why[256] = "";

	(void)state;
	ping_roce(1024);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	j.rdma = true;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-EMSGSIZE);
	assert_string_equal(why, "job 'r': max_elems 256 with codec fixp makes "
		"1064-byte RDMA messages (f32, widened results), over "
		"tally-dp's RoCEv2 path MTU of 1024 (a UD message is one "
		"packet); at most max_elems 246");
	assert_int_equal(tallyd_limits_rdma_elems(&d, &j), 246);
	j.max_elems = 246;
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		0);
	j.auth = true;		/* the tag comes off the elements */
	assert_int_equal(tallyd_limits_rdma_elems(&d, &j), 242);
	assert_int_equal(tallyd_limits_check(&d, &j, true, why, sizeof(why)),
		-EMSGSIZE);
	ping_roce(4096);	/* Ethernet 9000 */
	assert_int_equal(tallyd_limits_rdma_elems(&d, &j), 1010);
	ping(1500);		/* no "roce" in the ping */
	assert_int_equal(tallyd_limits_rdma_elems(&d, &j), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unknown_accepts),
		cmocka_unit_test(too_much_memory),
		cmocka_unit_test(packets_over_mtu),
		cmocka_unit_test(rdma_messages_over_pmtu),
		cmocka_unit_test(over_budget),
		cmocka_unit_test(auth_keys_count),
		cmocka_unit_test(job_add_encodings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
