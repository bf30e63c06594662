/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnccl-net-tally.so as NCCL 2.28.9 sees it, without a GPU or a tally:
 * the table versions NCCL looks up (read from the libnccl.so.2 of the
 * CUDA toolkit when there: its loader's symbol names) and the first one
 * the plugin exports, net and collnet in one library; the v11 layout,
 * offset by offset as NCCL 2.28.9 compiles it; nothing but the two
 * tables exported; the properties NCCL checks; reduceSupport's answers
 * (host memory, and with device memory offered);
 * the point-to-point net over 127.0.0.1 (order, back-pressure, errors);
 * the collnet's join failing cleanly, with a WARN line, when tally is
 * unreachable, the token missing or the ranks disagree on the job.
 *
 * argv[1]: the plugin; TALLY_LIBNCCL: the libnccl.so to read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "load.h"

#if TALLY_HAVE_NCCL_H
#include <nccl.h>
#endif

static const char *plugin_path;
static struct tnl_plugin P;

/* The versions of prefix_vN that the library at path names, as a bit
 * set; 0 when it cannot be read. */
static unsigned int
nccl_versions(const char *path, const char *prefix)
{
	size_t pl = strlen(prefix);
	unsigned int set = 0;
	struct stat st;
	const char *m, *at, *end;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return 0;
	end = m + st.st_size;
	for (at = m; (at = memmem(at, (size_t)(end - at), prefix, pl)) != NULL;
	     at += pl) {
		int v = 0;
		const char *d = at + pl;

		if (at > m && at[-1] != '\0')
			continue;	/* inside a longer name */
		while (d < end && *d >= '0' && *d <= '9')
			v = v * 10 + (*d++ - '0');
		if (d < end && *d == '\0' && v > 0 && v < 32)
			set |= 1u << v;
	}
	munmap((void *)m, (size_t)st.st_size);
	return set;
}

/* NCCL 2.28.9 looks up v11 first, and the plugin's first match (what
 * NCCL takes) is v11, net and collnet in the same library. */
static void
test_versions(void **state)
{
	const char *lib = getenv("TALLY_LIBNCCL");
	unsigned int net = 0, coll = 0;
	int hi = 0;

	(void)state;
	if (lib != NULL && lib[0] != '\0') {
		net = nccl_versions(lib, "ncclNetPlugin_v");
		coll = nccl_versions(lib, "ncclCollNetPlugin_v");
	}
	if (net == 0) {
		print_message("# no libnccl.so to read: NCCL 2.28.9's list "
			"v11..v6 (its source) instead\n");
		net = coll = 0xfc0;	/* 6..11 */
	}
	for (int v = 31; v > 0 && hi == 0; v--)
		if (net & (1u << v))
			hi = v;
	print_message("# NCCL looks up net versions %#x, collnet %#x; "
		"highest %d; the plugin's first: net v%d, collnet v%d\n",
		net, coll, hi, P.net_version, P.coll_version);
	assert_true(net & (1u << P.net_version));
	assert_true(coll & (1u << P.coll_version));
	assert_int_equal(P.net_version, hi);
	assert_int_equal(P.coll_version, 11);
	assert_non_null(P.net);
	assert_non_null(P.coll);
	assert_string_equal(P.net->name, "tally");
	assert_string_equal(P.coll->name, P.net->name);
}

/* The library exports the two tables and nothing of libtally. */
static void
test_exports(void **state)
{
	static const char *hidden[] = { "tally_open", "tally_ctx_open",
		"tally_allreduce_f32", "tally_nccl_sock_init",
		"tally_nccl_log", "tally_fixp_encode" };

	(void)state;
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		assert_null(dlsym(P.dl, hidden[i]));
	for (int v = 10; v >= 6; v--) {
		char sym[64];

		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		assert_null(dlsym(P.dl, sym));
	}
}

#define OFF(type, member) offsetof(struct type, member)

/*
 * gpu/nccl/abi.h against the layout NCCL 2.28.9 compiles (its
 * src/include/plugin/net/net_v11.h, x86-64 / aarch64 LP64): a pointer
 * each for name and every function, in NCCL's order; the properties'
 * members at NCCL's offsets.
 */
static void
test_layout(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct tally_nccl_net), 22 * 8);
	assert_int_equal(OFF(tally_nccl_net, init), 1 * 8);
	assert_int_equal(OFF(tally_nccl_net, accept), 6 * 8);
	assert_int_equal(OFF(tally_nccl_net, isend), 10 * 8);
	assert_int_equal(OFF(tally_nccl_net, test), 13 * 8);
	assert_int_equal(OFF(tally_nccl_net, close_listen), 16 * 8);
	assert_int_equal(OFF(tally_nccl_net, make_vdevice), 19 * 8);
	assert_int_equal(OFF(tally_nccl_net, finalize), 20 * 8);
	assert_int_equal(OFF(tally_nccl_net, set_net_attr), 21 * 8);

	assert_int_equal(sizeof(struct tally_nccl_collnet), 19 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, connect), 5 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, reduce_support), 6 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, iallreduce), 10 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, iallgather), 11 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, ireducescatter), 12 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, iflush), 13 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, test), 14 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, close_coll), 15 * 8);
	assert_int_equal(OFF(tally_nccl_collnet, finalize), 18 * 8);

	assert_int_equal(sizeof(struct tally_nccl_props), 112);
	assert_int_equal(OFF(tally_nccl_props, guid), 16);
	assert_int_equal(OFF(tally_nccl_props, ptr_support), 24);
	assert_int_equal(OFF(tally_nccl_props, latency), 44);
	assert_int_equal(OFF(tally_nccl_props, max_recvs), 52);
	assert_int_equal(OFF(tally_nccl_props, net_device_type), 56);
	assert_int_equal(OFF(tally_nccl_props, vprops), 64);
	assert_int_equal(OFF(tally_nccl_props, max_p2p_bytes), 88);
	assert_int_equal(OFF(tally_nccl_props, max_coll_bytes), 96);
	assert_int_equal(OFF(tally_nccl_props, max_multi_request_size), 104);
	assert_int_equal(sizeof(struct tally_nccl_sge), 24);
}

