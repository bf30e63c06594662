/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a worker lcore does when its polls come back empty (--idle-us,
 * --idle-wait; docs/tools/tally-dp.md, "Idle"):
 *
 * - --idle-us 0: nothing, it polls again (a dedicated core).
 * - otherwise, after a run of empty polls (a gap between bursts costs
 *   pauses only), it waits:
 *   - on the port's socket, when the lcore is the only one and polls the
 *     port's only receive queue, and the driver has a socket tally-dp
 *     can find (net_af_xdp's XDP socket, net_af_packet's packet socket):
 *     ppoll() until a frame is in the socket's ring, so an idle tally-dp
 *     costs nothing and wakes as the first frame arrives, not up to a
 *     sleep later. DPDK 22.11 offers no receive interrupts for these
 *     drivers, so the socket is found among the process's descriptors;
 *   - else (several lcores: a frame may come through another's ring; a
 *     driver without a socket; --idle-wait sleep) it sleeps idle_us.
 *
 * While it waits the lcore is offline for RCU, so that a job's removal
 * does not wait for it.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <rte_pause.h>

#include "dp.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

/* Empty polls before the lcore waits: a gap shorter than this costs
 * pauses (and the driver's empty receive), no wake-up. */
#define IDLE_SPIN	256
/* The longest one wait on the port's socket lasts: how soon a stopping
 * tally-dp notices (dp->stop). */
#define IDLE_WAIT_NS	(100 * 1000 * 1000L)

/* Whether fd is a socket of a family a DPDK driver receives through. */
static int
is_port_socket(int fd)
{
	struct stat st;
	int dom;
	socklen_t len = sizeof(dom);

	if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) != 0)
		return 0;
	return dom == AF_XDP || dom == AF_PACKET;
}

/*
 * The one XDP or packet socket among the process's descriptors: its
 * number, -ENOENT when there is none, -EEXIST when there are several
 * (which would be whose?). Called once the port has started.
 */
static int
find_port_socket(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -ENOENT, self;

	if (d == NULL)
		return -errno;
	self = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);

		if (*end != '\0' || end == e->d_name || fd == self ||
				!is_port_socket((int)fd))
			continue;
		if (found >= 0) {
			found = -EEXIST;
			break;
		}
		found = (int)fd;
	}
	closedir(d);
	return found;
}

/*
 * Chooses every lcore's way of waiting (lc->idle_fd, -1: sleep) once the
 * port and queues are set up; want_socket is --idle-wait's choice.
 * Returns the socket the lcore waits on, or -errno why none.
 */
int
tally_dp_idle_init(struct tally_dp *dp, int want_socket)
{
	int fd = -ENOTSUP;

	for (uint16_t i = 0; i < dp->nworkers; i++)
		dp->lcores[i].idle_fd = -1;
	if (dp->idle_us == 0 || !want_socket)
		return -ENOTSUP;
	if (dp->nworkers != 1 || dp->nb_rxq != 1)
		return -EXDEV;
	fd = find_port_socket();
	if (fd >= 0)
		dp->lcores[0].idle_fd = fd;
	return fd;
}

/* Waits until a frame is in the port's socket, or IDLE_WAIT_NS. */
static void
wait_socket(struct tally_dp *dp, struct tally_dp_lcore *lc)
{
	struct pollfd pfd = { .fd = lc->idle_fd, .events = POLLIN };
	struct timespec ts = { 0, IDLE_WAIT_NS };

	rte_rcu_qsbr_thread_offline(dp->qsbr, lc->index);
	(void)ppoll(&pfd, 1, &ts, NULL);
	rte_rcu_qsbr_thread_online(dp->qsbr, lc->index);
}

/*
 * After an empty poll: pause for the first IDLE_SPIN in a row, then wait
 * (above). *idle counts the empty polls; the caller zeroes it when a
 * poll takes frames.
 */
void
tally_dp_idle(struct tally_dp *dp, struct tally_dp_lcore *lc,
	unsigned int *idle)
{
	struct timespec ts;

	if (dp->idle_us == 0)
		return;
	if (*idle < IDLE_SPIN) {
		++*idle;
		rte_pause();
		return;
	}
	lc->st.idle_sleeps++;
	if (lc->idle_fd >= 0) {
		wait_socket(dp, lc);
		return;
	}
	ts.tv_sec = 0;
	ts.tv_nsec = (long)dp->idle_us * 1000;
	nanosleep(&ts, NULL);
}
