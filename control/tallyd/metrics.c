/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prometheus text format 0.0.4 from tallyd's stats, its jobs and tally-dp's
 * counters (docs/metrics.md lists the families).
 *
 * The text grows in one malloc'd buffer; the first allocation failure
 * sticks, later writes do nothing and render returns NULL. A family's HELP
 * and TYPE go out right before its first sample and all its samples follow
 * together, so a family without samples does not appear at all. A set of
 * family names already written keeps two JSON keys that sanitize to the
 * same name from writing one family twice; the second one is left out.
 * Numbers are printed with the C locale's '.' (tallyd never sets LC_NUMERIC).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_config.h"
#include "metrics.h"

struct render {
	char *buf;		/* owned; handed to the caller at the end */
	size_t len;
	size_t cap;
	int err;		/* first failure (-ENOMEM), or 0 */
	json_t *families;	/* owned: names of the families written */
	unsigned int nlabels;	/* labels of the sample being written */
	const char *value;	/* borrowed: the sample's value text */
	char num[64];		/* value text of a JSON number */
};

/* A family about to be written: its header goes out with its first sample. */
struct family {
	const char *name;
	const char *type;	/* "counter" or "gauge" */
	const char *help;
	int state;		/* 0: none out, 1: header out, -1: left out */
};

/* A family nothing was written of yet. */
#define FAMILY(n, t, h) \
	((struct family){ .name = (n), .type = (t), .help = (h) })

static int
grow(struct render *r, size_t more)
{
	size_t cap = r->cap != 0 ? r->cap : 8192;
	char *p;

	if (r->err != 0)
		return r->err;
	if (r->len + more < r->cap)
		return 0;
	while (cap <= r->len + more)
		cap *= 2;
	p = realloc(r->buf, cap);
	if (p == NULL) {
		r->err = -ENOMEM;
		return r->err;
	}
	r->buf = p;
	r->cap = cap;
	return 0;
}

/* Appends n bytes of s, keeping the text NUL-terminated. */
static void
put(struct render *r, const char *s, size_t n)
{
	if (grow(r, n) != 0)
		return;
	memcpy(r->buf + r->len, s, n);
	r->len += n;
	r->buf[r->len] = '\0';
}

static void
puts_(struct render *r, const char *s)
{
	put(r, s, strlen(s));
}

/*
 * Appends s escaped for a label value (backslash, double quote, newline)
 * or, with help set, for a HELP text (backslash, newline).
 */
static void
put_escaped(struct render *r, const char *s, bool help)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			put(r, "\\\\", 2);
		else if (*s == '\n')
			put(r, "\\n", 2);
		else if (*s == '"' && !help)
			put(r, "\\\"", 2);
		else
			put(r, s, 1);
	}
}

/*
 * Sanitizes a JSON key into out as [a-zA-Z0-9_] (anything else becomes
 * '_'). Returns false for an empty key or one too long for out.
 */
static bool
sanitize(const char *key, char *out, size_t size)
{
	size_t i;

	for (i = 0; key[i] != '\0'; i++) {
		char c = key[i];

		if (i + 1 >= size)
			return false;
		out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') ? c : '_';
	}
	out[i] = '\0';
	return i > 0;
}

/*
 * Formats a JSON number (a boolean as 1 or 0) into r->num. Returns NULL
 * for anything else, and for a negative counter: a counter never goes
 * down, so such a value is left out rather than exposed.
 */
static const char *
num(struct render *r, const json_t *v, bool counter)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if (counter && i < 0)
			return NULL;
		snprintf(r->num, sizeof(r->num), "%" JSON_INTEGER_FORMAT, i);
	} else if (json_is_real(v)) {
		double d = json_real_value(v);

		if (isnan(d))
			snprintf(r->num, sizeof(r->num), "NaN");
		else if (counter && d < 0)
			return NULL;
		else if (isinf(d))
			snprintf(r->num, sizeof(r->num), "%s",
				d > 0 ? "+Inf" : "-Inf");
		else
			snprintf(r->num, sizeof(r->num), "%.17g", d);
	} else if (json_is_boolean(v) && !counter) {
		snprintf(r->num, sizeof(r->num), "%d", json_is_true(v) ? 1 : 0);
	} else {
		return NULL;
	}
	return r->num;
}

