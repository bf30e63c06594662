/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench engine: the aggregation engine on one core.
 *
 * Pre-built contribution packets, laid out as received frames would be,
 * go through tally_agg_process() (the function a dataplane lcore calls)
 * in the steady-state SwitchML pattern: round r uses shadow set r & 1 of
 * every slot, and every worker contributes once to each (the packets of
 * a set are used again for every round on it, their round field written
 * just before each is handed over, as a sender would). In the same run
 * a bare loop reads the same packets in the same order (header decode and
 * every payload word): the floor, what merely touching the data costs.
 * Passes of the two alternate; the best pass of each is reported, with
 * the ratio of their times.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/proto.h>

#include "agg/agg.h"
#include "agg/job.h"
#include "agg/jobtab.h"

#include "bench.h"

#define FRAME_ROOM	2048	/* buffer of one received frame, as an mbuf's */
#define FRAME_HDR_OFF	42	/* Ethernet 14 + IPv4 20 + UDP 8 */
#define JOB_ID		7
#define JOB_TOKEN	UINT64_C(0x7a11be7c40a1f00d)
#define PASS_TARGET_NS	200000000u	/* a pass takes about 0.2 s */
#define MAX_ROUNDS	1000000000ul
#define MAX_FRAME_BYTES	(4ul << 30)	/* refuse runs that need more */
#define GOAL_ELEMS_S	2.8e9
#define GOAL_RATIO	1.5

/* The floor's read loop gets the widest vectors the host has, as lanes.c. */
#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define BENCH_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BENCH_MV
#endif

struct engine_opts {
	unsigned int workers;
	unsigned int elems;
	unsigned int enc;
	unsigned int slots;
	unsigned int rounds;	/* 0: calibrate */
	unsigned int passes;
	int json;
	int quick;
};

struct engine {
	struct engine_opts o;
	struct tally_job *job;
	struct tally_jobtab *tab;
	uint8_t *frames;	/* [set][slot][worker], frame_room bytes each */
	size_t frame_room;
	size_t frames_len;
	unsigned int pkt_len;	/* tally header + payload */
	uint64_t agg_round;	/* rounds fed to the engine: next set */
	uint32_t *ref;		/* reference result of one slot */
	struct tally_agg_stats st;
	struct bench_side agg;
	struct bench_side bare;
};

/* Where the floor's accumulator goes, so its reads cannot be dropped. */
static volatile uint32_t floor_sink;

static const struct option long_opts[] = {
	{ "workers", required_argument, NULL, 'w' },
	{ "elems", required_argument, NULL, 'e' },
	{ "enc", required_argument, NULL, 'c' },
	{ "slots", required_argument, NULL, 's' },
	{ "rounds", required_argument, NULL, 'r' },
	{ "passes", required_argument, NULL, 'p' },
	{ "json", no_argument, NULL, 'j' },
	{ "quick", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tally-bench engine [options]\n\n"
		"Feeds pre-built contribution packets to tally_agg_process() on one\n"
		"core and compares it with a loop that only reads the same packets.\n\n"
		"  --workers N   contributions a slot round, 1..64 (default 8)\n"
		"  --elems N     elements a packet, 1..%d (default %d)\n"
		"  --enc ENC     i32, i16, i8 or f32 (default i32)\n"
		"  --slots N     slots in flight, 1..%d (default 128)\n"
		"  --rounds N    rounds of every slot in a timed pass\n"
		"                (default: as many as take about 0.2 s)\n"
		"  --passes N    timed passes of each side, best counts (default 5)\n"
		"  --json        print one JSON object\n"
		"  --quick       a tiny run, for smoke tests\n"
		"  -h, --help    this text\n",
		TALLY_MAX_ELEMS, TALLY_DEFAULT_ELEMS, TALLY_MAX_WINDOW);
}

static int
parse_enc(const char *arg, unsigned int *enc)
{
	static const unsigned int encs[] = {
		TALLY_ENC_I32, TALLY_ENC_I16, TALLY_ENC_I8, TALLY_ENC_F32,
	};
	size_t i;

	for (i = 0; i < sizeof(encs) / sizeof(encs[0]); i++) {
		if (strcmp(arg, tally_enc_name(encs[i])) == 0) {
			*enc = encs[i];
			return 0;
		}
	}
	fprintf(stderr, "--enc: '%s' is not one of i32, i16, i8, f32\n", arg);
	return -1;
}

