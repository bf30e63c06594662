/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Codec specs (<tally/codec.h>) to and from text: what tallyd keeps with
 * a job and hands to workers, and what libtally applies. Strict: unknown
 * names and keys, keys a codec does not take, and values out of range are
 * refused.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/codec.h>

#define DEFAULT_DENSITY	0.01

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

static int
set_key(struct tally_codec *c, const char *k, const char *v, char *why,
	size_t wlen)
{
	char *end;

	if (strcmp(k, "density") == 0 && takes_density(c->kind)) {
		double d;

		errno = 0;
		d = strtod(v, &end);
		if (*v == '\0' || *end != '\0' || errno != 0 || !(d > 0) ||
				d > 1)
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
	if (strcmp(k, "ef") == 0 && c->kind != TALLY_CODEC_FIXP) {
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
			return bad(why, wlen, "ef must be 0 or 1");
		c->ef = v[0] == '1';
		return 0;
	}
	return bad(why, wlen, "codec %s takes no key '%.32s'", names[c->kind],
		k);
}

int
tally_codec_parse(const char *spec, struct tally_codec *c, char *why,
	size_t wlen)
{
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
	*c = (struct tally_codec){ .kind = TALLY_CODEC_FIXP,
		.density = DEFAULT_DENSITY };
	tok = strtok_r(buf, ",", &save);
	if (tok == NULL)
		return bad(why, wlen, "a codec spec is NAME[,KEY=VALUE]...");
	for (k = 0; k < TALLY_CODEC_MAX_; k++)
		if (strcmp(tok, names[k]) == 0)
			break;
	if (k == TALLY_CODEC_MAX_)
		return bad(why, wlen, "unknown codec '%.32s' (fixp, q16, q8, "
			"q4, ternary, 2bit, sign, randk, sparse)", tok);
	c->kind = (enum tally_codec_kind)k;
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *eq = strchr(tok, '=');
		unsigned int bit;

		if (eq == NULL)
			return bad(why, wlen, "'%.32s' is not KEY=VALUE", tok);
		*eq = '\0';
		bit = strcmp(tok, "density") == 0 ? 1u :
			strcmp(tok, "seed") == 0 ? 2u :
			strcmp(tok, "est") == 0 ? 4u :
			strcmp(tok, "ef") == 0 ? 8u : 0u;
		if (bit != 0 && (seen & bit))
			return bad(why, wlen, "'%.32s' given twice", tok);
		seen |= bit;
		ret = set_key(c, tok, eq + 1, why, wlen);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int
tally_codec_format(const struct tally_codec *c, char *buf, size_t len)
{
	char tmp[TALLY_CODEC_SPEC_MAX];
	int n;

	if ((unsigned int)c->kind >= TALLY_CODEC_MAX_ ||
			(unsigned int)c->est >= TALLY_EST_MAX_ ||
			!(c->density > 0) || c->density > 1)
		return -EINVAL;
	n = snprintf(tmp, sizeof(tmp), "%s", names[c->kind]);
	if (takes_density(c->kind) && c->density != DEFAULT_DENSITY) {
		char d[32];
		int prec;

		/* The shortest text that reads back as the same double. */
		for (prec = 1; prec < 17; prec++) {
			snprintf(d, sizeof(d), "%.*g", prec, c->density);
			if (strtod(d, NULL) == c->density)
				break;
		}
		snprintf(d, sizeof(d), "%.*g", prec, c->density);
		n += snprintf(tmp + n, sizeof(tmp) - (size_t)n, ",density=%s",
			d);
	}
	if (c->kind != TALLY_CODEC_FIXP && c->seed != 0)
		n += snprintf(tmp + n, sizeof(tmp) - (size_t)n, ",seed=%llu",
			(unsigned long long)c->seed);
	if (c->kind == TALLY_CODEC_SPARSE && c->est != TALLY_EST_SIDCO_EXP)
		n += snprintf(tmp + n, sizeof(tmp) - (size_t)n, ",est=%s",
			ests[c->est]);
	if (c->kind != TALLY_CODEC_FIXP && c->ef)
		n += snprintf(tmp + n, sizeof(tmp) - (size_t)n, ",ef=1");
	if ((size_t)n >= len)
		return -ENOSPC;
	memcpy(buf, tmp, (size_t)n + 1);
	return n;
}
