/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * docs/protocol.md and include/tally/proto.h must agree. This suite reads
 * the tables of the document (its path is argv[1]) and checks every field
 * offset and size, every constant's value and name, and the bytes that
 * tally_hdr_encode() writes at the offsets the document states; and the
 * RoCEv2 framing (its BTH and DETH fields, port, opcodes, QPN base,
 * default Q_Key and path MTU table) against <tally/roce.h>.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/proto.h>
#include <tally/roce.h>

#define MAX_ROWS 32
#define MAX_CELLS 6

struct row {
	char cell[MAX_CELLS][128];
	int ncell;
};

static char *doc;

static void
trim_into(char *dst, size_t cap, const char *s, size_t n)
{
	while (n > 0 && (*s == ' ' || *s == '`')) {
		s++;
		n--;
	}
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '`'))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/*
 * Reads the table that follows the heading line `heading` into rows,
 * without its title and separator lines. Returns the number of rows.
 */
static int
read_table(const char *heading, struct row *rows)
{
	const char *p = strstr(doc, heading);
	int n = 0, line = 0;

	assert_non_null(p);
	p = strchr(p, '\n');
	while (p != NULL && n < MAX_ROWS) {
		const char *eol, *c;

		p++;
		eol = strchr(p, '\n');
		if (eol == NULL)
			eol = p + strlen(p);
		if (*p != '|') {
			if (line > 0)
				break;	/* the table has ended */
			p = *eol ? eol : NULL;
			continue;
		}
		if (line++ >= 2) {	/* skip title and separator */
			rows[n].ncell = 0;
			for (c = p + 1; c < eol && rows[n].ncell < MAX_CELLS;) {
				const char *bar = memchr(c, '|', (size_t)(eol - c));

				if (bar == NULL)
					break;
				trim_into(rows[n].cell[rows[n].ncell++], 128, c,
					(size_t)(bar - c));
				c = bar + 1;
			}
			n++;
		}
		p = *eol ? eol : NULL;
	}
	return n;
}

struct field {
	const char *name;
	size_t off;
	size_t size;
};

#define F(m) { #m, offsetof(struct tally_wire_hdr, m), \
	sizeof(((struct tally_wire_hdr *)0)->m) }

static const struct field fields[] = {
	F(magic), F(version), F(type), F(flags), F(enc), F(job), F(token),
	F(rank), F(status), F(slot), F(offset), F(count), F(scale_exp),
	F(next_block), F(round),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const struct field *
field_by_name(const char *name)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strcmp(fields[i].name, name) == 0)
			return &fields[i];
	return NULL;
}

static void
header_fields_match(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Header fields", rows);
	size_t total = 0;

	(void)state;
	assert_int_equal(n, NFIELDS);
	for (int i = 0; i < n; i++) {
		const struct field *f = field_by_name(rows[i].cell[2]);

		if (f == NULL)
			fail_msg("doc field '%s' not in proto.h", rows[i].cell[2]);
		assert_int_equal(strtoul(rows[i].cell[0], NULL, 0), f->off);
		assert_int_equal(strtoul(rows[i].cell[1], NULL, 0), f->size);
		total += f->size;
	}
	assert_int_equal(total, TALLY_HDR_LEN);
	assert_int_equal(sizeof(struct tally_wire_hdr), TALLY_HDR_LEN);
}

static uint64_t
load_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t
host_value(const struct tally_hdr *h, const char *name)
{
	static const struct { const char *n; size_t off, size; } hv[] = {
#define H(m) { #m, offsetof(struct tally_hdr, m), \
	sizeof(((struct tally_hdr *)0)->m) }
		H(version), H(type), H(flags), H(enc), H(job), H(token),
		H(rank), H(status), H(slot), H(offset), H(count),
		H(scale_exp), H(next_block), H(round),
#undef H
	};

	if (strcmp(name, "magic") == 0)
		return TALLY_PROTO_MAGIC;
	for (size_t i = 0; i < sizeof(hv) / sizeof(hv[0]); i++) {
		if (strcmp(hv[i].n, name) == 0) {
			uint64_t v = 0;

			memcpy(&v, (const uint8_t *)h + hv[i].off, hv[i].size);
			return v;	/* little-endian host, checked by lanes.c */
		}
	}
	fail_msg("no host field %s", name);
	return 0;
}

