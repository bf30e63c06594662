/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's configuration: defaults, a file of every key, comments and
 * spacing, and each kind of error (unknown key, twice, bad value, no '=',
 * long line) with the file and line in the message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallyd.h"

static char *
write_tmp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/tallyd-conf-test.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void
defaults_and_full_file(void **state)
{
	struct tallyd_conf c;
	uint64_t seen = 0;
	char why[300] = "";
	char *path;

	(void)state;
	tallyd_conf_defaults(&c);
	assert_string_equal(c.rendezvous, "0.0.0.0:7470");
	assert_string_equal(c.metrics, "127.0.0.1:9470");
	assert_int_equal(c.dp_poll_ms, 500);
	assert_int_equal(c.join_timeout_s, 60);
	/* TLS on unless the operator turns it off; caps on by default. */
	assert_string_equal(c.rendezvous_tls, "on");
	assert_string_equal(c.rendezvous_tls_cert, "/etc/tally/rendezvous.crt");
	assert_string_equal(c.rendezvous_tls_key, "/etc/tally/rendezvous.key");
	assert_string_equal(c.rendezvous_data_map, "");
	assert_int_equal(c.rendezvous_max_conns, 4096);
	assert_int_equal(c.rendezvous_max_per_source, 64);
	assert_int_equal(c.rendezvous_handshake_ms, 3000);
	path = write_tmp(
		"# tallyd.conf\n"
		"\n"
		"control_socket = /tmp/t.sock\n"
		"control_group=tally\n"
		"  rendezvous   =  10.0.0.1:7000   # trailing comment\n"
		"metrics = off\n"
		"state_file = /tmp/state.json\n"
		"dp_admin = /tmp/dp.sock\n"
		"dp_address = 10.77.0.1\n"
		"dp_poll_ms = 100\n"
		"join_timeout_s = 5\n"
		"idle_timeout_s = 0\n"
		"drain_timeout_ms = 0\n"
		"max_jobs = 7\n"
		"rendezvous_tls = off\n"
		"rendezvous_tls_cert = /tmp/c.pem\n"
		"rendezvous_tls_key = /tmp/k.pem\n"
		"rendezvous_data_map = /tmp/map\n"
		"rendezvous_max_conns = 100\n"
		"rendezvous_max_per_source = 2\n"
		"rendezvous_handshake_ms = 500\n");
	assert_int_equal(tallyd_conf_load(&c, path, &seen, why, sizeof(why)),
		0);
	unlink(path);
	assert_string_equal(c.control_socket, "/tmp/t.sock");
	assert_string_equal(c.control_group, "tally");
	assert_string_equal(c.rendezvous, "10.0.0.1:7000");
	assert_string_equal(c.metrics, "off");
	assert_string_equal(c.dp_address, "10.77.0.1");
	assert_int_equal(c.dp_poll_ms, 100);
	assert_int_equal(c.join_timeout_s, 5);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_int_equal(c.max_jobs, 7);
	assert_string_equal(c.rendezvous_tls, "off");
	assert_string_equal(c.rendezvous_tls_cert, "/tmp/c.pem");
	assert_string_equal(c.rendezvous_tls_key, "/tmp/k.pem");
	assert_string_equal(c.rendezvous_data_map, "/tmp/map");
	assert_int_equal(c.rendezvous_max_conns, 100);
	assert_int_equal(c.rendezvous_max_per_source, 2);
	assert_int_equal(c.rendezvous_handshake_ms, 500);
}

