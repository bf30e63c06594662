/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd: the control-plane daemon. Reads its configuration, restores the
 * jobs of the state file, opens the control socket, the rendezvous port
 * and the metrics endpoint, and runs one poll loop over all of them plus
 * the timers (join barriers, tally-dp polls, drains, idle jobs) until
 * SIGINT or SIGTERM.
 *
 * Exit status: 0 after a signal, 1 when a socket or the state file cannot
 * be set up or the last save before exiting fails, 2 for bad arguments or
 * configuration.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <sodium.h>

#include "tally_config.h"
#include "tallyd.h"
#include "cluster.h"
#include "http.h"
#include "metrics.h"

#define DEFAULT_CONF	"/etc/tally/tallyd.conf"

static void
usage(FILE *f)
{
	fprintf(f,
"usage: tallyd [-c FILE] [--set KEY=VALUE]... [--check-config]\n"
"  -c, --config FILE    configuration file (default " DEFAULT_CONF ";\n"
"                       a missing default file means all defaults)\n"
"  -s, --set KEY=VALUE  override one configuration key (repeatable)\n"
"      --state SPEC     where the state lives: file[:PATH] (default) or\n"
"                       etcd://IP:PORT[,IP:PORT...] (--set state=SPEC)\n"
"      --check-config   print the resulting configuration and exit\n"
"  -V, --version        print the version and exit\n"
"  -h, --help           this text\n"
"Keys and the protocols are in docs/control.md; see also tallyd(8).\n");
}

/*
 * Idle jobs (no traffic, no joins for their idle timeout) go away; not
 * while the state file cannot be written, as their deletion could not
 * finish (tallyd_job_delete_finish()).
 */
static void
expire_idle(struct tallyd *d)
{
	int64_t now = tallyd_wall_s();
	struct tallyd_job *j, *next;

	if (d->sf.failing || !tallyd_state_leads(d))
		return;
	for (j = d->jobs; j != NULL; j = next) {
		next = j->next;
		if (j->idle_timeout_s == 0 || j->draining || j->njoined > 0 ||
				now - tallyd_tree_last_active(d, j) <
				(int64_t)j->idle_timeout_s)
			continue;
		tallyd_log("job '%s' idle for %u s: deleting", j->name,
			j->idle_timeout_s);
		if (j->tier == TALLYD_TIER_SPINE) {
			/* Its leaves too; they may be freed at once. */
			tallyd_tree_delete(d, j, NULL);
			break;
		}
		tallyd_job_delete_start(d, j, NULL);
	}
}

static char *
render_metrics(void *arg)
{
	struct tallyd *d = arg;
	json_t *st = tallyd_stats_json(d), *jobs = json_array();
	struct tallyd_job *j;
	char *text;

	for (j = d->jobs; j != NULL; j = j->next)
		json_array_append_new(jobs, tallyd_job_json(j, false));
	text = tallyd_metrics_render(st, jobs, d->dps[0].stats);
	json_decref(st);
	json_decref(jobs);
	return text;
}

/* "IP:PORT" a listening socket is bound to (port 0 asked: the real one). */
static void
bound_addr(int fd, char *out, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char ip[INET_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 ||
			sa.sin_family != AF_INET ||
			inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip)) == NULL)
		snprintf(out, len, "?");
	else
		snprintf(out, len, "%s:%u", ip, ntohs(sa.sin_port));
}

/*
 * The start line, with the addresses really listened on: a port 0 in
 * the configuration shows as the port the kernel picked.
 */
static void
log_start(const struct tallyd *d)
{
	char rdv[32], met[80];

	bound_addr(d->rdv_fd, rdv, sizeof(rdv));
	if (d->http != NULL)
		snprintf(met, sizeof(met), "%.*s:%u",
			(int)strcspn(d->conf.metrics, ":"), d->conf.metrics,
			tallyd_http_port(d->http));
	else
		snprintf(met, sizeof(met), "off");
	tallyd_log("%s: %u jobs restored from %s; control %s, rendezvous %s "
		"(TLS %s, at most %u connections), metrics %s, tally-dp %s",
		TALLY_VERSION, d->njobs, d->cl != NULL ? d->conf.state :
		d->conf.state_file,
		d->conf.control_socket, rdv, d->conf.rendezvous_tls,
		tallyd_rdv_cap(d), met, d->conf.dp_admin);
}

