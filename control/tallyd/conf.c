/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's configuration file: "key = value" lines, '#' comments. Every
 * key is in the table below with its parser; docs/control.md lists them
 * for operators.
 */
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <arpa/inet.h>

#include "tallyd.h"
#include "etcd.h"

enum kind { K_STR, K_PATH, K_PATH_OPT, K_ADDR, K_ADDR_OFF, K_IP, K_ONOFF,
	K_UINT, K_NAME, K_STATE };

struct key {
	const char *name;
	enum kind kind;
	size_t off;
	size_t size;		/* strings: buffer size */
	unsigned long lo, hi;	/* numbers */
};

#define STR(n, k) { #n, k, offsetof(struct tallyd_conf, n), \
	sizeof(((struct tallyd_conf *)0)->n), 0, 0 }
#define NUM(n, lo, hi) { #n, K_UINT, offsetof(struct tallyd_conf, n), \
	sizeof(unsigned int), lo, hi }

static const struct key keys[] = {
	STR(control_socket, K_PATH),
	STR(control_group, K_STR),
	STR(rendezvous, K_ADDR),
	STR(rendezvous_tls, K_ONOFF),
	STR(rendezvous_tls_cert, K_PATH),
	STR(rendezvous_tls_key, K_PATH),
	STR(rendezvous_data_map, K_PATH_OPT),
	NUM(rendezvous_max_conns, 16, 65536),
	NUM(rendezvous_max_per_source, 1, 65536),
	NUM(rendezvous_handshake_ms, 100, 60000),
	STR(metrics, K_ADDR_OFF),
	STR(state_file, K_PATH),
	STR(state, K_STATE),
	NUM(state_lease_s, 2, 600),
	STR(dp_admin, K_PATH),
	STR(dp_address, K_IP),
	STR(dp_name, K_NAME),
	NUM(dp_poll_ms, 10, 60000),
	NUM(dp_dead_polls, 1, 1000),
	NUM(join_timeout_s, 1, 86400),
	NUM(idle_timeout_s, 0, 365u * 86400),
	NUM(drain_timeout_ms, 0, 600000),
	NUM(max_jobs, 1, 4096),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void
tallyd_conf_defaults(struct tallyd_conf *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->control_socket, "/run/tally/tallyd.sock");
	strcpy(c->rendezvous, "0.0.0.0:7470");
	strcpy(c->rendezvous_tls, "on");
	strcpy(c->rendezvous_tls_cert, "/etc/tally/rendezvous.crt");
	strcpy(c->rendezvous_tls_key, "/etc/tally/rendezvous.key");
	c->rendezvous_max_conns = 4096;
	c->rendezvous_max_per_source = 64;
	c->rendezvous_handshake_ms = 3000;
	strcpy(c->metrics, "127.0.0.1:9470");
	strcpy(c->state_file, "/var/lib/tally/state.json");
	strcpy(c->state, "file");
	c->state_lease_s = 5;
	strcpy(c->dp_admin, "/run/tally/dp.sock");
	strcpy(c->dp_name, "dp0");
	c->dp_poll_ms = 500;
	c->dp_dead_polls = 3;
	c->join_timeout_s = 60;
	c->idle_timeout_s = 0;
	c->drain_timeout_ms = 2000;
	c->max_jobs = 64;
}

