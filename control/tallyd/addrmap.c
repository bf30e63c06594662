/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control-to-data address map. A worker's member message claims the
 * data address tally-dp is to accept its packets from; tallyd believes
 * it only when it is the address the worker's rendezvous connection comes
 * from, or one this map lists for that address (hosts whose control and
 * data networks differ). The map is a sorted array of pairs, searched by
 * bisection; it is read once, at start.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "addrmap.h"

struct pair {
	uint32_t ctl, data;	/* host order */
};

struct tallyd_addrmap {
	size_t n, cap;
	struct pair *p;		/* sorted by (ctl, data) */
};

static int
cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->ctl != y->ctl)
		return x->ctl < y->ctl ? -1 : 1;
	if (x->data != y->data)
		return x->data < y->data ? -1 : 1;
	return 0;
}

static int
push(struct tallyd_addrmap *m, uint32_t ctl, uint32_t data)
{
	if (m->n == m->cap) {
		size_t cap = m->cap != 0 ? m->cap * 2 : 64;
		struct pair *p = realloc(m->p, cap * sizeof(*p));

		if (p == NULL)
			return -ENOMEM;
		m->p = p;
		m->cap = cap;
	}
	m->p[m->n++] = (struct pair){ ctl, data };
	return 0;
}

static int
ip_of(const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*ip = ntohl(a.s_addr);
	return 0;
}

/* One line (comment already cut) into m; -EINVAL with the reason in why. */
static int
parse_line(struct tallyd_addrmap *m, char *line, char *why, size_t wlen)
{
	char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
	uint32_t ctl, data;
	unsigned int n = 0;
	int ret;

	if (tok == NULL)
		return 0;
	if (ip_of(tok, &ctl) != 0) {
		snprintf(why, wlen, "'%.32s' is not an IPv4 address", tok);
		return -EINVAL;
	}
	while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
		if (ip_of(tok, &data) != 0) {
			snprintf(why, wlen, "'%.32s' is not an IPv4 address",
				tok);
			return -EINVAL;
		}
		if ((ret = push(m, ctl, data)) != 0) {
			snprintf(why, wlen, "%s", strerror(-ret));
			return ret;
		}
		n++;
	}
	if (n == 0) {
		snprintf(why, wlen, "a control address needs at least one "
			"data address after it");
		return -EINVAL;
	}
	return 0;
}

struct tallyd_addrmap *
tallyd_addrmap_load(const char *path, char *why, size_t wlen)
{
	struct tallyd_addrmap *m = calloc(1, sizeof(*m));
	char line[1024], r[128];
	unsigned int lineno = 0;
	FILE *f;
	int ret = 0;

	if (m == NULL)
		return NULL;
	if ((f = fopen(path, "r")) == NULL) {
		ret = -errno;
		snprintf(why, wlen, "%s: %s", path, strerror(-ret));
		goto fail;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *hash = strchr(line, '#');

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(r, sizeof(r), "line too long");
			ret = -EINVAL;
		} else {
			if (hash != NULL)
				*hash = '\0';
			ret = parse_line(m, line, r, sizeof(r));
		}
		if (ret != 0)
			snprintf(why, wlen, "%s:%u: %s", path, lineno, r);
	}
	fclose(f);
	if (ret != 0)
		goto fail;
	if (m->n > 0)
		qsort(m->p, m->n, sizeof(m->p[0]), cmp);
	return m;
fail:
	tallyd_addrmap_destroy(m);
	errno = -ret;
	return NULL;
}

void
tallyd_addrmap_destroy(struct tallyd_addrmap *m)
{
	if (m == NULL)
		return;
	free(m->p);
	free(m);
}

size_t
tallyd_addrmap_size(const struct tallyd_addrmap *m)
{
	return m != NULL ? m->n : 0;
}

bool
tallyd_addrmap_allows(const struct tallyd_addrmap *m, uint32_t ctl,
	uint32_t data)
{
	struct pair key = { ctl, data };

	return m != NULL && m->n > 0 &&
		bsearch(&key, m->p, m->n, sizeof(m->p[0]), cmp) != NULL;
}