static int
sigfd_open(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	sigdelset(&set, SIGPIPE);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/*
 * The poll loop. Its pollfd array holds the four listeners and timers'
 * fds, the control clients (at most 64), every rendezvous connection (at
 * most its cap) and tally-dp's admin socket.
 */
static void
run(struct tallyd *d, int sfd)
{
	unsigned int max_poll = 4 + 64 + tallyd_rdv_cap(d) + d->ndps;
	struct pollfd *p = calloc(max_poll, sizeof(*p));
	int64_t next_poll = 0;

	if (p == NULL) {
		tallyd_log("poll array: %s", strerror(errno));
		return;
	}
	while (!d->stop) {
		unsigned int n = 0, nctl, nrdv, i, idp;
		int64_t now = tallyd_now_ms(), wait, dpw, save, cl;
		int timeout;

		cl = tallyd_cluster_tick(d, now);
		if (now >= next_poll) {
			tallyd_dpc_poll(d);
			tallyd_epoch_tick(d, now);
			tallyd_job_delete_step(d, now);
			expire_idle(d);
			next_poll = now + d->conf.dp_poll_ms;
		}
		wait = tallyd_rdv_timers(d, now);
		if (next_poll - now < wait)
			wait = next_poll - now;
		dpw = tallyd_dpc_timers(d, now);
		if (dpw < wait)
			wait = dpw;
		if (cl < wait)
			wait = cl;
		save = tallyd_state_flush(d, now);
		if (save >= 0 && save < wait)
			wait = save;

		p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = tallyd_ctl_listen_fd(d, now),
			.events = POLLIN };
		if (now < d->ctl_rest_until_ms &&
				d->ctl_rest_until_ms - now < wait)
			wait = d->ctl_rest_until_ms - now;
		p[n++] = (struct pollfd){ .fd = tallyd_rdv_listen_fd(d, now),
			.events = POLLIN };
		p[n++] = (struct pollfd){ .fd = d->http != NULL ?
			tallyd_http_fd(d->http) : -1, .events = POLLIN };
		if (d->http != NULL) {
			int t = tallyd_http_timeout_ms(d->http);

			if (t >= 0 && t < wait)
				wait = t;
		}
		nctl = tallyd_ctl_pollfds(d, p + n, max_poll - n);
		n += nctl;
		nrdv = tallyd_rdv_pollfds(d, p + n, max_poll - n - d->ndps);
		n += nrdv;
		idp = n;
		for (i = 0; i < d->ndps; i++)
			tallyd_dpc_pollfd(d, i, &p[n++]);
		timeout = wait < 0 ? 0 : (int)wait;
		if (poll(p, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			tallyd_log("poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				tallyd_log("signal %u: stopping", si.ssi_signo);
				d->stop = 1;
			}
		}
		if (p[1].revents & POLLIN)
			tallyd_ctl_accept(d);
		if (p[2].revents & POLLIN)
			tallyd_rdv_accept(d);
		if (d->http != NULL)
			tallyd_http_run(d->http);
		/* Events may free clients: look each up by fd again. */
		for (i = 4; i < 4 + nctl; i++)
			if (p[i].revents)
				tallyd_ctl_event(d, p[i].fd, p[i].revents);
		for (; i < 4 + nctl + nrdv; i++)
			if (p[i].revents)
				tallyd_rdv_event(d, p[i].fd, p[i].revents);
		for (i = 0; i < d->ndps; i++)
			if (p[idp + i].revents)
				tallyd_dpc_event(d, i, p[idp + i].revents);
	}
	free(p);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "set", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 'S' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tallyd d = { .ctl_fd = -1, .rdv_fd = -1 };
	const char *conf_path = NULL;
	char *sets[64];
	unsigned int nsets = 0;
	uint64_t seen = 0, seen_set = 0;
	int check = 0, opt, ret, sfd, status = 0;
	char why[512], state_set[sizeof(d.conf.state) + 8];

	while ((opt = getopt_long(argc, argv, "c:s:Vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_path = optarg;
			break;
		case 's':
			if (nsets == sizeof(sets) / sizeof(sets[0])) {
				fprintf(stderr, "tallyd: too many --set\n");
				return 2;
			}
			sets[nsets++] = optarg;
			break;
		case 'S':
			if (nsets == sizeof(sets) / sizeof(sets[0])) {
				fprintf(stderr, "tallyd: too many --set\n");
				return 2;
			}
			snprintf(state_set, sizeof(state_set), "state=%s",
				optarg);
			sets[nsets++] = state_set;
			break;
		case 'C':
			check = 1;
			break;
		case 'V':
			printf("tallyd %s\n", TALLY_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tallyd: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}

	tallyd_conf_defaults(&d.conf);
	if (conf_path != NULL || access(DEFAULT_CONF, F_OK) == 0) {
		ret = tallyd_conf_load(&d.conf, conf_path != NULL ? conf_path :
			DEFAULT_CONF, &seen, why, sizeof(why));
		if (ret != 0) {
			fprintf(stderr, "tallyd: %s\n", why);
			return 2;
		}
	}
	for (unsigned int i = 0; i < nsets; i++) {
		if (strchr(sets[i], '=') == NULL) {
			fprintf(stderr, "tallyd: --set wants KEY=VALUE, not "
				"'%s'\n", sets[i]);
			return 2;
		}
		if (tallyd_conf_line(&d.conf, sets[i], &seen_set, why,
				sizeof(why)) != 0) {
			fprintf(stderr, "tallyd: --set %s: %s\n", sets[i], why);
			return 2;
		}
	}
	if (tallyd_conf_check(&d.conf, why, sizeof(why)) != 0) {
		fprintf(stderr, "tallyd: %s\n", why);
		return 2;
	}
	if (check) {
		tallyd_conf_dump(&d.conf, stdout);
		return 0;
	}

	if (sodium_init() < 0) {
		fprintf(stderr, "tallyd: libsodium failed to initialise\n");
		return 1;
	}
	d.started = tallyd_wall_s();
	if (tallyd_cluster_open(&d, why, sizeof(why)) != 0) {
		fprintf(stderr, "tallyd: %s\n", why);
		return 2;
	}
	/* The dataplanes first: a job's shards name them (dps.c). */
	if (tallyd_dps_open(&d, why, sizeof(why)) != 0 ||
			tallyd_state_load(&d, why, sizeof(why)) != 0) {
		fprintf(stderr, "tallyd: %s\n", why);
		status = 1;
		goto out;
	}
	sfd = sigfd_open();
	if (sfd < 0) {
		fprintf(stderr, "tallyd: %s\n", strerror(errno));
		status = 1;
		goto out;
	}
	if ((ret = tallyd_ctl_listen(&d)) != 0) {
		fprintf(stderr, "tallyd: control socket %s: %s\n",
			d.conf.control_socket, strerror(-ret));
		status = 1;
		goto out_sfd;
	}
	if ((ret = tallyd_rdv_listen(&d, why, sizeof(why))) != 0) {
		fprintf(stderr, "tallyd: rendezvous %s: %s\n",
			d.conf.rendezvous, why);
		status = 1;
		goto out_rdv;
	}
	if (strcmp(d.conf.metrics, "off") != 0) {
		d.http = tallyd_http_start(d.conf.metrics, render_metrics, &d);
		if (d.http == NULL) {
			fprintf(stderr, "tallyd: metrics %s: %s\n",
				d.conf.metrics, strerror(errno));
			status = 1;
			goto out_rdv;
		}
	}
	/* etcd: the jobs read (and a campaign) before the start line. */
	tallyd_cluster_tick(&d, tallyd_now_ms());
	log_start(&d);
	run(&d, sfd);
	/* An etcd follower saved its memberships as it formed them. */
	if (tallyd_state_leads(&d) && tallyd_state_save(&d) != 0) {
		fprintf(stderr, "tallyd: stopping: %s; the file keeps what the "
			"last good save wrote\n", d.sf.error);
		status = 1;
	}
	tallyd_http_stop(d.http);
out_rdv:
	tallyd_rdv_close_all(&d);
	tallyd_ctl_close_all(&d);
out_sfd:
	close(sfd);
out:
	tallyd_cluster_close(&d);
	while (d.jobs != NULL)
		tallyd_job_free(&d, d.jobs);
	tallyd_dps_close(&d);
	return status;
}