/* Writes f's HELP and TYPE unless they are out already; false: leave f out. */
static bool
family_open(struct render *r, struct family *f)
{
	if (f->state == 0) {
		if (json_object_get(r->families, f->name) != NULL) {
			f->state = -1;	/* another key took the name */
		} else if (json_object_set_new(r->families, f->name,
				json_true()) != 0) {
			r->err = -ENOMEM;
			f->state = -1;
		} else {
			puts_(r, "# HELP ");
			puts_(r, f->name);
			put(r, " ", 1);
			put_escaped(r, f->help, true);
			puts_(r, "\n# TYPE ");
			puts_(r, f->name);
			put(r, " ", 1);
			puts_(r, f->type);
			put(r, "\n", 1);
			f->state = 1;
		}
	}
	return f->state == 1 && r->err == 0;
}

/*
 * Starts a sample of f whose value is the text value (borrowed until
 * sample_end; NULL: no sample). Returns false when there is no sample to
 * write; true: add labels, then call sample_end().
 */
static bool
sample_begin(struct render *r, struct family *f, const char *value)
{
	if (value == NULL || !family_open(r, f))
		return false;
	puts_(r, f->name);
	r->nlabels = 0;
	r->value = value;
	return true;
}

/* As sample_begin() with a JSON number as the value. */
static bool
sample_json(struct render *r, struct family *f, const json_t *v)
{
	return sample_begin(r, f, num(r, v, strcmp(f->type, "counter") == 0));
}

static void
label(struct render *r, const char *key, const char *value)
{
	put(r, r->nlabels++ == 0 ? "{" : ",", 1);
	puts_(r, key);
	puts_(r, "=\"");
	put_escaped(r, value, false);
	put(r, "\"", 1);
}

static void
label_int(struct render *r, const char *key, json_int_t value)
{
	char s[32];

	snprintf(s, sizeof(s), "%" JSON_INTEGER_FORMAT, value);
	label(r, key, s);
}

static void
sample_end(struct render *r)
{
	if (r->nlabels > 0)
		put(r, "}", 1);
	put(r, " ", 1);
	puts_(r, r->value);
	put(r, "\n", 1);
}

/* One unlabelled sample of f from obj's key, if it holds a number. */
static void
scalar(struct render *r, const json_t *obj, const char *key, struct family f)
{
	if (sample_json(r, &f, json_object_get(obj, key)))
		sample_end(r);
}

/*
 * Iterating a borrowed object needs a non-const pointer; iteration does
 * not change it.
 */
static json_t *
unconst(const json_t *v)
{
	return (json_t *)(uintptr_t)v;
}

/* The rendezvous' connections, from the "rdv_*" keys of tallyd's stats. */
static void
render_rdv(struct render *r, const json_t *t)
{
	static const char *const evicted[] = { "per_source", "full", "fds" };
	struct family f;
	char key[64];

	scalar(r, t, "rdv_connections", FAMILY("tallyd_rdv_connections",
		"gauge", "Rendezvous connections open."));
	scalar(r, t, "rdv_max_connections", FAMILY(
		"tallyd_rdv_max_connections", "gauge",
		"The most rendezvous connections tallyd holds at once."));
	scalar(r, t, "rdv_refused", FAMILY("tallyd_rdv_refused_total",
		"counter", "Rendezvous connections closed at once: every "
		"connection held was a job's rank."));
	f = FAMILY("tallyd_rdv_evicted_total", "counter",
		"Rendezvous connections closed before they joined a job, to "
		"make room, by reason.");
	for (size_t i = 0; i < sizeof(evicted) / sizeof(evicted[0]); i++) {
		snprintf(key, sizeof(key), "rdv_evicted_%s", evicted[i]);
		if (sample_json(r, &f, json_object_get(t, key))) {
			label(r, "reason", evicted[i]);
			sample_end(r);
		}
	}
	scalar(r, t, "rdv_fd_backoffs", FAMILY(
		"tallyd_rdv_fd_backoffs_total", "counter",
		"Times the rendezvous stopped accepting for a while: no file "
		"descriptor left and none to free."));
	scalar(r, t, "rdv_handshake_timeouts", FAMILY(
		"tallyd_rdv_handshake_timeouts_total", "counter",
		"Rendezvous connections closed for no TLS handshake or join "
		"within rendezvous_handshake_ms."));
	scalar(r, t, "rdv_tls_failures", FAMILY(
		"tallyd_rdv_tls_failures_total", "counter",
		"Failed TLS handshakes on the rendezvous, and joins sent "
		"without TLS."));
}

