/* SPDX-License-Identifier: BSD-3-Clause */
/* The job table: lookups, misses, colliding ids, duplicates. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "agg/jobtab.h"

static struct tally_job *
mk(uint16_t id)
{
	struct tally_job_conf conf = {
		.id = id, .token = id * 7ull, .world = 1, .window = 1,
		.max_elems = 1,
	};
	struct tally_job *job = tally_job_create(&conf);

	assert_non_null(job);
	return job;
}

static void
empty_table(void **state)
{
	struct tally_jobtab *tab = tally_jobtab_create(NULL, 0);

	(void)state;
	assert_non_null(tab);
	for (unsigned int id = 0; id < 70000; id += 997)
		assert_null(tally_jobtab_lookup(tab, (uint16_t)id));
	tally_jobtab_destroy(tab);
	tally_jobtab_destroy(NULL);
}

static void
many_jobs_with_colliding_ids(void **state)
{
	enum { N = 250 };
	struct tally_job *jobs[N];
	struct tally_jobtab *tab;

	(void)state;
	/* Ids that share their low bits land in the same bucket. */
	for (unsigned int i = 0; i < N; i++)
		jobs[i] = mk((uint16_t)(i * 256 + 5));
	tab = tally_jobtab_create(jobs, N);
	assert_non_null(tab);
	assert_int_equal(tab->njobs, N);
	for (unsigned int i = 0; i < N; i++)
		assert_ptr_equal(tally_jobtab_lookup(tab,
			(uint16_t)(i * 256 + 5)), jobs[i]);
	for (unsigned int id = 0; id < 65536; id++)
		if (id % 256 != 5 || id / 256 >= N)
			assert_null(tally_jobtab_lookup(tab, (uint16_t)id));
	tally_jobtab_destroy(tab);
	for (unsigned int i = 0; i < N; i++)
		tally_job_destroy(jobs[i]);
}

static void
duplicate_ids_refused(void **state)
{
	struct tally_job *jobs[3] = { mk(1), mk(2), mk(1) };

	(void)state;
	errno = 0;
	assert_null(tally_jobtab_create(jobs, 3));
	assert_int_equal(errno, EEXIST);
	for (int i = 0; i < 3; i++)
		tally_job_destroy(jobs[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(empty_table),
		cmocka_unit_test(many_jobs_with_colliding_ids),
		cmocka_unit_test(duplicate_ids_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
