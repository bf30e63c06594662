/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control-to-data address map (control/tallyd/addrmap.c): a file with
 * comments, several data addresses on a line and a control address on
 * several lines; what it allows and nothing else; and each kind of bad
 * file refused with the file and line named.
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
#include <unistd.h>

#include "addrmap.h"

#define IP(a, b, c, d)	((uint32_t)(a) << 24 | (b) << 16 | (c) << 8 | (d))

static char path[64];

static const char *
write_tmp(const char *text)
{
	int fd;

	strcpy(path, "/tmp/tallyd-addrmap-test.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void
allows_what_it_lists(void **state)
{
	char why[200] = "";
	struct tallyd_addrmap *m = tallyd_addrmap_load(write_tmp(
		"# control   data\n"
		"\n"
		"10.0.0.5    10.20.0.5 10.20.1.5   # two NICs\n"
		"10.0.0.6\t10.20.0.6\n"
		"10.0.0.5 10.20.2.5\n"), why, sizeof(why));

	(void)state;
	unlink(path);
	assert_non_null(m);
	assert_int_equal(tallyd_addrmap_size(m), 4);
	assert_true(tallyd_addrmap_allows(m, IP(10, 0, 0, 5), IP(10, 20, 0, 5)));
	assert_true(tallyd_addrmap_allows(m, IP(10, 0, 0, 5), IP(10, 20, 1, 5)));
	assert_true(tallyd_addrmap_allows(m, IP(10, 0, 0, 5), IP(10, 20, 2, 5)));
	assert_true(tallyd_addrmap_allows(m, IP(10, 0, 0, 6), IP(10, 20, 0, 6)));
	/* Another host's data address, a reversed pair, an unknown host. */
	assert_false(tallyd_addrmap_allows(m, IP(10, 0, 0, 5),
		IP(10, 20, 0, 6)));
	assert_false(tallyd_addrmap_allows(m, IP(10, 20, 0, 5),
		IP(10, 0, 0, 5)));
	assert_false(tallyd_addrmap_allows(m, IP(10, 0, 0, 7),
		IP(10, 20, 0, 7)));
	assert_false(tallyd_addrmap_allows(NULL, IP(10, 0, 0, 5),
		IP(10, 20, 0, 5)));
	tallyd_addrmap_destroy(m);
	tallyd_addrmap_destroy(NULL);
}

static void
bad_files(void **state)
{
	static const struct {
		const char *text;
		const char *why;
	} bad[] = {
		{ "10.0.0.5\n", ":1: a control address needs" },
		{ "# ok\n10.0.0.5 10.20.0\n", ":2: '10.20.0' is not" },
		{ "host 10.20.0.5\n", ":1: 'host' is not" },
	};
	char why[200];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tallyd_addrmap *m;

		why[0] = '\0';
		m = tallyd_addrmap_load(write_tmp(bad[i].text), why,
			sizeof(why));
		unlink(path);
		if (m != NULL || errno != EINVAL || strstr(why, path) == NULL ||
				strstr(why, bad[i].why) == NULL)
			fail_msg("'%s': %s", bad[i].text, why);
	}
	assert_null(tallyd_addrmap_load("/nonexistent/map", why, sizeof(why)));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(why, "/nonexistent/map"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(allows_what_it_lists),
		cmocka_unit_test(bad_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