/* One flag with an argument into o; -1 when its value is bad. */
static int
parse_value(int c, const char *arg, struct engine_opts *o)
{
	unsigned long v;
	int rc = 0;

	switch (c) {
	case 'w':
		rc = bench_parse_uint("workers", arg, 1, TALLY_MAX_WORKERS, &v);
		o->workers = (unsigned int)v;
		break;
	case 'e':
		rc = bench_parse_uint("elems", arg, 1, TALLY_MAX_ELEMS, &v);
		o->elems = (unsigned int)v;
		break;
	case 'c':
		return parse_enc(arg, &o->enc);
	case 's':
		rc = bench_parse_uint("slots", arg, 1, TALLY_MAX_WINDOW, &v);
		o->slots = (unsigned int)v;
		break;
	case 'r':
		rc = bench_parse_uint("rounds", arg, 1, MAX_ROUNDS, &v);
		o->rounds = (unsigned int)v;
		break;
	case 'p':
		rc = bench_parse_uint("passes", arg, 1, 1000, &v);
		o->passes = (unsigned int)v;
		break;
	}
	return rc;
}

/*
 * Fills o from the command line. Returns 0 to run, 1 when help was asked
 * for, -1 on bad usage (the reason and the usage already on stderr).
 */
static int
parse_opts(int argc, char **argv, struct engine_opts *o)
{
	int c;

	*o = (struct engine_opts){ .workers = 8, .elems = TALLY_DEFAULT_ELEMS,
		.enc = TALLY_ENC_I32 };
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		} else if (c == 'j') {
			o->json = 1;
		} else if (c == 'q') {
			o->quick = 1;
		} else if (c == '?' || parse_value(c, optarg, o) != 0) {
			goto bad;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		goto bad;
	}
	if (o->slots == 0)
		o->slots = o->quick ? 16 : 128;
	if (o->passes == 0)
		o->passes = o->quick ? 1 : 5;
	if (o->rounds == 0 && o->quick)
		o->rounds = 4;
	return 0;
bad:
	fputc('\n', stderr);
	usage(stderr);
	return -1;
}

/* The packet of worker w to set 'set' of slot 'slot'. */
static inline uint8_t *
pkt_at(const struct engine *e, unsigned int set, unsigned int slot,
	unsigned int w)
{
	size_t i = ((size_t)set * e->o.slots + slot) * e->o.workers + w;

	return e->frames + i * e->frame_room + FRAME_HDR_OFF;
}

/* splitmix64: reproducible payloads, the same every run. */
static uint64_t
rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Random elements of enc: any bits for integers (sums wrap), for f32
 * finite values of mixed sign and magnitude, so sums round.
 */
static void
fill_payload(uint8_t *p, size_t len, unsigned int enc, uint64_t *rng)
{
	size_t i;

	if (enc == TALLY_ENC_F32) {
		for (i = 0; i + 4 <= len; i += 4) {
			int32_t m = (int32_t)(rng_next(rng) >> 40) - (1 << 23);
			float x = (float)m / 4096.0f;

			memcpy(p + i, &x, 4);
		}
		return;
	}
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next(rng);
}

/*
 * Writes round into the header of the packet at p, as its sender would
 * have: one store, in both timed loops alike.
 */
static inline void
stamp_round(uint8_t *p, uint64_t round)
{
	uint64_t be = __builtin_bswap64(round);

	memcpy(p + offsetof(struct tally_wire_hdr, round), &be, sizeof(be));
}

/* Writes the packet of worker w to set 'set' of slot 'slot'. */
static void
build_packet(struct engine *e, unsigned int set, unsigned int slot,
	unsigned int w, uint64_t *rng)
{
	uint8_t *p = pkt_at(e, set, slot, w);
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION,
		.type = TALLY_PT_SUM,
		.flags = set ? TALLY_F_SET : 0,
		.enc = (uint8_t)e->o.enc,
		.job = JOB_ID,
		.token = JOB_TOKEN,
		.rank = (uint8_t)w,
		.slot = (uint16_t)slot,
		.offset = slot * e->o.elems,
		.count = (uint16_t)e->o.elems,
		.next_block = TALLY_NO_BLOCK,
	};

	tally_hdr_encode(&h, p);
	fill_payload(p + TALLY_HDR_LEN, e->pkt_len - TALLY_HDR_LEN, e->o.enc,
		rng);
}