/* The enum values abi.h uses are nccl.h's (where the toolkit has it). */
static void
test_enums(void **state)
{
	(void)state;
#if TALLY_HAVE_NCCL_H
	assert_int_equal(NCCL_VERSION_CODE / 100, 228);
	assert_int_equal(TALLY_NCCL_SUCCESS, ncclSuccess);
	assert_int_equal(TALLY_NCCL_SYSTEM_ERROR, ncclSystemError);
	assert_int_equal(TALLY_NCCL_INTERNAL_ERROR, ncclInternalError);
	assert_int_equal(TALLY_NCCL_INVALID_USAGE, ncclInvalidUsage);
	assert_int_equal(TALLY_NCCL_REMOTE_ERROR, ncclRemoteError);
	assert_int_equal(TALLY_NCCL_INT32, ncclInt32);
	assert_int_equal(TALLY_NCCL_UINT32, ncclUint32);
	assert_int_equal(TALLY_NCCL_FLOAT16, ncclFloat16);
	assert_int_equal(TALLY_NCCL_FLOAT32, ncclFloat32);
	assert_int_equal(TALLY_NCCL_BFLOAT16, ncclBfloat16);
	assert_int_equal(TALLY_NCCL_FLOAT8E5M2, ncclFloat8e5m2);
	assert_int_equal(TALLY_NCCL_NTYPES, ncclNumTypes);
	assert_int_equal(TALLY_NCCL_SUM, ncclSum);
	assert_int_equal(TALLY_NCCL_MIN, ncclMin);
	assert_int_equal(TALLY_NCCL_AVG, ncclAvg);
	assert_int_equal(sizeof(ncclResult_t), sizeof(int));
	assert_int_equal(sizeof(ncclDataType_t), sizeof(int));
#else
	skip();
#endif
}