/* tallyd's own families, from the stats reply's "tallyd" object. */
static void
render_tallyd(struct render *r, const json_t *t, const json_t *jobs,
	bool dp_up)
{
	struct family f;
	const char *key;
	json_t *v;

	f = FAMILY("tallyd_up", "gauge",
		"1 while tallyd answers this endpoint.");
	if (sample_begin(r, &f, "1"))
		sample_end(r);
	f = FAMILY("tallyd_build_info", "gauge",
		"tallyd's version, as a label; the value is 1.");
	if (sample_begin(r, &f, "1")) {
		label(r, "version", TALLY_VERSION);
		sample_end(r);
	}
	scalar(r, t, "uptime_s", FAMILY("tallyd_uptime_seconds",
		"gauge", "Seconds since tallyd started."));
	f = FAMILY("tallyd_jobs", "gauge",
		"Jobs tallyd holds, in any state.");
	v = json_object_get(t, "jobs");
	if (v == NULL && json_is_array(jobs)) {
		/* No count from tallyd: the jobs given are all of them. */
		snprintf(r->num, sizeof(r->num), "%zu", json_array_size(jobs));
		if (sample_begin(r, &f, r->num))
			sample_end(r);
	} else if (sample_json(r, &f, v)) {
		sample_end(r);
	}
	scalar(r, t, "joins", FAMILY("tallyd_joins_total",
		"counter", "Ranks admitted into a complete membership."));
	f = FAMILY("tallyd_join_failures_total", "counter",
		"Rendezvous joins refused or abandoned, by reason.");
	json_object_foreach(unconst(json_object_get(t, "join_failures")),
			key, v) {
		if (key[0] != '\0' && sample_json(r, &f, v)) {
			label(r, "reason", key);
			sample_end(r);
		}
	}
	scalar(r, t, "memberships", FAMILY(
		"tallyd_memberships_total", "counter",
		"Memberships formed: join barriers every rank passed."));
	scalar(r, t, "ring_memberships", FAMILY(
		"tallyd_ring_memberships_total", "counter",
		"Memberships formed on the ring fallback (no live dataplane)."));
	scalar(r, t, "ctl_requests", FAMILY(
		"tallyd_ctl_requests_total", "counter",
		"Requests on the control socket."));
	scalar(r, t, "ctl_errors", FAMILY(
		"tallyd_ctl_errors_total", "counter",
		"Control socket requests answered with a non-zero errno."));
	f = FAMILY("tallyd_dp_up", "gauge",
		"1 while tally-dp's admin socket answers, else 0.");
	if (sample_begin(r, &f, dp_up ? "1" : "0"))
		sample_end(r);
	scalar(r, t, "dp_reprograms", FAMILY(
		"tallyd_dp_reprograms_total", "counter",
		"Memberships programmed again after tally-dp lost them."));
	scalar(r, t, "dp_errors", FAMILY(
		"tallyd_dp_errors_total", "counter",
		"Requests to tally-dp's admin socket that failed."));
	scalar(r, t, "dp_timeouts", FAMILY(
		"tallyd_dp_timeouts_total", "counter",
		"Requests to tally-dp unanswered by their deadline."));
	scalar(r, t, "dp_mismatches", FAMILY(
		"tallyd_dp_mismatches_total", "counter",
		"Jobs programmed again: tally-dp held another configuration."));
	scalar(r, t, "dp_stale_removed", FAMILY(
		"tallyd_dp_stale_removed_total", "counter",
		"Jobs removed from tally-dp that tallyd does not own."));
	scalar(r, t, "epochs_ended", FAMILY(
		"tallyd_epochs_ended_total", "counter",
		"Job epochs ended by a dead dataplane (the job moved)."));
	scalar(r, t, "rejoins", FAMILY(
		"tallyd_rejoins_total", "counter",
		"Ranks that rejoined a job in a new epoch."));
	render_rdv(r, t);
	scalar(r, t, "ctl_send_failures", FAMILY(
		"tallyd_ctl_send_failures_total", "counter",
		"Control socket replies that could not be sent."));
	scalar(r, t, "ctl_fd_backoffs", FAMILY(
		"tallyd_ctl_fd_backoffs_total", "counter",
		"Times the control socket stopped accepting for a while: no "
		"file descriptor left."));
	scalar(r, t, "state_saves", FAMILY(
		"tallyd_state_saves_total", "counter",
		"Writes of the state file that reached the disk."));
	scalar(r, t, "state_save_failures", FAMILY(
		"tallyd_state_save_failures_total", "counter",
		"Writes of the state file that failed."));
	scalar(r, t, "state_unsaved", FAMILY(
		"tallyd_state_unsaved", "gauge",
		"1 while tallyd holds changes the state file lacks, else 0."));
	scalar(r, t, "state_leader", FAMILY("tallyd_state_leader", "gauge",
		"State in etcd: 1 while this tallyd is the leader, else 0."));
	scalar(r, t, "etcd_up", FAMILY("tallyd_etcd_up", "gauge",
		"State in etcd: 1 while etcd answered the last exchange."));
	scalar(r, t, "etcd_requests", FAMILY("tallyd_etcd_requests_total",
		"counter", "Exchanges with etcd's JSON gateway."));
	scalar(r, t, "etcd_failures", FAMILY("tallyd_etcd_failures_total",
		"counter", "Exchanges with etcd that got no usable reply."));
	scalar(r, t, "etcd_timeouts", FAMILY("tallyd_etcd_timeouts_total",
		"counter", "Exchanges with etcd past their deadline."));
	scalar(r, t, "state_fenced", FAMILY("tallyd_state_fenced_total",
		"counter", "Writes to etcd refused by the leader fence."));
	scalar(r, t, "leader_changes", FAMILY("tallyd_leader_changes_total",
		"counter", "Times this tallyd became or stopped being the "
		"leader."));
}

