/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The point-to-point net's objects, shared by sock.c (connections) and
 * sock_io.c (transfers).
 */
#ifndef TALLY_NCCL_SOCK_H
#define TALLY_NCCL_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

#define HANDLE_MAGIC	"tallyP2P"
#define HDR_LEN		8

/* What a listener publishes; the connector's copy also keeps its stage. */
struct sock_handle {
	char magic[8];
	uint32_t addr;		/* network order */
	uint16_t port;		/* network order */
	uint16_t stage;		/* connector: 0 none, 1 connecting */
	int fd;			/* connector: the socket while connecting */
};

struct sock_comm;

struct sock_req {
	struct sock_comm *c;
	void *data;
	size_t size;		/* send: the length; recv: the capacity */
	size_t len;		/* recv: the header's length */
	size_t off;		/* bytes of header and data moved */
	uint8_t hdr[HDR_LEN];
	int tag;
	int done;
	int busy;		/* posted and not yet reported done */
};

struct sock_comm {
	int fd;
	int is_send;
	int err;		/* first error, as -errno; then sticky */
	unsigned int head;	/* oldest request not released */
	unsigned int next;	/* oldest request not done */
	unsigned int tail;	/* next to post */
	struct sock_req reqs[TALLY_NCCL_MAX_REQUESTS];
};

struct sock_listen {
	int fd;
};

#endif /* TALLY_NCCL_SOCK_H */
