/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_allreduce: the OpenMPI baseline of tools/bench-allreduce. Every
 * rank sums a float32 tensor with MPI_Allreduce(MPI_FLOAT, MPI_SUM):
 * one untimed warm-up, then --iters timed calls, each after an
 * MPI_Barrier. An iteration's time is the longest of any rank's (an
 * MPI_Reduce with MPI_MAX), as tally's row takes the slowest worker's.
 * Rank 0 checks one element of the result and prints one JSON object.
 *
 *   mpi_allreduce SIZE_BYTES ITERS
 *
 * Built by tools/bench-allreduce with mpicc at run time (not by meson:
 * the project does not depend on MPI).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define MAX_ITERS	1000

/* Rank r's element i: small values, exactly representable sums. */
static float
elem(int rank, size_t i)
{
	return (float)((int)((i * 7 + (size_t)rank * 13) % 17) - 8);
}

static void
fill(float *x, size_t n, int rank)
{
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = elem(rank, i);
}

/* Whether a few elements of the sum are right. */
static int
check(const float *x, size_t n, int world)
{
	size_t probe[4] = { 0, n / 3, n / 2, n - 1 };
	size_t k;
	int r;

	for (k = 0; k < 4; k++) {
		float want = 0;

		for (r = 0; r < world; r++)
			want += elem(r, probe[k]);
		if (x[probe[k]] != want)
			return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	double t[MAX_ITERS], tmax[MAX_ITERS], best, sum;
	unsigned long long size;
	int rank, world, iters, i, ok;
	size_t n;
	float *x;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (argc != 3) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_allreduce SIZE_BYTES ITERS\n");
		MPI_Finalize();
		return 2;
	}
	size = strtoull(argv[1], NULL, 0);
	iters = atoi(argv[2]);
	if (size < 4 || size % 4 != 0 || size / 4 > INT_MAX ||
			iters < 1 || iters > MAX_ITERS) {
		if (rank == 0)
			fprintf(stderr, "mpi_allreduce: bad size or iters\n");
		MPI_Finalize();
		return 2;
	}
	n = size / 4;
	x = malloc(size);
	if (x == NULL) {
		fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	/*
	 * Progress on stderr, so that a run that hangs says where (the
	 * script waits for "started" to tell a stuck launch from a slow
	 * allreduce). Warm-up: connections are made lazily, on first use.
	 */
	fill(x, n, rank);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		fprintf(stderr, "mpi_allreduce: started, %d ranks\n", world);
	t[0] = MPI_Wtime();
	MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM,
		MPI_COMM_WORLD);
	if (rank == 0)
		fprintf(stderr, "mpi_allreduce: warm-up %.3f s\n",
			MPI_Wtime() - t[0]);

	for (i = 0; i < iters; i++) {
		double t0;

		fill(x, n, rank);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM,
			MPI_COMM_WORLD);
		t[i] = MPI_Wtime() - t0;
	}
	ok = check(x, n, world) == 0;
	MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

	if (rank == 0) {
		best = INFINITY;
		sum = 0;
		printf("{\"system\":\"mpi\",\"world\":%d,\"size\":%llu,"
			"\"seconds\":[", world, size);
		for (i = 0; i < iters; i++) {
			printf("%s%.6f", i ? "," : "", tmax[i]);
			if (tmax[i] < best)
				best = tmax[i];
			sum += tmax[i];
		}
		printf("],\"best_s\":%.6f,\"mean_s\":%.6f,\"check\":\"%s\"}\n",
			best, sum / iters, ok ? "ok" : "FAIL");
		fflush(stdout);
	}
	free(x);
	MPI_Finalize();
	return ok ? 0 : 1;
}