/* A job counter's key and the family it becomes. */
struct job_counter {
	const char *key;
	const char *name;
	const char *help;
};

static const struct job_counter job_counters[] = {
	{ "contributions", "tally_job_contributions_total",
		"Contributions counted into a slot of the job." },
	{ "elements", "tally_job_elements_total",
		"Elements of those contributions." },
	{ "bytes_in", "tally_job_received_bytes_total",
		"UDP payload bytes of those contributions, tally header "
		"included." },
	{ "rounds", "tally_job_rounds_total",
		"Rounds completed: every rank contributed to a slot." },
	{ "results", "tally_job_results_total",
		"Result frames sent to the job's members, resent ones "
		"included." },
	{ "bytes_out", "tally_job_sent_bytes_total",
		"UDP payload bytes of those results." },
	{ "resent", "tally_job_resent_total",
		"Retransmissions answered from a stored result." },
	{ "nacks", "tally_job_nacks_total",
		"Packets of members refused with a NACK." },
	{ "drops", "tally_job_drops_total",
		"Packets naming the job refused without an answer: bad "
		"token, rank or source." },
	{ "duplicates", "tally_job_duplicates_total",
		"Retransmissions to a round still open, dropped: the "
		"member was already counted (needless)." },
};

#define NJOB_COUNTERS (sizeof(job_counters) / sizeof(job_counters[0]))

/* One family, a sample per job: its key, or with ckey set its counter. */
static void
job_family(struct render *r, const json_t *const *jobs, size_t n,
	const char *key, const char *ckey, struct family f)
{
	for (size_t i = 0; i < n; i++) {
		const json_t *o = ckey != NULL ?
			json_object_get(json_object_get(jobs[i], "counters"),
				ckey) : json_object_get(jobs[i], key);

		if (sample_json(r, &f, o)) {
			label(r, "tally_job", json_string_value(
				json_object_get(jobs[i], "name")));
			sample_end(r);
		}
	}
}

/* Whether key is in job_counters, or would take one's family name. */
static bool
known_job_counter(const char *key, const char *name)
{
	for (size_t k = 0; k < NJOB_COUNTERS; k++)
		if (strcmp(job_counters[k].key, key) == 0 ||
				(name != NULL &&
				strcmp(job_counters[k].name, name) == 0))
			return true;
	return false;
}

