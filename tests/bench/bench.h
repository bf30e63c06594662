/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench: what the subcommands share. Each subcommand lives in its own
 * file and is reached through the table in main.c; it gets argv with its
 * own name as argv[0] and returns the process's exit status.
 */
#ifndef TALLY_BENCH_BENCH_H
#define TALLY_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Exit statuses of every subcommand. */
#define BENCH_EXIT_OK		0
#define BENCH_EXIT_FAIL		1	/* a result did not verify */
#define BENCH_EXIT_USAGE	2	/* bad flag or value */

/* Subcommands. */
int bench_engine(int argc, char **argv);
int bench_allreduce(int argc, char **argv);
/* Built with the dataplane (meson defines TALLY_BENCH_DATAPLANE). */
int bench_dataplane(int argc, char **argv);

/* Monotonic time in nanoseconds. */
static inline uint64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Writes the CPU's "model name" from /proc/cpuinfo to buf (always
 * terminated; "unknown" when it cannot be read).
 */
void bench_cpu_model(char *buf, size_t len);

/* Cores online, at least 1. */
unsigned int bench_cores_online(void);

/*
 * Parses a decimal number in [min, max] for flag name; on failure prints
 * why to stderr and returns -1.
 */
int bench_parse_uint(const char *name, const char *arg, unsigned long min,
	unsigned long max, unsigned long *out);

/* Writes s to f as a JSON string, quotes included. */
void bench_json_string(FILE *f, const char *s);

#endif /* TALLY_BENCH_BENCH_H */
