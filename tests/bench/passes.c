/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every side-by-side benchmark of tally-bench does the same way:
 * keep each side's best and worst timed pass, turn the best into figures,
 * print them in one notation, and find how many rounds make a pass last
 * long enough to time.
 */
#include <stdio.h>

#include "bench.h"

void
bench_side_add(struct bench_side *sd, uint64_t ns)
{
	if (sd->best_ns == 0 || ns < sd->best_ns)
		sd->best_ns = ns;
	if (ns > sd->worst_ns)
		sd->worst_ns = ns;
}

struct bench_figures
bench_figures_of(const struct bench_side *sd, double pkts, unsigned int elems)
{
	struct bench_figures f;

	f.seconds = (double)sd->best_ns / 1e9;
	f.pkts_s = pkts / f.seconds;
	f.elems_s = f.pkts_s * elems;
	f.ns_pkt = (double)sd->best_ns / pkts;
	f.spread = (double)sd->worst_ns / (double)sd->best_ns - 1.0;
	return f;
}

const char *
bench_sci(char *buf, size_t len, double v)
{
	int x = 0;

	while (v >= 10.0) {
		v /= 10.0;
		x++;
	}
	snprintf(buf, len, "%.2fe%d", v, x);
	return buf;
}

void
bench_print_row(const char *name, const struct bench_figures *f)
{
	char a[32], b[32];

	printf("%-6s %12s %12s %10.1f %7.1f%%\n", name,
		bench_sci(a, sizeof(a), f->pkts_s),
		bench_sci(b, sizeof(b), f->elems_s), f->ns_pkt,
		f->spread * 100.0);
}

int
bench_calibrate(int (*pass)(void *arg, unsigned int rounds, uint64_t *ns),
	void *arg, unsigned long max_rounds, uint64_t target_ns,
	unsigned int *rounds)
{
	unsigned int r = 1;
	uint64_t ns;
	double want;

	for (;;) {
		if (pass(arg, r, &ns) != 0)
			return -1;
		if (ns >= target_ns / 8 || r >= max_rounds / 2)
			break;
		r *= 2;
	}
	want = (double)r * (double)target_ns / (double)(ns > 0 ? ns : 1);
	*rounds = want < 1 ? 1 : want > (double)max_rounds ?
		(unsigned int)max_rounds : (unsigned int)want;
	return 0;
}