/* Bytes written by tally_hdr_encode sit where the document says. */
static void
encoded_bytes_at_doc_offsets(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Header fields", rows);
	struct tally_hdr h = {
		.version = 1, .type = TALLY_PT_MAX, .flags = 0x0d,
		.enc = TALLY_ENC_I16, .job = 0xbeef,
		.token = 0x0102030405060708ull, .rank = 63, .status = 12,
		.slot = 0x1234, .offset = 0xa1b2c3d4, .count = 0x3fff,
		.scale_exp = -3, .next_block = 0x55667788,
		.round = 0x8877665544332211ull,
	};
	uint8_t buf[TALLY_HDR_LEN];

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	tally_hdr_encode(&h, buf);
	for (int i = 0; i < n; i++) {
		size_t off = strtoul(rows[i].cell[0], NULL, 0);
		size_t size = strtoul(rows[i].cell[1], NULL, 0);
		uint64_t want = host_value(&h, rows[i].cell[2]);
		uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;

		if (load_be(buf + off, size) != (want & mask))
			fail_msg("field %s: wire %#llx, want %#llx",
				rows[i].cell[2],
				(unsigned long long)load_be(buf + off, size),
				(unsigned long long)(want & mask));
	}
}

struct constant {
	const char *name;
	unsigned long value;
};

static void
check_constants(const char *heading, const struct constant *c, size_t nc,
	int name_col)
{
	struct row rows[MAX_ROWS];
	int n = read_table(heading, rows);

	assert_int_equal(n, nc);
	for (int i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < nc; k++)
			if (strcmp(c[k].name, rows[i].cell[name_col]) == 0)
				break;
		if (k == nc)
			fail_msg("%s: '%s' unknown to proto.h", heading,
				rows[i].cell[name_col]);
		assert_int_equal(strtoul(rows[i].cell[0], NULL, 0), c[k].value);
	}
}

static void
types_match(void **state)
{
	static const struct constant c[] = {
		{ "SUM", TALLY_PT_SUM }, { "SUM_RESULT", TALLY_PT_SUM_RESULT },
		{ "MAX", TALLY_PT_MAX }, { "MAX_RESULT", TALLY_PT_MAX_RESULT },
		{ "NACK", TALLY_PT_NACK }, { "SCATTER", TALLY_PT_SCATTER },
		{ "GATHER", TALLY_PT_GATHER },
		{ "PART_RESULT", TALLY_PT_PART_RESULT },
		{ "DONE", TALLY_PT_DONE },
	};

	(void)state;
	check_constants("### Packet types", c, 9, 1);
}

static void
flags_match(void **state)
{
	static const struct constant c[] = {
		{ "RETX", TALLY_F_RETX }, { "LAST", TALLY_F_LAST },
		{ "SET", TALLY_F_SET }, { "SPARSE", TALLY_F_SPARSE },
		{ "AUTH", TALLY_F_AUTH }, { "SEQ", TALLY_F_SEQ },
	};

	(void)state;
	check_constants("### Flags", c, 6, 1);
}

static void
encodings_match(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Encodings", rows);

	(void)state;
	assert_int_equal(n, TALLY_ENC_MAX_ - 1);
	for (int i = 0; i < n; i++) {
		unsigned int enc = (unsigned int)strtoul(rows[i].cell[0], NULL, 0);
		const char *len = rows[i].cell[2];

		assert_string_equal(tally_enc_name(enc), rows[i].cell[1]);
		/* The payload size formula, evaluated for n = 1 .. 40. */
		for (size_t k = 1; k <= 40; k++) {
			size_t want;

			if (strcmp(len, "4n") == 0)
				want = 4 * k;
			else if (strcmp(len, "2n") == 0)
				want = 2 * k;
			else if (strcmp(len, "n") == 0)
				want = k;
			else if (strcmp(len, "(n+1)/2") == 0)
				want = (k + 1) / 2;
			else if (strcmp(len, "(n+7)/8") == 0)
				want = (k + 7) / 8;
			else
				fail_msg("unknown size formula '%s'", len);
			assert_int_equal(tally_enc_payload_len(enc, k), want);
		}
	}
}

static void
statuses_match(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Status codes", rows);

	(void)state;
	assert_int_equal(n, TALLY_ST_MAX_ - 1);
	for (int i = 0; i < n; i++) {
		unsigned int st = (unsigned int)strtoul(rows[i].cell[0], NULL, 0);

		assert_string_equal(tally_status_name(st), rows[i].cell[1]);
		/* The row of bad_version names this version. */
		if (st == TALLY_ST_BAD_VERSION) {
			char want[32];

			snprintf(want, sizeof(want), "version is not %d",
				TALLY_PROTO_VERSION);
			assert_string_equal(rows[i].cell[2], want);
		}
	}
}

static void
result_encodings_match(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Result encodings", rows);

	(void)state;
	assert_int_equal(n, TALLY_ENC_MAX_ - 1);
	for (int i = 0; i < n; i++) {
		unsigned int enc = 0, w, nw;

		for (unsigned int e = 1; e < TALLY_ENC_MAX_; e++)
			if (strcmp(tally_enc_name(e), rows[i].cell[0]) == 0)
				enc = e;
		assert_int_not_equal(enc, 0);
		w = tally_enc_result(enc, 0);
		nw = tally_enc_result(enc, 1);
		/* The cell starts with the result's encoding name. */
		assert_int_equal(strncmp(rows[i].cell[1], tally_enc_name(w),
			strlen(tally_enc_name(w))), 0);
		assert_int_equal(strncmp(rows[i].cell[2], tally_enc_name(nw),
			strlen(tally_enc_name(nw))), 0);
	}
}