/* Writes every packet: header by tally_hdr_encode(), random payload. */
static void
build_packets(struct engine *e)
{
	uint64_t rng = 1;
	unsigned int set, slot, w;

	for (set = 0; set < 2; set++)
		for (slot = 0; slot < e->o.slots; slot++)
			for (w = 0; w < e->o.workers; w++)
				build_packet(e, set, slot, w, &rng);
}

/* Creates the job, its table and the packets. 0, or -1 with a message. */
static int
engine_setup(struct engine *e)
{
	struct tally_job_conf conf = {
		.id = JOB_ID,
		.token = JOB_TOKEN,
		.world = (uint8_t)e->o.workers,
		.window = (uint16_t)e->o.slots,
		.max_elems = (uint16_t)e->o.elems,
	};
	size_t room;

	e->pkt_len = TALLY_HDR_LEN +
		(unsigned int)tally_enc_payload_len(e->o.enc, e->o.elems);
	room = FRAME_HDR_OFF + e->pkt_len;
	e->frame_room = (room + FRAME_ROOM - 1) / FRAME_ROOM * FRAME_ROOM;
	e->frames_len = 2 * (size_t)e->o.slots * e->o.workers * e->frame_room;
	if (e->frames_len > MAX_FRAME_BYTES) {
		fprintf(stderr, "tally-bench engine: %zu MiB of packets is too "
			"many; lower --slots, --workers or --elems\n",
			e->frames_len >> 20);
		return -1;
	}
	e->job = tally_job_create(&conf);
	if (e->job == NULL)
		goto err;
	e->tab = tally_jobtab_create(&e->job, 1);
	e->ref = calloc(e->o.elems, sizeof(*e->ref));
	if (e->tab == NULL || e->ref == NULL)
		goto err;
	if (posix_memalign((void **)&e->frames, 4096, e->frames_len) != 0) {
		errno = ENOMEM;
		goto err;
	}
	memset(e->frames, 0, e->frames_len);
	build_packets(e);
	return 0;
err:
	fprintf(stderr, "tally-bench engine: setup: %s\n", strerror(errno));
	return -1;
}

static void
engine_teardown(struct engine *e)
{
	free(e->frames);
	free(e->ref);
	tally_jobtab_destroy(e->tab);
	tally_job_destroy(e->job);
}

/* Element i of a payload as the engine widens it into a 32-bit lane. */
static uint32_t
lane_of(const uint8_t *pl, unsigned int enc, unsigned int i)
{
	uint32_t u;
	int16_t s;

	switch (enc) {
	case TALLY_ENC_I16:
		memcpy(&s, pl + 2 * i, 2);
		return (uint32_t)(int32_t)s;
	case TALLY_ENC_I8:
		return (uint32_t)(int32_t)(int8_t)pl[i];
	default:
		memcpy(&u, pl + 4 * i, 4);
		return u;
	}
}

/*
 * e->ref = the sum of the workers' payloads to set 'set' of slot 'slot':
 * integers wrap in 32 bits, f32 adds in arrival (rank) order.
 */
static void
reference(struct engine *e, unsigned int set, unsigned int slot)
{
	unsigned int i, w;

	for (i = 0; i < e->o.elems; i++) {
		uint32_t isum = 0;
		float fsum = 0.0f, x;

		for (w = 0; w < e->o.workers; w++) {
			uint32_t l = lane_of(pkt_at(e, set, slot, w) +
				TALLY_HDR_LEN, e->o.enc, i);

			isum += l;
			memcpy(&x, &l, 4);
			fsum = w == 0 ? x : fsum + x;
		}
		if (e->o.enc == TALLY_ENC_F32)
			memcpy(&e->ref[i], &fsum, 4);
		else
			e->ref[i] = isum;
	}
}

