/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Codec specs (<tally/codec.h>) to and from text: what tallyd keeps with
 * a job and hands to workers, and what libtally applies. Strict: unknown
 * names and keys, keys a codec does not take, and values out of range are
 * refused.
 */
#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <tally/codec.h>

#define DEFAULT_DENSITY	TALLY_CODEC_DEF_DENSITY

static const char *const names[TALLY_CODEC_MAX_] = {
	[TALLY_CODEC_FIXP] = "fixp",
	[TALLY_CODEC_Q16] = "q16",
	[TALLY_CODEC_Q8] = "q8",
	[TALLY_CODEC_Q4] = "q4",
	[TALLY_CODEC_TERNARY] = "ternary",
	[TALLY_CODEC_2BIT] = "2bit",
	[TALLY_CODEC_SIGN] = "sign",
	[TALLY_CODEC_RANDK] = "randk",
	[TALLY_CODEC_SPARSE] = "sparse",
	[TALLY_CODEC_POWERSGD] = "powersgd",
};

static const char *const ests[TALLY_EST_MAX_] = {
	[TALLY_EST_SIDCO_EXP] = "sidco-exp",
	[TALLY_EST_SIDCO_GPD] = "sidco-gpd",
	[TALLY_EST_SIDCO_GAMMA] = "sidco-gamma",
	[TALLY_EST_DGC] = "dgc",
	[TALLY_EST_TOPK] = "topk",
};

const char *
tally_codec_name(enum tally_codec_kind k)
{
	return (unsigned int)k < TALLY_CODEC_MAX_ ? names[k] : "?";
}