/* init, devices and properties of both tables, as NCCL checks them. */
static void
test_properties(void **state)
{
	struct tally_nccl_props np, cp;
	void *nctx = NULL, *cctx = NULL;
	int n = 0;

	(void)state;
	setenv("TALLY_URL", "tally://127.0.0.1:1/job", 1);
	assert_int_equal(P.net->init(&nctx, 1, NULL, tnl_logger, NULL), 0);
	assert_int_equal(P.net->devices(&n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(P.net->get_properties(0, &np), 0);
	assert_int_equal(P.coll->init(&cctx, 1, tnl_logger), 0);
	assert_int_equal(P.coll->devices(&n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(P.coll->get_properties(0, &cp), 0);
	assert_string_equal(np.name, cp.name);
	assert_true(np.ptr_support & TALLY_NCCL_PTR_HOST);
	assert_true(cp.ptr_support & TALLY_NCCL_PTR_HOST);
	assert_true(np.max_p2p_bytes > 0 &&
		np.max_p2p_bytes <= TALLY_NCCL_MAX_NET_BYTES);
	assert_true(cp.max_coll_bytes > 0 &&
		cp.max_coll_bytes <= TALLY_NCCL_MAX_NET_BYTES);
	assert_int_equal(np.net_device_type, 0);
	assert_int_equal(np.max_recvs, 1);
	assert_int_not_equal(P.net->get_properties(1, &np), 0);
	assert_int_equal(P.coll->finalize(cctx), 0);
	assert_int_equal(P.net->finalize(nctx), 0);
}

/* reduceSupport's whole matrix: sums of f32, i32 and u32, and of bf16
 * and f16 when sixteen (TALLY_NCCL_16BIT=1) unless cuda (device memory
 * offered); everything else no. */
static void
reduce_matrix(int cuda, int sixteen)
{
	for (int t = 0; t < TALLY_NCCL_NTYPES + 2; t++) {
		for (int op = 0; op < TALLY_NCCL_NOPS + 2; op++) {
			int s = -1, want = op == TALLY_NCCL_SUM &&
				(t == TALLY_NCCL_FLOAT32 ||
				 t == TALLY_NCCL_INT32 ||
				 t == TALLY_NCCL_UINT32 ||
				 (!cuda && sixteen &&
				 (t == TALLY_NCCL_BFLOAT16 ||
				 t == TALLY_NCCL_FLOAT16)));

			assert_int_equal(P.coll->reduce_support(t, op, &s), 0);
			if (s != want)
				fail_msg("reduceSupport(type %d, op %d) = %d, "
					"want %d (device memory %s)", t, op, s,
					want, cuda ? "offered" : "not offered");
		}
	}
}

/* The 16-bit sums are off by default (docs/nccl.md: zeros under NCCL
 * itself); with TALLY_NCCL_16BIT=1 they are offered on host memory; with
 * TALLY_NCCL_CUDA=1 in a build with CUDA (ptrSupport then names device
 * memory) they are refused, since libtally has no device path for them;
 * in a build without CUDA the variable changes nothing. */
static void
test_reduce_support(void **state)
{
	struct tally_nccl_props p;

	(void)state;
	unsetenv("TALLY_NCCL_CUDA");
	unsetenv("TALLY_NCCL_16BIT");
	assert_int_equal(P.coll->get_properties(0, &p), 0);
	assert_int_equal(p.ptr_support & TALLY_NCCL_PTR_CUDA, 0);
	reduce_matrix(0, 0);
	setenv("TALLY_NCCL_16BIT", "1", 1);
	reduce_matrix(0, 1);
	setenv("TALLY_NCCL_CUDA", "1", 1);
	assert_int_equal(P.coll->get_properties(0, &p), 0);
	reduce_matrix((p.ptr_support & TALLY_NCCL_PTR_CUDA) != 0, 1);
	unsetenv("TALLY_NCCL_16BIT");
	printf("# TALLY_NCCL_CUDA=1: device memory %s, bf16/f16 %s\n",
		p.ptr_support & TALLY_NCCL_PTR_CUDA ? "offered" :
		"not offered (no CUDA)", p.ptr_support & TALLY_NCCL_PTR_CUDA ?
		"refused" : "offered");
	unsetenv("TALLY_NCCL_CUDA");
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A connected send/receive pair of the net over 127.0.0.1, as NCCL makes
 * one: listen, then connect and accept called until both give a comm. */
static void
pair(void **s, void **r, void **l)
{
	char handle[TALLY_NCCL_HANDLE_MAX];
	double t0 = now_s();

	*s = *r = NULL;
	assert_int_equal(P.net->listen(NULL, 0, handle, l), 0);
	while ((*s == NULL || *r == NULL) && now_s() - t0 < 5) {
		if (*s == NULL)
			assert_int_equal(P.net->connect(NULL, 0, handle, s,
				NULL), 0);
		if (*r == NULL)
			assert_int_equal(P.net->accept(*l, r, NULL), 0);
	}
	assert_non_null(*s);
	assert_non_null(*r);
}

#define NMSG	40

/* Tests each request of reqs[0..n) once; the count of those not done. */
static int
poll_reqs(void **reqs, int n, int *sizes)
{
	int left = 0;

	for (int i = 0; i < n; i++) {
		int done = 0;

		if (reqs[i] == NULL || reqs[i] == (void *)1)
			continue;
		assert_int_equal(P.net->test(reqs[i], &done,
			sizes ? &sizes[i] : NULL), 0);
		if (done)
			reqs[i] = (void *)1;	/* a marker: done */
		else
			left++;
	}
	return left;
}

/* Messages of 0 to 39000 bytes arrive whole and in order, with their
 * sizes; beyond 32 requests in flight a post gives NULL (back-pressure),
 * and goes through once earlier ones completed. */
static void
test_net_transfers(void **state)
{
	static char out[NMSG][40000], in[NMSG][40000];
	void *s, *r, *l, *sreq[NMSG] = { 0 }, *rreq[NMSG] = { 0 };
	int sizes[NMSG], nposted = 0, nnull = 0;
	double t0 = now_s();

	(void)state;
	pair(&s, &r, &l);
	for (int i = 0; i < NMSG; i++)
		for (int k = 0; k < 40000; k++)
			out[i][k] = (char)(i * 31 + k * 7);
	while (now_s() - t0 < 10) {
		for (int i = nposted; i < NMSG; i++) {
			size_t cap = sizeof(in[i]);
			void *d = in[i];

			if (sreq[i] == NULL)
				assert_int_equal(P.net->isend(s, out[i],
					(size_t)i * 1000, i, NULL, NULL,
					&sreq[i]), 0);
			if (rreq[i] == NULL)
				assert_int_equal(P.net->irecv(r, 1, &d, &cap,
					&i, NULL, NULL, &rreq[i]), 0);
			if (sreq[i] == NULL || rreq[i] == NULL) {
				nnull++;
				break;
			}
			nposted = i + 1;
		}
		if (poll_reqs(sreq, nposted, NULL) +
		    poll_reqs(rreq, nposted, sizes) == 0 && nposted == NMSG)
			break;
	}
	assert_int_equal(nposted, NMSG);
	assert_true(nnull > 0);
	for (int i = 0; i < NMSG; i++) {
		assert_ptr_equal(rreq[i], (void *)1);
		assert_int_equal(sizes[i], i * 1000);
		assert_memory_equal(in[i], out[i], (size_t)i * 1000);
	}
	P.net->close_send(s);
	P.net->close_recv(r);
	P.net->close_listen(l);
}

/* Tests req until done or an error (at most 5 s); NCCL's result. */
static int
wait_req(void *req, int *done)
{
	double t0 = now_s();
	int rc;

	*done = 0;
	do
		rc = P.net->test(req, done, NULL);
	while (rc == 0 && !*done && now_s() - t0 < 5);
	return rc;
}

/* A message longer than the posted receive, and a peer that went away,
 * are errors from test() with a WARN line, not a hang. */
static void
test_net_errors(void **state)
{
	static char buf[1000];
	void *s, *r, *l, *sr = NULL, *rr = NULL, *d = buf;
	size_t cap = 10;
	unsigned int w = tnl_warns();
	int tag = 0, done;

	(void)state;
	pair(&s, &r, &l);
	assert_int_equal(P.net->isend(s, buf, 100, 0, NULL, NULL, &sr), 0);
	assert_int_equal(P.net->irecv(r, 1, &d, &cap, &tag, NULL, NULL, &rr),
		0);
	assert_int_equal(wait_req(sr, &done), 0);
	assert_int_equal(done, 1);
	assert_int_not_equal(wait_req(rr, &done), 0);
	assert_true(tnl_warns() > w);
	assert_non_null(strstr(tnl_last_warn(), "larger than the posted"));
	P.net->close_send(s);
	P.net->close_recv(r);
	P.net->close_listen(l);

	pair(&s, &r, &l);
	cap = sizeof(buf);
	assert_int_equal(P.net->irecv(r, 1, &d, &cap, &tag, NULL, NULL, &rr),
		0);
	P.net->close_send(s);
	assert_int_not_equal(wait_req(rr, &done), 0);
	assert_int_equal(done, 0);
	P.net->close_recv(r);
	P.net->close_listen(l);
}

/* A collnet group of nranks over URL: init, listen, connect; returns
 * connect's result and how long it took, the comm in *cc. */
static int
coll_join(const char *url, int nranks, void **cc, double *secs)
{
	char handles[2][TALLY_NCCL_HANDLE_MAX];
	void *hp[2] = { handles[0], handles[1] }, *ctx = NULL, *l = NULL;
	double t0;
	int rc;

	setenv("TALLY_URL", url, 1);
	assert_int_equal(P.coll->init(&ctx, 7, tnl_logger), 0);
	assert_int_equal(P.coll->listen(ctx, 0, handles[0], &l), 0);
	memcpy(handles[1], handles[0], sizeof(handles[0]));
	t0 = now_s();
	rc = P.coll->connect(hp, nranks, 0, l, cc);
	*secs = now_s() - t0;
	P.coll->close_listen(l);
	P.coll->finalize(ctx);
	return rc;
}

#define TOKEN64 "0123456789abcdef0123456789abcdef" \
	"0123456789abcdef0123456789abcdef"

/* tally unreachable: connect fails at once with one WARN line saying
 * NCCL goes on without CollNet; *cc stays NULL. */
static void
test_coll_unreachable(void **state)
{
	void *cc = (void *)1;
	unsigned int w = tnl_warns();
	double secs;

	(void)state;
	setenv("TALLY_TOKEN", TOKEN64, 1);
	setenv("TALLY_TLS", "off", 1);
	assert_int_not_equal(coll_join("tally://127.0.0.1:1/job", 2, &cc,
		&secs), 0);
	assert_null(cc);
	assert_true(secs < 10);
	assert_int_equal(tnl_warns(), w + 1);
	assert_non_null(strstr(tnl_last_warn(), "cannot join "
		"tally://127.0.0.1:1/job as rank 0 of 2"));
	assert_non_null(strstr(tnl_last_warn(), "without CollNet"));
	unsetenv("TALLY_TLS");
}

/* No token anywhere: a WARN naming TALLY_TOKEN_FILE; a token file that
 * does not exist: its path and errno. */
static void
test_coll_no_token(void **state)
{
	void *cc = NULL;
	double secs;

	(void)state;
	unsetenv("TALLY_TOKEN");
	unsetenv("TALLY_TOKEN_FILE");
	assert_int_not_equal(coll_join("tally://127.0.0.1:1/job", 2, &cc,
		&secs), 0);
	assert_non_null(strstr(tnl_last_warn(), "TALLY_TOKEN_FILE"));
	setenv("TALLY_TOKEN_FILE", "/nonexistent/tally-token", 1);
	assert_int_not_equal(coll_join("tally://127.0.0.1:1/job", 2, &cc,
		&secs), 0);
	assert_non_null(strstr(tnl_last_warn(),
		"/nonexistent/tally-token: No such file"));
	unsetenv("TALLY_TOKEN_FILE");
}

/* The handle carries the URL and never the token; ranks naming two jobs
 * are refused; without TALLY_URL the collnet stays off. */
static void
test_coll_handles(void **state)
{
	char h[2][TALLY_NCCL_HANDLE_MAX];
	void *hp[2] = { h[0], h[1] }, *ctx = NULL, *l = NULL, *cc = NULL;

	(void)state;
	setenv("TALLY_TOKEN", TOKEN64, 1);
	setenv("TALLY_URL", "tally://10.0.0.1/a", 1);
	assert_int_equal(P.coll->init(&ctx, 7, tnl_logger), 0);
	assert_int_equal(P.coll->listen(ctx, 0, h[0], &l), 0);
	assert_non_null(memmem(h[0], sizeof(h[0]), "tally://10.0.0.1/a", 18));
	assert_null(memmem(h[0], sizeof(h[0]), "0123456789abcdef", 16));
	memcpy(h[1], h[0], sizeof(h[0]));
	strcpy(h[1] + 8, "tally://10.0.0.1/b");
	assert_int_not_equal(P.coll->connect(hp, 2, 1, l, &cc), 0);
	assert_null(cc);
	assert_non_null(strstr(tnl_last_warn(), "different jobs"));
	P.coll->close_listen(l);
	P.coll->finalize(ctx);
	unsetenv("TALLY_URL");
	assert_int_not_equal(P.coll->init(&ctx, 7, tnl_logger), 0);
	setenv("TALLY_URL", "http://x/y", 1);
	assert_int_not_equal(P.coll->init(&ctx, 7, tnl_logger), 0);
	assert_non_null(strstr(tnl_last_warn(), "TALLY_URL must be"));
	unsetenv("TALLY_TOKEN");
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_exports),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_enums),
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_reduce_support),
		cmocka_unit_test(test_net_transfers),
		cmocka_unit_test(test_net_errors),
		cmocka_unit_test(test_coll_unreachable),
		cmocka_unit_test(test_coll_no_token),
		cmocka_unit_test(test_coll_handles),
	};
	char why[512];

	if (argc != 2) {
		fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
		return 2;
	}
	plugin_path = argv[1];
	setenv("TALLY_NCCL_ADDR", "127.0.0.1", 1);
	if (tnl_load(plugin_path, &P, why, sizeof(why)) != 0) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