/* Checks a COMPLETE verdict's header and payload against the reference. */
static int
check_result(struct engine *e, unsigned int set, unsigned int slot,
	const struct tally_verdict *v)
{
	const struct tally_hdr *h = &v->hdr;
	unsigned int n = e->o.elems, i;

	if (h->type != TALLY_PT_SUM_RESULT || h->slot != slot ||
			h->offset != slot * n || h->count != n ||
			h->enc != tally_enc_result(e->o.enc, 0) ||
			(h->flags & TALLY_F_SET) != (set ? TALLY_F_SET : 0) ||
			v->payload_len != n * 4) {
		fprintf(stderr, "tally-bench engine: slot %u set %u: result "
			"header: type %u slot %u offset %u count %u enc %s "
			"flags 0x%x, payload %u B\n", slot, set, h->type,
			h->slot, h->offset, h->count, tally_enc_name(h->enc),
			h->flags, v->payload_len);
		return -1;
	}
	reference(e, set, slot);
	for (i = 0; i < n; i++) {
		uint32_t got;

		memcpy(&got, (const uint8_t *)v->payload + 4 * i, 4);
		if (got != e->ref[i]) {
			fprintf(stderr, "tally-bench engine: slot %u set %u: "
				"element %u is 0x%08x, the sum is 0x%08x\n",
				slot, set, i, got, e->ref[i]);
			return -1;
		}
	}
	return 0;
}

/*
 * One round of every slot, untimed, checking each verdict and every
 * result against the reference sum. Run before and after the timed passes.
 */
static int
verify_round(struct engine *e)
{
	unsigned int set = (unsigned int)(e->agg_round & 1);
	unsigned int slot, w;
	struct tally_verdict v;

	for (slot = 0; slot < e->o.slots; slot++) {
		for (w = 0; w < e->o.workers; w++) {
			enum tally_verdict_kind want = w + 1 < e->o.workers ?
				TALLY_V_TAKEN : TALLY_V_COMPLETE;

			uint8_t *p = pkt_at(e, set, slot, w);

			stamp_round(p, e->agg_round);
			if (tally_agg_process(e->tab, &e->st, p, e->pkt_len,
					NULL, &v) != want) {
				fprintf(stderr, "tally-bench engine: slot %u "
					"set %u rank %u: verdict %d (%s), "
					"expected %d\n", slot, set, w, v.kind,
					tally_status_name(v.status), want);
				return -1;
			}
		}
		if (check_result(e, set, slot, &v) != 0)
			return -1;
	}
	e->agg_round++;
	return 0;
}

/* Whether the engine refused anything so far; says what if it did. */
static int
check_stats(const struct engine *e)
{
	const struct tally_agg_stats *st = &e->st;
	int bad = st->duplicates || st->resent || st->nacks;
	unsigned int s;

	for (s = 1; s < TALLY_ST_MAX_; s++) {
		if (st->drops[s] == 0)
			continue;
		fprintf(stderr, "tally-bench engine: %llu packets refused: "
			"%s\n", (unsigned long long)st->drops[s],
			tally_status_name(s));
		bad = 1;
	}
	if (bad)
		fprintf(stderr, "tally-bench engine: %llu duplicates, %llu "
			"resent, %llu nacks\n",
			(unsigned long long)st->duplicates,
			(unsigned long long)st->resent,
			(unsigned long long)st->nacks);
	return bad ? -1 : 0;
}

/*
 * Checks a timed pass: exactly one COMPLETE per (round, slot), from the
 * last worker, every other packet TAKEN, nothing refused.
 */
static int
check_pass(const struct engine *e, unsigned int rounds,
	const uint64_t *kinds, uint64_t open)
{
	uint64_t rs = (uint64_t)rounds * e->o.slots;

	if (kinds[TALLY_V_COMPLETE] != rs || open != 0 ||
			kinds[TALLY_V_TAKEN] != rs * (e->o.workers - 1)) {
		fprintf(stderr, "tally-bench engine: pass of %u rounds: %llu "
			"complete, %llu taken, %llu round-slots left open; "
			"expected %llu complete\n", rounds,
			(unsigned long long)kinds[TALLY_V_COMPLETE],
			(unsigned long long)kinds[TALLY_V_TAKEN],
			(unsigned long long)open, (unsigned long long)rs);
		check_stats(e);
		return -1;
	}
	return check_stats(e);
}

/*
 * Timed: rounds rounds of every slot through the engine, the packets of a
 * round in the order they lie in memory, as an Rx ring hands them over.
 */