static int
bad(char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
bad(char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int
takes_density(enum tally_codec_kind k)
{
	return k == TALLY_CODEC_RANDK || k == TALLY_CODEC_SPARSE;
}

/* A decimal number, all of v: 0, or -EINVAL. */
static int
number(const char *v, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(v, &end);
	return *v == '\0' || *end != '\0' || errno != 0 ? -EINVAL : 0;
}

static int
set_key(struct tally_codec *c, const char *k, const char *v, char *why,
	size_t wlen)
{
	char *end;

	if (strcmp(k, "density") == 0 && takes_density(c->kind)) {
		double d;

		if (number(v, &d) != 0 || !(d > 0) || d > 1)
			return bad(why, wlen, "density must be a number in "
				"(0, 1], not '%.32s'", v);
		c->density = d;
		return 0;
	}
	if (strcmp(k, "seed") == 0 && c->kind != TALLY_CODEC_FIXP) {
		if (*v < '0' || *v > '9')
			return bad(why, wlen, "seed must be 0..2^64-1");
		errno = 0;
		c->seed = strtoull(v, &end, 0);
		if (*end != '\0' || errno != 0)
			return bad(why, wlen, "seed must be 0..2^64-1");
		return 0;
	}
	if (strcmp(k, "est") == 0 && c->kind == TALLY_CODEC_SPARSE) {
		for (int e = 0; e < TALLY_EST_MAX_; e++)
			if (strcmp(v, ests[e]) == 0) {
				c->est = (enum tally_codec_est)e;
				return 0;
			}
		return bad(why, wlen, "est must be sidco-exp, sidco-gpd, "
			"sidco-gamma, dgc or topk, not '%.32s'", v);
	}
	if (strcmp(k, "ef") == 0 && c->kind != TALLY_CODEC_FIXP &&
			c->kind != TALLY_CODEC_2BIT) {
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
			return bad(why, wlen, "ef must be 0 or 1");
		c->ef = v[0] == '1';
		return 0;
	}
	if (strcmp(k, "threshold") == 0 && c->kind == TALLY_CODEC_2BIT) {
		double t;

		if (number(v, &t) != 0 || !(t >= FLT_MIN) || t > FLT_MAX)
			return bad(why, wlen, "threshold must be a positive "
				"normal float, not '%.32s'", v);
		c->threshold = (float)t;
		return 0;
	}
	if (strcmp(k, "momentum") == 0 && c->kind == TALLY_CODEC_SPARSE) {
		double m;

		if (number(v, &m) != 0 || !(m >= 0) || m >= 1)
			return bad(why, wlen, "momentum must be a number in "
				"[0, 1), not '%.32s'", v);
		c->momentum = m;
		return 0;
	}
	if ((strcmp(k, "rank") == 0 || strcmp(k, "rows") == 0) &&
			c->kind == TALLY_CODEC_POWERSGD) {
		int rank = k[1] == 'a';
		unsigned long long u;

		if (*v < '0' || *v > '9')
			return bad(why, wlen, "%s must be a whole number", k);
		errno = 0;
		u = strtoull(v, &end, 10);
		if (*end != '\0' || errno != 0 ||
				(rank && (u < 1 || u > TALLY_CODEC_RANK_MAX)) ||
				(!rank && u > UINT32_MAX))
			return bad(why, wlen, rank ? "rank must be 1..%u" :
				"rows must be 0..%u (0: near-square)",
				rank ? TALLY_CODEC_RANK_MAX : UINT32_MAX);
		if (rank)
			c->rank = (uint32_t)u;
		else
			c->rows = (uint32_t)u;
		return 0;
	}
	return bad(why, wlen, "codec %s takes no key '%.32s'", names[c->kind],
		k);
}

int
tally_codec_has_memory(const struct tally_codec *c)
{
	return c->kind == TALLY_CODEC_2BIT || c->kind == TALLY_CODEC_POWERSGD ||
		c->ef || c->momentum > 0;
}

int
tally_codec_parse(const char *spec, struct tally_codec *c, char *why,
	size_t wlen)
{
	static const char *const keys[] = { "density", "seed", "est", "ef",
		"threshold", "momentum", "rank", "rows" };
	char buf[TALLY_CODEC_SPEC_MAX * 2], *tok, *save = NULL;
	unsigned int seen = 0;
	int k, ret;

	if (spec == NULL || strlen(spec) >= sizeof(buf))
		return bad(why, wlen, "a codec spec is NAME[,KEY=VALUE]...");
	/* strtok_r would skip empty fields: refuse them first. */
	if (spec[0] == ',' || strstr(spec, ",,") != NULL ||
			(spec[0] != '\0' && spec[strlen(spec) - 1] == ','))
		return bad(why, wlen, "empty field in codec spec '%.32s'", spec);
	strcpy(buf, spec);
	memset(c, 0, sizeof(*c));
	c->kind = TALLY_CODEC_FIXP;
	c->density = DEFAULT_DENSITY;
	c->threshold = TALLY_CODEC_DEF_THRESHOLD;
	c->rank = TALLY_CODEC_DEF_RANK;
	c->est = TALLY_CODEC_DEF_EST;
	tok = strtok_r(buf, ",", &save);
	if (tok == NULL)
		return bad(why, wlen, "a codec spec is NAME[,KEY=VALUE]...");
	for (k = 0; k < TALLY_CODEC_MAX_; k++)
		if (strcmp(tok, names[k]) == 0)
			break;
	if (k == TALLY_CODEC_MAX_)
		return bad(why, wlen, "unknown codec '%.32s' (fixp, q16, q8, "
			"q4, ternary, 2bit, sign, randk, sparse, powersgd)",
			tok);
	c->kind = (enum tally_codec_kind)k;
	c->ef = c->kind == TALLY_CODEC_POWERSGD;
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *eq = strchr(tok, '=');
		size_t bit;

		if (eq == NULL)
			return bad(why, wlen, "'%.32s' is not KEY=VALUE", tok);
		*eq = '\0';
		for (bit = 0; bit < sizeof(keys) / sizeof(keys[0]); bit++)
			if (strcmp(tok, keys[bit]) == 0)
				break;
		if (bit < sizeof(keys) / sizeof(keys[0]) &&
				(seen & (1u << bit)))
			return bad(why, wlen, "'%.32s' given twice", tok);
		seen |= 1u << bit;
		ret = set_key(c, tok, eq + 1, why, wlen);
		if (ret != 0)
			return ret;
	}
	if (c->momentum > 0 && c->ef)
		return bad(why, wlen, "momentum keeps DGC's own accumulation "
			"of what was not sent: not with ef=1");
	return 0;
}

/*
 * The shortest text of v that reads back as the same value: as a double,
 * or as a float when is_float. Writes d (32 bytes).
 */
static void
shortest(double v, int is_float, char *d)
{
	int prec;

	for (prec = 1; prec < 17; prec++) {
		double back;

		snprintf(d, 32, "%.*g", prec, v);
		back = strtod(d, NULL);
		if (is_float ? (float)back == (float)v : back == v)
			break;
	}
	snprintf(d, 32, "%.*g", prec, v);
}

int
tally_codec_format(const struct tally_codec *c, char *buf, size_t len)
{
	char tmp[TALLY_CODEC_SPEC_MAX], d[32];
	size_t n;

	if ((unsigned int)c->kind >= TALLY_CODEC_MAX_ ||
			(unsigned int)c->est >= TALLY_EST_MAX_ ||
			!(c->density > 0) || c->density > 1 ||
			!(c->momentum >= 0) || c->momentum >= 1 ||
			(c->kind == TALLY_CODEC_2BIT &&
				(!(c->threshold >= FLT_MIN) ||
				c->threshold > FLT_MAX)) ||
			(c->kind == TALLY_CODEC_POWERSGD && (c->rank < 1 ||
				c->rank > TALLY_CODEC_RANK_MAX)))
		return -EINVAL;
	/* Each piece is far shorter than tmp: no snprintf can truncate. */
	n = (size_t)snprintf(tmp, sizeof(tmp), "%s", names[c->kind]);
	if (takes_density(c->kind) && c->density != DEFAULT_DENSITY) {
		shortest(c->density, 0, d);
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",density=%s",
			d);
	}
	if (c->kind != TALLY_CODEC_FIXP && c->seed != 0)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",seed=%llu",
			(unsigned long long)c->seed);
	if (c->kind == TALLY_CODEC_SPARSE && c->est != TALLY_CODEC_DEF_EST)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",est=%s",
			ests[c->est]);
	if (c->kind == TALLY_CODEC_2BIT &&
			c->threshold != TALLY_CODEC_DEF_THRESHOLD) {
		shortest(c->threshold, 1, d);
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n,
			",threshold=%s", d);
	}
	if (c->kind == TALLY_CODEC_SPARSE && c->momentum != 0) {
		shortest(c->momentum, 0, d);
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",momentum=%s",
			d);
	}
	if (c->kind == TALLY_CODEC_POWERSGD && c->rank != TALLY_CODEC_DEF_RANK)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",rank=%u",
			c->rank);
	if (c->kind == TALLY_CODEC_POWERSGD && c->rows != 0)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",rows=%u",
			c->rows);
	if (c->kind == TALLY_CODEC_POWERSGD && !c->ef)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",ef=0");
	else if (c->kind != TALLY_CODEC_FIXP && c->kind != TALLY_CODEC_POWERSGD
			&& c->kind != TALLY_CODEC_2BIT && c->ef)
		n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, ",ef=1");
	if (n >= len)
		return -ENOSPC;
	memcpy(buf, tmp, n + 1);
	return (int)n;
}