static int
bad(char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
bad(char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, wlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "IP:PORT" with a dotted-quad IPv4 address and a port 0..65535. */
static int
addr_ok(const char *v)
{
	char ip[INET_ADDRSTRLEN + 1], *end;
	const char *colon = strrchr(v, ':');
	struct in_addr a;
	unsigned long p;

	if (colon == NULL || (size_t)(colon - v) >= sizeof(ip) ||
			colon[1] == '\0' || colon[1] == '-' || colon[1] == '+')
		return 0;
	memcpy(ip, v, (size_t)(colon - v));
	ip[colon - v] = '\0';
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	return inet_pton(AF_INET, ip, &a) == 1 && errno == 0 &&
		*end == '\0' && p <= 65535;
}

/*
 * state: "file" (the state_file key's file), "file:PATH" (sets
 * state_file too) or "etcd://IP:PORT[,IP:PORT...]".
 */
static int
set_state(struct tallyd_conf *c, const char *v, char *why, size_t wlen)
{
	struct tallyd_etcd *e;
	char r[200];

	if (strlen(v) >= sizeof(c->state))
		return bad(why, wlen, "'state' is longer than %zu bytes",
			sizeof(c->state) - 1);
	if (strncmp(v, "file:", 5) == 0) {
		if (v[5] == '\0' || strlen(v + 5) >= sizeof(c->state_file))
			return bad(why, wlen, "'state = file:PATH' wants a "
				"path of at most %zu bytes",
				sizeof(c->state_file) - 1);
		strcpy(c->state_file, v + 5);
	} else if (tallyd_etcd_spec(v)) {
		e = tallyd_etcd_create(v, 1000, r, sizeof(r));
		if (e == NULL)
			return bad(why, wlen, "'state': %s", r);
		free(e);
	} else if (strcmp(v, "file") != 0) {
		return bad(why, wlen, "'state' must be file, file:PATH or "
			"etcd://IP:PORT[,IP:PORT...]");
	}
	strcpy(c->state, v);
	return 0;
}

static int
set_value(struct tallyd_conf *c, const struct key *k, const char *v,
	char *why, size_t wlen)
{
	char *dst = (char *)c + k->off;
	struct in_addr a;

	switch (k->kind) {
	case K_UINT: {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(v, &end, 10);
		if (*v == '\0' || *v == '-' || *v == '+' || *end != '\0' ||
				errno != 0 || n < k->lo || n > k->hi)
			return bad(why, wlen, "'%s' must be an integer in "
				"%lu..%lu", k->name, k->lo, k->hi);
		*(unsigned int *)(void *)dst = (unsigned int)n;
		return 0;
	}
	case K_ADDR:
		if (!addr_ok(v))
			return bad(why, wlen, "'%s' must be IPv4:PORT",
				k->name);
		break;
	case K_ADDR_OFF:
		if (strcmp(v, "off") != 0 && !addr_ok(v))
			return bad(why, wlen, "'%s' must be IPv4:PORT or off",
				k->name);
		break;
	case K_IP:
		if (*v != '\0' && inet_pton(AF_INET, v, &a) != 1)
			return bad(why, wlen, "'%s' must be an IPv4 address",
				k->name);
		break;
	case K_PATH:
		if (*v == '\0')
			return bad(why, wlen, "'%s' must be a path", k->name);
		break;
	case K_ONOFF:
		if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
			return bad(why, wlen, "'%s' must be on or off",
				k->name);
		break;
	case K_NAME:
		if (!tally_rdv_name_ok(v) || strlen(v) >= k->size)
			return bad(why, wlen, "'%s' must be 1-%zu of "
				"[A-Za-z0-9_.-]", k->name, k->size - 1);
		break;
	case K_STATE:
		return set_state(c, v, why, wlen);
	case K_PATH_OPT:
	case K_STR:
		break;
	}
	if (strlen(v) >= k->size)
		return bad(why, wlen, "'%s' is longer than %zu bytes", k->name,
			k->size - 1);
	strcpy(dst, v);
	return 0;
}

/*
 * "dataplane = NAME ADMIN_SOCKET [ADDRESS]": one more tally-dp, after
 * dp_admin's (docs/scale-out.md). v is the value, trimmed.
 */
static int
dataplane_line(struct tallyd_conf *c, const char *v, char *why, size_t wlen)
{
	struct tallyd_conf_dp *dp = &c->dataplanes[c->ndataplanes];
	char name[64] = "", admin[256] = "", addr[64] = "", extra[2] = "";
	struct in_addr a;
	int n;

	if (c->ndataplanes == TALLYD_MAX_DPS - 1)
		return bad(why, wlen, "at most %d 'dataplane' lines",
			TALLYD_MAX_DPS - 1);
	n = sscanf(v, "%63s %255s %63s %1s", name, admin, addr, extra);
	if (n < 2 || n > 3)
		return bad(why, wlen, "'dataplane' must be NAME ADMIN_SOCKET "
			"[ADDRESS]");
	if (!tally_rdv_name_ok(name) || strlen(name) > TALLYD_DP_NAME_MAX)
		return bad(why, wlen, "'dataplane' NAME must be 1-%d of "
			"[A-Za-z0-9_.-]", TALLYD_DP_NAME_MAX);
	if (strlen(admin) >= sizeof(dp->admin))
		return bad(why, wlen, "'dataplane' %s: ADMIN_SOCKET is longer "
			"than %zu bytes", name, sizeof(dp->admin) - 1);
	if (n == 3 && inet_pton(AF_INET, addr, &a) != 1)
		return bad(why, wlen, "'dataplane' %s: ADDRESS must be an "
			"IPv4 address", name);
	strcpy(dp->name, name);
	strcpy(dp->admin, admin);
	strcpy(dp->address, n == 3 ? addr : "");
	c->ndataplanes++;
	return 0;
}

int
tallyd_conf_line(struct tallyd_conf *c, const char *line, uint64_t *seen,
	char *why, size_t wlen)
{
	char buf[512], *p, *eq, *key, *val, *e;
	size_t i;

	if (strlen(line) >= sizeof(buf))
		return bad(why, wlen, "line longer than %zu bytes",
			sizeof(buf) - 1);
	strcpy(buf, line);
	if ((p = strchr(buf, '#')) != NULL)
		*p = '\0';
	for (key = buf; *key == ' ' || *key == '\t'; key++)
		;
	for (e = key + strlen(key); e > key && strchr(" \t\r\n", e[-1]); e--)
		;
	*e = '\0';
	if (*key == '\0')
		return 0;
	eq = strchr(key, '=');
	if (eq == NULL)
		return bad(why, wlen, "expected 'key = value'");
	for (val = eq + 1; *val == ' ' || *val == '\t'; val++)
		;
	for (e = eq; e > key && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	*e = '\0';
	if (strcmp(key, "dataplane") == 0)	/* may come again */
		return dataplane_line(c, val, why, wlen);
	for (i = 0; i < NKEYS; i++)
		if (strcmp(key, keys[i].name) == 0)
			break;
	if (i == NKEYS)
		return bad(why, wlen, "unknown key '%.64s'", key);
	if (*seen & (1ull << i))
		return bad(why, wlen, "'%s' given twice", key);
	*seen |= 1ull << i;
	return set_value(c, &keys[i], val, why, wlen);
}

int
tallyd_conf_load(struct tallyd_conf *c, const char *path, uint64_t *seen,
	char *why, size_t wlen)
{
	char line[1024], r[256];
	unsigned int n = 0;
	FILE *f = fopen(path, "r");
	struct stat st;
	int ret = 0;

	if (f == NULL) {
		int err = errno;

		snprintf(why, wlen, "%s: %s", path, strerror(err));
		return -err;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		snprintf(why, wlen, "%s: %s (-c wants a file)", path,
			strerror(EISDIR));
		return -EISDIR;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		n++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(why, wlen, "%s:%u: line too long", path, n);
			ret = -EINVAL;
			break;
		}
		if ((ret = tallyd_conf_line(c, line, seen, r, sizeof(r))) != 0) {
			snprintf(why, wlen, "%s:%u: %s", path, n, r);
			break;
		}
	}
	if (ret == 0 && ferror(f)) {
		ret = errno != 0 ? -errno : -EIO;
		snprintf(why, wlen, "%s: %s", path, strerror(-ret));
	}
	fclose(f);
	return ret;
}

int
tallyd_conf_check(const struct tallyd_conf *c, char *why, size_t wlen)
{
	if (c->control_group[0] != '\0' && getgrnam(c->control_group) == NULL)
		return bad(why, wlen, "control_group '%s': no such group",
			c->control_group);
	for (unsigned int i = 0; i < c->ndataplanes; i++) {
		if (strcmp(c->dataplanes[i].name, c->dp_name) == 0)
			return bad(why, wlen, "dataplane '%s' is dp_name's",
				c->dp_name);
		for (unsigned int k = 0; k < i; k++)
			if (strcmp(c->dataplanes[k].name,
					c->dataplanes[i].name) == 0)
				return bad(why, wlen, "dataplane '%s' is "
					"named twice", c->dataplanes[i].name);
	}
	return 0;
}

void
tallyd_conf_dump(const struct tallyd_conf *c, FILE *f)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const char *p = (const char *)c + keys[i].off;

		if (keys[i].kind == K_UINT)
			fprintf(f, "%s = %u\n", keys[i].name,
				*(const unsigned int *)(const void *)p);
		else
			fprintf(f, "%s = %s\n", keys[i].name, p);
	}
	for (unsigned int i = 0; i < c->ndataplanes; i++)
		fprintf(f, "dataplane = %s %s%s%s\n", c->dataplanes[i].name,
			c->dataplanes[i].admin,
			c->dataplanes[i].address[0] != '\0' ? " " : "",
			c->dataplanes[i].address);
}