static int
agg_pass(struct engine *e, unsigned int rounds, uint64_t *ns)
{
	const struct tally_jobtab *tab = e->tab;
	struct tally_agg_stats *st = &e->st;
	const size_t room = e->frame_room;
	const size_t per_set = (size_t)e->o.slots * e->o.workers;
	const unsigned int slots = e->o.slots, workers = e->o.workers;
	const unsigned int len = e->pkt_len;
	uint64_t kinds[TALLY_V_NACK + 1] = { 0 };
	uint64_t open = 0, t0;
	struct tally_verdict v;
	unsigned int r, s, w;

	t0 = bench_now_ns();
	for (r = 0; r < rounds; r++) {
		uint8_t *p = e->frames + FRAME_HDR_OFF +
			((e->agg_round + r) & 1) * per_set * room;

		for (s = 0; s < slots; s++) {
			for (w = 0; w < workers; w++, p += room) {
				stamp_round(p, e->agg_round + r);
				kinds[tally_agg_process(tab, st, p, len, NULL,
					&v)]++;
			}
			open += v.kind != TALLY_V_COMPLETE;
		}
	}
	*ns = bench_now_ns() - t0;
	e->agg_round += rounds;
	return check_pass(e, rounds, kinds, open);
}

/* XOR of the payload's 32-bit words (and of a byte tail, if any). */
BENCH_MV static uint32_t
read_words(const uint8_t *p, size_t len)
{
	uint32_t acc = 0, x;
	size_t i;

	for (i = 0; i + 4 <= len; i += 4) {
		memcpy(&x, p + i, 4);
		acc ^= x;
	}
	for (; i < len; i++)
		acc ^= p[i];
	return acc;
}

/*
 * Timed: the floor. The same packets in the same order, each header
 * decoded and its fields used, every payload word read; nothing written
 * but the round field, as in agg_pass().
 */
static int
floor_pass(struct engine *e, unsigned int rounds, uint64_t *ns)
{
	const size_t room = e->frame_room;
	const size_t per_set = (size_t)e->o.slots * e->o.workers;
	const unsigned int len = e->pkt_len;
	struct tally_hdr h = { 0 };
	uint64_t bad = 0, t0;
	uint32_t acc = 0;
	unsigned int r;
	size_t i;

	t0 = bench_now_ns();
	for (r = 0; r < rounds; r++) {
		uint8_t *p = e->frames + FRAME_HDR_OFF +
			(r & 1) * per_set * room;

		for (i = 0; i < per_set; i++, p += room) {
			stamp_round(p, r);
			bad += tally_hdr_decode(p, len, &h) != TALLY_ST_OK;
			acc ^= h.job ^ (uint32_t)h.token ^ h.rank ^ h.slot ^
				h.offset ^ h.flags;
			acc ^= read_words(p + TALLY_HDR_LEN,
				len - TALLY_HDR_LEN);
		}
	}
	*ns = bench_now_ns() - t0;
	floor_sink = acc;
	if (bad != 0) {
		fprintf(stderr, "tally-bench engine: floor: %llu packets did "
			"not decode\n", (unsigned long long)bad);
		return -1;
	}
	return 0;
}

static int
agg_pass_cb(void *arg, unsigned int rounds, uint64_t *ns)
{
	return agg_pass(arg, rounds, ns);
}

/* Alternating timed passes of both sides, each side's best kept. */
static int
run_passes(struct engine *e)
{
	unsigned int p;
	uint64_t ns;

	for (p = 0; p < e->o.passes; p++) {
		if (agg_pass(e, e->o.rounds, &ns) != 0)
			return -1;
		bench_side_add(&e->agg, ns);
		if (floor_pass(e, e->o.rounds, &ns) != 0)
			return -1;
		bench_side_add(&e->bare, ns);
	}
	return 0;
}

static struct bench_figures
figures_of(const struct engine *e, const struct bench_side *sd)
{
	return bench_figures_of(sd, (double)e->o.rounds * e->o.slots *
		e->o.workers, e->o.elems);
}

static int
goal_met(const struct bench_figures *agg, double ratio)
{
	return agg->elems_s >= GOAL_ELEMS_S && ratio <= GOAL_RATIO;
}

