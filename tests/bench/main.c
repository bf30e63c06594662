/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench: benchmarks of tally's parts, one subcommand each. This file
 * holds the subcommand table, the usage it prints, and the few helpers
 * every subcommand shares.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct subcommand subcommands[] = {
	{ "engine", bench_engine,
		"aggregation engine against a read-only floor, one core" },
	{ "allreduce", bench_allreduce,
		"one worker of an allreduce through a dataplane (libtally)" },
	{ "codecs", bench_codecs,
		"codec throughput; sparse threshold estimators vs exact top-k" },
#ifdef TALLY_BENCH_DATAPLANE
	{ "dataplane", bench_dataplane,
		"tally-dp's lcore loop on a net_ring port against rx->tx" },
#endif
};

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void
usage(FILE *f, const char *prog)
{
	size_t i;

	fprintf(f, "usage: %s <subcommand> [options]\n", prog);
	fprintf(f, "       %s <subcommand> --help\n\n", prog);
	fprintf(f, "subcommands:\n");
	for (i = 0; i < NSUBCOMMANDS; i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name,
			subcommands[i].help);
}

int
main(int argc, char **argv)
{
	const char *prog = "tally-bench";
	static char name[64];
	size_t i;

	if (argc < 2) {
		usage(stderr, prog);
		return BENCH_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
			strcmp(argv[1], "help") == 0) {
		usage(stdout, prog);
		return BENCH_EXIT_OK;
	}
	for (i = 0; i < NSUBCOMMANDS; i++) {
		if (strcmp(argv[1], subcommands[i].name) == 0) {
			/* getopt names argv[0] in its messages. */
			snprintf(name, sizeof(name), "%s %s", prog, argv[1]);
			argv[1] = name;
			return subcommands[i].fn(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "%s: unknown subcommand '%s'\n\n", prog, argv[1]);
	usage(stderr, prog);
	return BENCH_EXIT_USAGE;
}

void
bench_cpu_model(char *buf, size_t len)
{
	static const char key[] = "model name";
	char line[512];
	FILE *f;

	snprintf(buf, len, "unknown");
	f = fopen("/proc/cpuinfo", "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *v = strchr(line, ':');

		if (strncmp(line, key, sizeof(key) - 1) != 0 || v == NULL)
			continue;
		v++;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(buf, len, "%s", v);
		break;
	}
	fclose(f);
}

unsigned int
bench_cores_online(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (unsigned int)n;
}

int
bench_parse_uint(const char *name, const char *arg, unsigned long min,
	unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || errno != 0 ||
			v < min || v > max) {
		fprintf(stderr, "--%s: '%s' is not a number in %lu..%lu\n",
			name, arg, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

void
bench_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}