/* The job families, for jobs[0..n) (named, names distinct). */
static void
render_job_families(struct render *r, const json_t *const *jobs, size_t n)
{
	struct family info = FAMILY("tally_job_info", "gauge",
		"A job, with its dataplane id and state as labels; the value "
		"is 1.");
	json_t *extra = json_object();	/* owned: other counters' keys */
	char san[128], name[160], help[200];
	const char *key;
	json_t *v;

	for (size_t i = 0; i < n; i++) {
		const json_t *id = json_object_get(jobs[i], "id");
		const char *state = json_string_value(
			json_object_get(jobs[i], "state"));

		if (!sample_begin(r, &info, "1"))
			continue;
		label(r, "tally_job", json_string_value(
			json_object_get(jobs[i], "name")));
		if (json_is_integer(id))
			label_int(r, "id", json_integer_value(id));
		if (state != NULL)
			label(r, "state", state);
		sample_end(r);
	}
	job_family(r, jobs, n, "world", NULL, FAMILY(
		"tally_job_world", "gauge", "The job's world size (ranks)."));
	job_family(r, jobs, n, "joined", NULL, FAMILY(
		"tally_job_joined", "gauge",
		"Ranks in the forming membership; the world size when ready."));
	job_family(r, jobs, n, "epoch", NULL, FAMILY(
		"tally_job_epoch", "gauge",
		"The job's membership epoch: grows with each membership "
		"formed."));
	for (size_t k = 0; k < NJOB_COUNTERS; k++)
		job_family(r, jobs, n, NULL, job_counters[k].key,
			FAMILY(job_counters[k].name, "counter",
				job_counters[k].help));

	/* Counters this tallyd has no name for: rendered as they come. */
	if (extra == NULL) {
		r->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++)
		json_object_foreach(unconst(json_object_get(jobs[i],
				"counters")), key, v)
			if (!known_job_counter(key, NULL) &&
					json_object_set_new(extra, key,
					json_true()) != 0)
				r->err = -ENOMEM;
	json_object_foreach(extra, key, v) {
		if (!sanitize(key, san, sizeof(san)))
			continue;
		snprintf(name, sizeof(name), "tally_job_%s_total", san);
		if (known_job_counter(key, name))
			continue;
		snprintf(help, sizeof(help), "tally-dp's job counter %s.", san);
		job_family(r, jobs, n, NULL, key,
			FAMILY(name, "counter", help));
	}
	json_decref(extra);
}

/* Picks the jobs that have a name, the first of each name, and renders. */
static void
render_jobs(struct render *r, const json_t *jobs)
{
	size_t n = json_array_size(jobs), k = 0;
	const json_t **ok = calloc(n != 0 ? n : 1, sizeof(*ok)); /* owned */
	json_t *names = json_object();	/* owned: names taken */

	if (ok == NULL || names == NULL) {
		r->err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *j = json_array_get(jobs, i);
		const char *name = json_string_value(json_object_get(j,
			"name"));

		if (name == NULL || name[0] == '\0' ||
				json_object_get(names, name) != NULL)
			continue;
		if (json_object_set_new(names, name, json_true()) != 0) {
			r->err = -ENOMEM;
			goto out;
		}
		ok[k++] = j;
	}
	render_job_families(r, ok, k);
out:
	json_decref(names);
	free(ok);
}

/* What tally-dp's counters mean; a key missing here gets a generic help. */
static const struct {
	const char *key;
	const char *help;
} dp_help[] = {
	{ "rx", "Frames received from the port." },
	{ "tx", "Frames handed to the port." },
	{ "tx_dropped", "Frames the port did not take." },
	{ "results", "Result packets built (one per member)." },
	{ "arp_replies", "ARP replies sent." },
	{ "icmp_replies", "ICMP echo replies sent." },
	{ "dispatched", "Tally frames passed to the lcore that owns them." },
	{ "ring_full", "Tally frames dropped: the owner lcore's ring was "
		"full." },
	{ "no_neigh", "Results for a member whose MAC address is unknown." },
	{ "no_mbuf", "Results not built: the mbuf pool was empty." },
	{ "misrouted", "Tally packets sent to the UDP port of an lcore that "
		"does not own their slot." },
	{ "idle_sleeps", "Times the lcore slept for lack of traffic." },
	{ "agg_rx", "Tally packets the aggregation engine received." },
	{ "contributions", "Contributions counted into a slot." },
	{ "elements", "Elements of those contributions." },
	{ "completed", "Rounds completed: results to send." },
	{ "retransmissions_served", "Retransmissions answered from a stored "
		"result." },
	{ "duplicates", "Retransmissions to a round still open: dropped." },
	{ "nacks", "Refusals answered with a NACK." },
	{ "gap_nacks", "NACKs gap: a member's later frame arrived before "
		"earlier ones, which were lost on the way in." },
	{ "gap_lost", "The frames those NACKs named." },
	{ "tier_forwarded", "A leaf's rounds sent to its spine." },
	{ "tier_reforwarded", "A leaf's rounds sent to its spine again: a "
		"member retransmitted." },
	{ "tier_results", "The spine's results a leaf took." },
	{ "tier_refused", "Packets from upstream refused." },
	{ "tier_duplicates", "The spine's results again for a round a leaf "
		"had completed: dropped." },
	{ "upstream", "Frames sent upstream to a spine." },
	{ "upstream_bcast", "Frames sent upstream to the Ethernet broadcast "
		"address: the spine's MAC was not learned yet." },
};