static void
bad_lines(void **state)
{
	static const char *const bad[] = {
		"nonsense",
		"unknown_key = 1",
		"dp_poll_ms = 5",
		"dp_poll_ms = 100000",
		"dp_poll_ms = -1",
		"dp_poll_ms = 10x",
		"dp_poll_ms =",
		"max_jobs = 0",
		"rendezvous = 10.0.0.1",
		"rendezvous = 10.0.0.1:70000",
		"rendezvous = host:7470",
		"metrics = on",
		"dp_address = 10.0.0",
		"state_file =",
		"rendezvous_tls = yes",
		"rendezvous_tls =",
		"rendezvous_tls_cert =",
		"rendezvous_tls_key =",
		"rendezvous_max_conns = 15",
		"rendezvous_max_conns = 65537",
		"rendezvous_max_per_source = 0",
		"rendezvous_handshake_ms = 99",
		"rendezvous_handshake_ms = 60001",
		"dp_name =",
		"dp_name = a b",
		"dp_name = 01234567890123456789012345678901",
		"dataplane =",
		"dataplane = b",
		"dataplane = b/c /run/x.sock",
		"dataplane = b /run/x.sock 10.0.0",
		"dataplane = b /run/x.sock 10.0.0.1 extra",
	};
	struct tallyd_conf c;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t seen = 0;
		char why[200] = "";

		tallyd_conf_defaults(&c);
		if (tallyd_conf_line(&c, bad[i], &seen, why, sizeof(why)) !=
				-EINVAL || why[0] == '\0')
			fail_msg("accepted: %s", bad[i]);
	}
}

static void
errors_name_file_and_line(void **state)
{
	struct tallyd_conf c;
	uint64_t seen = 0;
	char why[300] = "", want[300];
	char *path;

	(void)state;
	tallyd_conf_defaults(&c);
	path = write_tmp("max_jobs = 3\n\nmax_jobs = 4\n");
	assert_int_equal(tallyd_conf_load(&c, path, &seen, why, sizeof(why)),
		-EINVAL);
	snprintf(want, sizeof(want), "%s:3: 'max_jobs' given twice", path);
	assert_string_equal(why, want);
	unlink(path);
	assert_int_equal(tallyd_conf_load(&c, "/nonexistent/tallyd.conf",
		&seen, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "/nonexistent/tallyd.conf"));
}

/* -c DIRECTORY is an error, not an empty file (fopen takes directories). */
static void
a_directory_is_refused(void **state)
{
	struct tallyd_conf c;
	uint64_t seen = 0;
	char why[300] = "";

	(void)state;
	tallyd_conf_defaults(&c);
	assert_int_equal(tallyd_conf_load(&c, "/tmp", &seen, why, sizeof(why)),
		-EISDIR);
	assert_string_equal(why, "/tmp: Is a directory (-c wants a file)");
}

/* control_group must name a group that exists, at --check-config too. */
static void
check_needs_a_real_group(void **state)
{
	struct tallyd_conf c;
	char why[300] = "";
	struct group *g = getgrgid(getgid());

	(void)state;
	tallyd_conf_defaults(&c);
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), 0);
	strcpy(c.control_group, "nosuchgroup-tally");
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "control_group 'nosuchgroup-tally': no such "
		"group");
	assert_non_null(g);
	snprintf(c.control_group, sizeof(c.control_group), "%s", g->gr_name);
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), 0);
}

/*
 * "dataplane" lines (docs/scale-out.md): repeatable, up to 15, each
 * read into the next entry; --check-config's names must be distinct.
 */