static void
port_and_magic_stated(void **state)
{
	char s[64];

	(void)state;
	snprintf(s, sizeof(s), "UDP port **%d**", TALLY_UDP_PORT);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "magic (0x%04X)", TALLY_PROTO_MAGIC);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "# tally wire protocol, version %d",
		TALLY_PROTO_VERSION);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "starts with this %d-byte header",
		TALLY_HDR_LEN);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "a %d-byte tag", TALLY_TAG_LEN);
	assert_non_null(strstr(doc, s));
}

/* The BTH and DETH fields where <tally/roce.h> puts them. */
static void
roce_fields_match(void **state)
{
	static const struct { const char *name; unsigned int off, size; } f[] = {
		{ "opcode", TALLY_ROCE_BTH_OPCODE, 1 },
		{ "flags", TALLY_ROCE_BTH_FLAGS, 1 },
		{ "pkey", TALLY_ROCE_BTH_PKEY, 2 },
		{ "dqpn", TALLY_ROCE_BTH_DQPN, 4 },
		{ "psn", TALLY_ROCE_BTH_PSN, 4 },
		{ "qkey", TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_QKEY, 4 },
		{ "sqpn", TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_SQPN, 4 },
	};
	struct row rows[MAX_ROWS];
	int n = read_table("### RoCEv2 header fields", rows);
	unsigned int next = 0;
	char op[32];

	(void)state;
	assert_int_equal(n, (int)(sizeof(f) / sizeof(f[0])));
	for (int i = 0; i < n; i++) {
		assert_string_equal(rows[i].cell[2], f[i].name);
		assert_int_equal(strtoul(rows[i].cell[0], NULL, 0), f[i].off);
		assert_int_equal(strtoul(rows[i].cell[1], NULL, 0), f[i].size);
		assert_int_equal(f[i].off, next);	/* no gap, no overlap */
		next += f[i].size;
	}
	assert_int_equal(next, TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_LEN);
	snprintf(op, sizeof(op), "%#x", TALLY_ROCE_OP_UD_SEND);
	assert_non_null(strstr(rows[0].cell[3], op));
	snprintf(op, sizeof(op), "%#x", TALLY_ROCE_OP_UD_SEND_IMM);
	assert_non_null(strstr(rows[0].cell[3], op));
	snprintf(op, sizeof(op), "%#x", TALLY_ROCE_PKEY_FULL);
	assert_non_null(strstr(rows[2].cell[3], op));
	snprintf(op, sizeof(op), "%#x + job id", TALLY_ROCE_QKEY(0));
	assert_non_null(strstr(rows[5].cell[3], op));
}

/* Port, QPN base and the path MTU table, with its element counts. */
static void
roce_constants_stated(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### RoCEv2 path MTU", rows);
	char s[64];

	(void)state;
	snprintf(s, sizeof(s), "UDP port **%d**", TALLY_ROCE_UDP_PORT);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "`--roce-qpn-base`, default %#x",
		TALLY_ROCE_QPN_BASE);
	assert_non_null(strstr(doc, s));
	snprintf(s, sizeof(s), "destination QP %#x", TALLY_ROCE_QPN_MCAST);
	assert_non_null(strstr(doc, s));
	assert_true(n >= 3);
	for (int i = 0; i < n; i++) {
		unsigned int pmtu = tally_roce_pmtu(
			(unsigned int)strtoul(rows[i].cell[0], NULL, 10));

		assert_int_equal(strtoul(rows[i].cell[1], NULL, 10), pmtu);
		assert_int_equal(strtoul(rows[i].cell[2], NULL, 10),
			(pmtu - TALLY_HDR_LEN) / 4);
	}
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n)
		buf[n] = '\0';
	fclose(f);
	return buf;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(header_fields_match),
		cmocka_unit_test(encoded_bytes_at_doc_offsets),
		cmocka_unit_test(types_match),
		cmocka_unit_test(flags_match),
		cmocka_unit_test(encodings_match),
		cmocka_unit_test(result_encodings_match),
		cmocka_unit_test(statuses_match),
		cmocka_unit_test(port_and_magic_stated),
		cmocka_unit_test(roce_fields_match),
		cmocka_unit_test(roce_constants_stated),
	};
	int rc;

	if (argc < 2 || (doc = slurp(argv[1])) == NULL) {
		fprintf(stderr, "usage: %s docs/protocol.md\n", argv[0]);
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(doc);
	return rc;
}