static const char *
dp_help_of(const char *key, char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof(dp_help) / sizeof(dp_help[0]); i++)
		if (strcmp(dp_help[i].key, key) == 0)
			return dp_help[i].help;
	snprintf(buf, size, "tally-dp's counter %s.", key);
	return buf;
}

/* The drops family: every drop_<reason> key of every lcore. */
static void
render_dp_drops(struct render *r, const json_t *const *lc, size_t n)
{
	struct family f = FAMILY("tally_dp_drops_total", "counter",
		"Packets tally-dp dropped, by reason: engine refusals "
		"(bad_token, ...) and frame checks (net_*).");
	const char *key;
	json_t *v;

	for (size_t i = 0; i < n; i++) {
		json_int_t id = json_integer_value(json_object_get(lc[i],
			"lcore"));

		json_object_foreach(unconst(lc[i]), key, v) {
			if (strncmp(key, "drop_", 5) != 0 || key[5] == '\0' ||
					!sample_json(r, &f, v))
				continue;
			label_int(r, "lcore", id);
			label(r, "reason", key + 5);
			sample_end(r);
		}
	}
}

/* tally-dp's per-lcore families, for lc[0..n) (distinct lcore ids). */
static void
render_dp_lcores(struct render *r, const json_t *const *lc, size_t n)
{
	json_t *keys = json_object();	/* owned: counter keys, in order */
	char san[128], name[160], help[200];
	const char *key;
	json_t *v;

	if (keys == NULL) {
		r->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++)
		json_object_foreach(unconst(lc[i]), key, v)
			if (strcmp(key, "lcore") != 0 &&
					strncmp(key, "drop_", 5) != 0 &&
					json_object_set_new(keys, key,
					json_true()) != 0)
				r->err = -ENOMEM;
	json_object_foreach(keys, key, v) {
		struct family f;

		/* "drops" would collide with the drops family's name. */
		if (!sanitize(key, san, sizeof(san)) ||
				strcmp(san, "drops") == 0)
			continue;
		snprintf(name, sizeof(name), "tally_dp_%s_total", san);
		f = FAMILY(name, "counter",
			dp_help_of(san, help, sizeof(help)));
		for (size_t i = 0; i < n; i++) {
			if (!sample_json(r, &f, json_object_get(lc[i], key)))
				continue;
			label_int(r, "lcore", json_integer_value(
				json_object_get(lc[i], "lcore")));
			sample_end(r);
		}
	}
	json_decref(keys);
	render_dp_drops(r, lc, n);
}

/* Picks the lcore objects with an integer id, the first of each id. */
static void
render_dp(struct render *r, const json_t *dp)
{
	const json_t *lcores = json_object_get(dp, "lcores");
	size_t n = json_array_size(lcores), k = 0;
	const json_t **ok = calloc(n != 0 ? n : 1, sizeof(*ok)); /* owned */

	if (ok == NULL) {
		r->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *o = json_array_get(lcores, i);
		const json_t *id = json_object_get(o, "lcore");
		size_t j;

		if (!json_is_integer(id))
			continue;
		for (j = 0; j < k; j++)
			if (json_integer_value(json_object_get(ok[j],
					"lcore")) == json_integer_value(id))
				break;
		if (j == k)
			ok[k++] = o;
	}
	render_dp_lcores(r, ok, k);
	free(ok);
}

char *
tallyd_metrics_render(const json_t *tallyd, const json_t *jobs,
	const json_t *dp)
{
	struct render r = { .families = json_object() };
	const json_t *up = json_object_get(tallyd, "dp_up");
	/* Both must agree: tallyd says so and its counters are here. */
	bool dp_up = json_is_object(dp) && !json_is_false(up);

	if (r.families == NULL || grow(&r, 1) != 0) {
		json_decref(r.families);
		errno = ENOMEM;
		return NULL;
	}
	r.buf[0] = '\0';
	render_tallyd(&r, tallyd, jobs, dp_up);
	render_jobs(&r, jobs);
	if (dp_up)
		render_dp(&r, dp);
	json_decref(r.families);
	if (r.err != 0) {
		free(r.buf);
		errno = -r.err;
		return NULL;
	}
	return r.buf;
}
