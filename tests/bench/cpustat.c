/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cpustat.c: CPU accounting around a timed call, for tally-bench
 * allreduce's --json: this process's CPU time (every thread), the
 * machine's busy and total ticks (/proc/stat) and another process's CPU
 * time (/proc/PID/stat: tally-dp, for tools/bench-allreduce).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/*
 * The "cpu " line of /proc/stat: busy (user, nice, system, irq, softirq,
 * steal) and total (those plus idle and iowait) ticks into c; both 0
 * when it cannot be read.
 */
static void
host_ticks(struct bench_cpu *c)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int k = 0;

	c->host_busy = c->host_total = 0;
	if (f == NULL)
		return;
	k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		&v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (k != 8)
		return;
	c->host_busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	c->host_total = c->host_busy + v[3] + v[4];
}

/*
 * Process pid's CPU seconds (utime + stime of every thread, fields 14
 * and 15 of /proc/PID/stat, after the command's closing parenthesis);
 * -1 when it cannot be read.
 */
static double
pid_cpu_s(long pid)
{
	unsigned long long ut, st;
	char path[64], line[1024], *p;
	long tck = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1.0;
	len = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[len] = '\0';
	p = strrchr(line, ')');
	if (p == NULL || tck <= 0 || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d "
			"%*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1.0;
	return (double)(ut + st) / (double)tck;
}

/* Fills c now; watch_pid 0 leaves watch_s at -1 (nothing watched). */
void
bench_cpu_sample(struct bench_cpu *c, long watch_pid)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	c->proc_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	host_ticks(c);
	c->watch_s = watch_pid > 0 ? pid_cpu_s(watch_pid) : -1.0;
}

/*
 * d = b - a, field by field; watch_s stays -1 when either sample could
 * not read the watched process.
 */
void
bench_cpu_delta(const struct bench_cpu *a, const struct bench_cpu *b,
	struct bench_cpu *d)
{
	d->proc_s = b->proc_s - a->proc_s;
	d->host_busy = b->host_busy - a->host_busy;
	d->host_total = b->host_total - a->host_total;
	d->watch_s = a->watch_s < 0 || b->watch_s < 0 ? -1.0 :
		b->watch_s - a->watch_s;
}