static void
report_text(const struct engine *e, const char *cpu)
{
	struct bench_figures fa = figures_of(e, &e->agg);
	struct bench_figures ff = figures_of(e, &e->bare);
	double ratio = fa.seconds / ff.seconds;
	char buf[32];

	printf("machine: %s, %u cores online\n", cpu, bench_cores_online());
	printf("params:  workers %u, elems %u, enc %s, slots %u, rounds %u, "
		"passes %u%s\n", e->o.workers, e->o.elems,
		tally_enc_name(e->o.enc), e->o.slots, e->o.rounds,
		e->o.passes, e->o.quick ? " (quick)" : "");
	printf("packets: %u B (tally header at frame byte %d), %zu B apart, "
		"%.1f MiB in all; lanes %.1f KiB\n\n", e->pkt_len,
		FRAME_HDR_OFF, e->frame_room, (double)e->frames_len / 1048576,
		(double)e->o.slots * 2 * e->job->stride * 4 / 1024);
	printf("%-6s %12s %12s %10s %8s\n", "side", "packets/s", "elements/s",
		"ns/packet", "spread");
	bench_print_row("agg", &fa);
	bench_print_row("floor", &ff);
	printf("\ncompletions/s: %s\n", bench_sci(buf, sizeof(buf),
		(double)e->o.rounds * e->o.slots / fa.seconds));
	printf("ratio agg/floor: %.2fx\n", ratio);
	printf("goal: >= 2.8e9 elements/s per core, ratio <= 1.5x: %s\n",
		e->o.quick ? "not judged (quick run)" :
		goal_met(&fa, ratio) ? "met" : "not met");
}

static void
json_side(const char *name, const struct bench_figures *f)
{
	printf("\"%s\":{\"seconds\":%.6f,\"packets_per_s\":%.4e,"
		"\"elements_per_s\":%.4e,\"ns_per_packet\":%.3f,"
		"\"spread\":%.4f},", name, f->seconds, f->pkts_s, f->elems_s,
		f->ns_pkt, f->spread);
}

static void
report_json(const struct engine *e, const char *cpu)
{
	struct bench_figures fa = figures_of(e, &e->agg);
	struct bench_figures ff = figures_of(e, &e->bare);
	double ratio = fa.seconds / ff.seconds;

	printf("{\"bench\":\"engine\",\"machine\":{\"cpu\":");
	bench_json_string(stdout, cpu);
	printf(",\"cores\":%u},", bench_cores_online());
	printf("\"params\":{\"workers\":%u,\"elems\":%u,\"enc\":\"%s\","
		"\"slots\":%u,\"rounds\":%u,\"passes\":%u,\"quick\":%s,"
		"\"packet_bytes\":%u,\"frame_room\":%zu},", e->o.workers,
		e->o.elems, tally_enc_name(e->o.enc), e->o.slots,
		e->o.rounds, e->o.passes, e->o.quick ? "true" : "false",
		e->pkt_len, e->frame_room);
	json_side("agg", &fa);
	json_side("floor", &ff);
	printf("\"completions_per_s\":%.4e,\"ratio\":%.4f,",
		(double)e->o.rounds * e->o.slots / fa.seconds, ratio);
	printf("\"goal\":{\"elements_per_s\":%.2e,\"ratio\":%.2f,"
		"\"met\":%s}}\n", GOAL_ELEMS_S, GOAL_RATIO,
		e->o.quick ? "null" : goal_met(&fa, ratio) ? "true" : "false");
}

/* Verify, calibrate, time, verify again. */
static int
engine_run(struct engine *e)
{
	if (verify_round(e) != 0 || verify_round(e) != 0)
		return -1;
	if (e->o.rounds == 0 && bench_calibrate(agg_pass_cb, e, MAX_ROUNDS,
			PASS_TARGET_NS, &e->o.rounds) != 0)
		return -1;
	if (run_passes(e) != 0)
		return -1;
	if (verify_round(e) != 0 || verify_round(e) != 0)
		return -1;
	return 0;
}

int
bench_engine(int argc, char **argv)
{
	struct engine e = { 0 };
	char cpu[256];
	int rc;

	rc = parse_opts(argc, argv, &e.o);
	if (rc != 0)
		return rc > 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	if (engine_setup(&e) != 0) {
		engine_teardown(&e);
		return BENCH_EXIT_FAIL;
	}
	rc = engine_run(&e);
	if (rc == 0) {
		bench_cpu_model(cpu, sizeof(cpu));
		if (e.o.json)
			report_json(&e, cpu);
		else
			report_text(&e, cpu);
	} else {
		fprintf(stderr, "tally-bench engine: verification failed\n");
	}
	engine_teardown(&e);
	return rc == 0 ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
}
