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
int bench_codecs(int argc, char **argv);
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

/*
 * token.c: a token from the file at path, or with path NULL from
 * TALLY_TOKEN, blanks around it removed, into out (cap bytes). Returns 0,
 * -ENOENT (path NULL and TALLY_TOKEN unset), or another -errno with the
 * reason on stderr.
 */
int bench_token_read(const char *path, char *out, size_t cap);

/* Writes s to f as a JSON string, quotes included. */
void bench_json_string(FILE *f, const char *s);

/*
 * cpustat.c: CPU accounting around a timed call. proc_s: this process's
 * CPU seconds (every thread); host_busy, host_total: the machine's
 * /proc/stat ticks (busy: all but idle and iowait); watch_s: a watched
 * process's CPU seconds, -1 when none or unreadable.
 */
struct bench_cpu {
	double proc_s;
	unsigned long long host_busy;
	unsigned long long host_total;
	double watch_s;
};

void bench_cpu_sample(struct bench_cpu *c, long watch_pid);
void bench_cpu_delta(const struct bench_cpu *a, const struct bench_cpu *b,
	struct bench_cpu *d);

/* passes.c: a side's best and worst timed pass (best_ns 0: none yet). */
struct bench_side {
	uint64_t best_ns;
	uint64_t worst_ns;
};

/* The figures of a side's best pass. */
struct bench_figures {
	double seconds;
	double pkts_s;		/* packets (frames) a second */
	double elems_s;		/* contributed elements a second */
	double ns_pkt;
	double spread;		/* worst pass over best, minus one */
};

void bench_side_add(struct bench_side *sd, uint64_t ns);
/* Figures of sd for pkts packets of elems elements a pass. */
struct bench_figures bench_figures_of(const struct bench_side *sd,
	double pkts, unsigned int elems);
/* v as 2.83e9, the notation of the goals; returns buf. */
const char *bench_sci(char *buf, size_t len, double v);
/* One row: name, packets/s, elements/s, ns/packet, spread. */
void bench_print_row(const char *name, const struct bench_figures *f);
/*
 * Rounds that make pass(arg, rounds, &ns) last about target_ns, at most
 * max_rounds: doubles from one until a pass is long enough to scale.
 */
int bench_calibrate(int (*pass)(void *arg, unsigned int rounds, uint64_t *ns),
	void *arg, unsigned long max_rounds, uint64_t target_ns,
	unsigned int *rounds);

#endif /* TALLY_BENCH_BENCH_H */