static void
dataplane_lines(void **state)
{
	struct tallyd_conf c;
	uint64_t seen = 0;
	char why[200] = "", line[80];

	(void)state;
	tallyd_conf_defaults(&c);
	assert_string_equal(c.dp_name, "dp0");
	assert_int_equal(c.ndataplanes, 0);
	assert_int_equal(tallyd_conf_line(&c, "dataplane = b /run/b.sock "
		"10.0.0.2", &seen, why, sizeof(why)), 0);
	assert_int_equal(tallyd_conf_line(&c, "dataplane=c /run/c.sock",
		&seen, why, sizeof(why)), 0);
	assert_int_equal(c.ndataplanes, 2);
	assert_string_equal(c.dataplanes[0].name, "b");
	assert_string_equal(c.dataplanes[0].admin, "/run/b.sock");
	assert_string_equal(c.dataplanes[0].address, "10.0.0.2");
	assert_string_equal(c.dataplanes[1].address, "");
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), 0);
	assert_int_equal(tallyd_conf_line(&c, "dataplane = b /run/x.sock",
		&seen, why, sizeof(why)), 0);
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "named twice"));
	tallyd_conf_defaults(&c);
	assert_int_equal(tallyd_conf_line(&c, "dataplane = dp0 /run/x.sock",
		&seen, why, sizeof(why)), 0);
	assert_int_equal(tallyd_conf_check(&c, why, sizeof(why)), -EINVAL);
	tallyd_conf_defaults(&c);
	for (int i = 0; i < TALLYD_MAX_DPS - 1; i++) {
		snprintf(line, sizeof(line), "dataplane = d%d /run/%d.sock", i,
			i);
		assert_int_equal(tallyd_conf_line(&c, line, &seen, why,
			sizeof(why)), 0);
	}
	assert_int_equal(tallyd_conf_line(&c, "dataplane = x /run/x.sock",
		&seen, why, sizeof(why)), -EINVAL);
}

static void
dump_reads_back(void **state)
{
	struct tallyd_conf c, d;
	uint64_t seen = 0;
	char why[300] = "";
	char path[] = "/tmp/tallyd-conf-dump.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	(void)state;
	tallyd_conf_defaults(&c);
	c.control_group[0] = '\0';
	assert_int_equal(tallyd_conf_line(&c, "dataplane = b /run/b.sock "
		"10.0.0.2", &seen, why, sizeof(why)), 0);
	seen = 0;
	tallyd_conf_dump(&c, f);
	fclose(f);
	/* An empty value (control_group, dp_address) reads back as empty. */
	tallyd_conf_defaults(&d);
	assert_int_equal(tallyd_conf_load(&d, path, &seen, why, sizeof(why)),
		0);
	unlink(path);
	assert_memory_equal(&c, &d, sizeof(c));
}

/* state: file (default), file:PATH (sets state_file), etcd://...; lease. */
static void
state_backends(void **state)
{
	static const char *const bad[] = {
		"state = etcd://", "state = etcd://10.0.0.1",
		"state = etcd://10.0.0.1:0", "state = etcd://host:2379",
		"state = etcd://10.0.0.1:2379,", "state = file:",
		"state = zookeeper://10.0.0.1:2181", "state = FILE",
		"state = etcd://1.1.1.1:1,1.1.1.1:2,1.1.1.1:3,1.1.1.1:4,"
			"1.1.1.1:5,1.1.1.1:6,1.1.1.1:7,1.1.1.1:8,1.1.1.1:9",
		"state_lease_s = 1", "state_lease_s = 601",
	};
	struct tallyd_conf c;
	uint64_t seen = 0;
	char why[300];

	(void)state;
	tallyd_conf_defaults(&c);
	assert_string_equal(c.state, "file");
	assert_int_equal(c.state_lease_s, 5);
	assert_int_equal(tallyd_conf_line(&c, "state = file:/srv/t.json",
		&seen, why, sizeof(why)), 0);
	assert_string_equal(c.state_file, "/srv/t.json");
	seen = 0;
	assert_int_equal(tallyd_conf_line(&c, "state = etcd://10.0.0.1:2379,"
		"10.0.0.2:2379", &seen, why, sizeof(why)), 0);
	assert_string_equal(c.state, "etcd://10.0.0.1:2379,10.0.0.2:2379");
	assert_int_equal(tallyd_conf_line(&c, "state_lease_s = 2", &seen,
		why, sizeof(why)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		seen = 0;
		assert_int_equal(tallyd_conf_line(&c, bad[i], &seen, why,
			sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "state"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_and_full_file),
		cmocka_unit_test(bad_lines),
		cmocka_unit_test(errors_name_file_and_line),
		cmocka_unit_test(a_directory_is_refused),
		cmocka_unit_test(check_needs_a_real_group),
		cmocka_unit_test(dataplane_lines),
		cmocka_unit_test(dump_reads_back),
		cmocka_unit_test(state_backends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
