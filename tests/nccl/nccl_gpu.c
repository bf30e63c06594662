/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl-gpu: one rank of a real NCCL communicator on a GPU, for
 * nccl_gpu_test.sh. Rank 0 writes NCCL's unique id to a file the others
 * read; every rank calls ncclCommInitRank, then sums f32 (in eighths,
 * exact in float and in tally's fixed point alike) and i32 tensors with
 * ncclAllReduce in device memory and checks each against the sums it
 * computes itself (tests/nccl/data.c); bf16 and f16 in quarters within
 * +-8 (exact in the type) too, which the plugin takes on host memory
 * only (with TALLY_NCCL_CUDA=1 NCCL sums them on its rings). With NCCL_NET_PLUGIN naming
 * libnccl-net-tally.so and NCCL_COLLNET_ENABLE=1, NCCL's own INFO lines
 * say whether the plugin was loaded and whether CollNet carried the sums;
 * the test script reads them and tally-dp's counters. Prints
 * "rank R: ok - ..." / "rank R: not ok - ..." lines; exit 1 if any failed.
 * Tests only: it needs a CUDA device and NCCL.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "data.h"

struct opts {
	int rank;
	int world;
	int device;
	int iters;
	double limit;		/* seconds one collective may take */
	int no16;		/* --no16: f32 and i32 only */
	const char *idfile;
	size_t sizes[8];
	int nsizes;
};

static int failures;

static void
report(const struct opts *o, int good, const char *fmt, const char *what,
	size_t n, const char *extra)
{
	printf("rank %d: %s - ", o->rank, good ? "ok" : "not ok");
	printf(fmt, what, n, extra);
	printf("\n");
	fflush(stdout);
	if (!good)
		failures++;
}

/* Rank 0 publishes id in path (written whole, then renamed); 0 or -1. */
static int
id_publish(const char *path, const ncclUniqueId *id)
{
	char tmp[512];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (f == NULL)
		return -1;
	if (fwrite(id, sizeof(*id), 1, f) != 1) {
		fclose(f);
		return -1;
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return -1;
	return 0;
}

/* The other ranks wait up to 60 s for rank 0's id; 0 or -1. */
static int
id_wait(const char *path, ncclUniqueId *id)
{
	for (int i = 0; i < 600; i++) {
		FILE *f = fopen(path, "rb");

		if (f != NULL) {
			size_t got = fread(id, sizeof(*id), 1, f);

			fclose(f);
			if (got == 1)
				return 0;
		}
		usleep(100000);
	}
	return -1;
}

/*
 * Waits for stream s, giving up after limit seconds (then the
 * communicator is aborted so the process can exit); 0, or -1 with why.
 */
static int
wait_stream(ncclComm_t comm, cudaStream_t s, double limit, const char **why)
{
	double t0 = data_now();

	for (;;) {
		cudaError_t ce = cudaStreamQuery(s);
		ncclResult_t async = ncclSuccess;

		if (ce == cudaSuccess)
			return 0;
		if (ce != cudaErrorNotReady) {
			*why = cudaGetErrorString(ce);
			return -1;
		}
		if (ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
		    async != ncclSuccess) {
			*why = ncclGetErrorString(async);
			return -1;
		}
		if (data_now() - t0 > limit) {
			*why = "timed out (a hang)";
			return -1;
		}
		usleep(200);
	}
}

/* Where a sum differs: the element's index and, from there, up to four
 * elements' bits of this rank's input, the sum and the expected sum. */
static void
show(const struct opts *o, size_t bad, size_t n, size_t es, const void *in,
	const void *got, const void *want)
{
	const void *v[3] = { in, got, want };
	static const char *const what[3] = { "input", "got", "want" };

	printf("# rank %d: first difference at %zu\n", o->rank, bad);
	for (int k = 0; k < 3; k++) {
		printf("#   %-5s", what[k]);
		for (size_t i = bad; i < n && i < bad + 4; i++) {
			uint32_t u = 0;

			memcpy(&u, (const char *)v[k] + i * es, es);
			printf(" %0*x", (int)es * 2, u);
		}
		printf("\n");
	}
}

/* One in-place allreduce of n elements of kind on the device; checks. */
static int
one(const struct opts *o, ncclComm_t comm, cudaStream_t s, void *d,
	size_t n, int kind, double *secs)
{
	static const char *const names[] = {
		[DATA_I32] = "i32", [DATA_F32_EIGHTHS] = "f32 (eighths)",
		[DATA_BF16_QUARTERS] = "bf16 (quarters)",
		[DATA_F16_QUARTERS] = "f16 (quarters)",
	};
	static const ncclDataType_t types[] = {
		[DATA_I32] = ncclInt32, [DATA_F32_EIGHTHS] = ncclFloat32,
		[DATA_BF16_QUARTERS] = ncclBfloat16,
		[DATA_F16_QUARTERS] = ncclFloat16,
	};
	const char *name = names[kind];
	ncclDataType_t t = types[kind];
	size_t es = data_esize(kind), bytes = (n ? n : 1) * es;
	void *in = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
	const char *why = "";
	ncclResult_t nr;
	double t0;
	size_t bad;
	int rc = -1;

	if (in == NULL || got == NULL || want == NULL)
		goto out;
	data_fill(in, n, kind, 13, (unsigned int)o->rank);
	data_expect(want, n, kind, 13, (unsigned int)o->world, n ? n : 1);
	if (cudaMemcpy(d, in, n * es, cudaMemcpyHostToDevice) != cudaSuccess) {
		report(o, 0, "%s n=%zu: %s", name, n, "cudaMemcpy in failed");
		goto out;
	}
	t0 = data_now();
	nr = ncclAllReduce(d, d, n, t, ncclSum, comm, s);
	if (nr != ncclSuccess) {
		report(o, 0, "%s n=%zu: ncclAllReduce: %s", name, n,
			ncclGetErrorString(nr));
		goto out;
	}
	if (wait_stream(comm, s, o->limit, &why) != 0) {
		report(o, 0, "%s n=%zu: %s", name, n, why);
		goto out;
	}
	*secs = data_now() - t0;
	if (cudaMemcpy(got, d, n * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
		report(o, 0, "%s n=%zu: %s", name, n, "cudaMemcpy out failed");
		goto out;
	}
	bad = data_diff(got, want, n, kind);
	report(o, bad == n, "%s n=%zu: %s", name, n,
		bad == n ? "exact" : "differs");
	if (bad != n)
		show(o, bad, n, es, in, got, want);
	rc = bad == n ? 0 : -1;
out:
	free(in);
	free(got);
	free(want);
	return rc;
}

/* Median of iters timed f32 allreduces of the largest size. */
static void
bench(const struct opts *o, ncclComm_t comm, cudaStream_t s, void *d,
	size_t n)
{
	double t[64], tmp;
	int k = o->iters < 64 ? o->iters : 64;

	for (int i = 0; i < k; i++)
		if (one(o, comm, s, d, n, DATA_F32_EIGHTHS, &t[i]) != 0)
			return;
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			tmp = t[j];
			t[j] = t[j - 1];
			t[j - 1] = tmp;
		}
	if (k > 0)
		printf("bench: rank %d f32 n=%zu (%zu MiB): median %.4f s, "
			"best %.4f s of %d\n", o->rank, n, n * 4 >> 20,
			t[k / 2], t[0], k);
}

static int
parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "world", required_argument, NULL, 'w' },
		{ "device", required_argument, NULL, 'd' },
		{ "id", required_argument, NULL, 'i' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "limit", required_argument, NULL, 'l' },
		{ "no16", no_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->world = 1;
	o->iters = 3;
	o->limit = 60;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r': o->rank = atoi(optarg); break;
		case 'w': o->world = atoi(optarg); break;
		case 'd': o->device = atoi(optarg); break;
		case 'i': o->idfile = optarg; break;
		case 'n': o->iters = atoi(optarg); break;
		case 'l': o->limit = atof(optarg); break;
		case 'x': o->no16 = 1; break;
		case 's':
			if (o->nsizes == 8)
				return -1;
			o->sizes[o->nsizes++] = strtoull(optarg, NULL, 0);
			break;
		default: return -1;
		}
	}
	if (o->idfile == NULL || o->world < 1 || o->rank < 0 ||
	    o->rank >= o->world)
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t s;
	size_t max = 1;
	double secs;
	void *d;
	int v = 0;

	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: nccl-gpu --rank R --world W --id FILE "
			"[--size N]... [--iters N] [--limit S] [--device D] "
			"[--no16]\n");
		return 2;
	}
	ncclGetVersion(&v);
	printf("# rank %d: NCCL %d.%d.%d (%d)\n", o.rank, v / 10000,
		v / 100 % 100, v % 100, v);
	if (cudaSetDevice(o.device) != cudaSuccess) {
		printf("rank %d: not ok - cudaSetDevice(%d)\n", o.rank,
			o.device);
		return 1;
	}
	if (o.rank == 0 && (ncclGetUniqueId(&id) != ncclSuccess ||
	    id_publish(o.idfile, &id) != 0)) {
		printf("rank 0: not ok - unique id to %s\n", o.idfile);
		return 1;
	}
	if (o.rank != 0 && id_wait(o.idfile, &id) != 0) {
		printf("rank %d: not ok - no id in %s\n", o.rank, o.idfile);
		return 1;
	}
	if (ncclCommInitRank(&comm, o.world, id, o.rank) != ncclSuccess) {
		printf("rank %d: not ok - ncclCommInitRank\n", o.rank);
		return 1;
	}
	printf("rank %d: ok - ncclCommInitRank, world %d\n", o.rank, o.world);
	fflush(stdout);
	for (int i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > max)
			max = o.sizes[i];
	if (cudaStreamCreate(&s) != cudaSuccess ||
	    cudaMalloc(&d, max * 4) != cudaSuccess) {
		printf("rank %d: not ok - stream and %zu bytes\n", o.rank,
			max * 4);
		return 1;
	}
	for (int i = 0; i < o.nsizes && failures == 0; i++) {
		static const int kinds[] = { DATA_F32_EIGHTHS, DATA_I32,
			DATA_BF16_QUARTERS, DATA_F16_QUARTERS };

		for (size_t k = 0; k < (o.no16 ? 2u : 4u) && failures == 0;
		     k++)
			one(&o, comm, s, d, o.sizes[i], kinds[k], &secs);
	}
	if (failures == 0 && o.iters > 0)
		bench(&o, comm, s, d, max);
	if (failures == 0) {
		ncclCommDestroy(comm);
		printf("rank %d: ok - ncclCommDestroy\n", o.rank);
	} else {
		ncclCommAbort(comm);
	}
	cudaFree(d);
	cudaStreamDestroy(s);
	return failures ? 1 : 0;
}
