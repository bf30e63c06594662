/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The XDP program of the AF_XDP transport, and its attachment. The
 * program is a few dozen BPF instructions built here (no BPF compiler at
 * build time): an unfragmented IPv4 UDP frame from the dataplane's
 * address to the worker's port goes to the XDP socket of the queue it
 * arrived on (bpf_redirect_map on an XSKMAP, falling back to the kernel
 * when that queue has no socket); every other frame (ARP, ICMP, TCP to
 * tallyd, other ports) passes to the kernel's stack untouched.
 *
 * It is attached through a BPF link, which the kernel removes when the
 * last descriptor of it closes: a worker that dies leaves no program on
 * its interface. One link per interface: a second context on the same
 * interface (or another XDP program there) is refused with EBUSY.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "transport.h"
#include "xdp.h"

#define PROG_MAX	40
#define XSKMAP_ENTRIES	64	/* receive queues a map covers */

/* An instruction list being built; jumps to "pass" patched at the end. */
struct prog {
	struct bpf_insn in[PROG_MAX];
	int n;
	int to_pass[PROG_MAX];	/* indexes of jumps to the pass exit */
	int npass;
};

static void
emit(struct prog *p, uint8_t code, uint8_t dst, uint8_t src, int16_t off,
	int32_t imm)
{
	p->in[p->n++] = (struct bpf_insn){ .code = code, .dst_reg = dst,
		.src_reg = src, .off = off, .imm = imm };
}

/* dst = *(size *)(src + off) */
static void
ldx(struct prog *p, uint8_t size, uint8_t dst, uint8_t src, int16_t off)
{
	emit(p, BPF_LDX | BPF_MEM | size, dst, src, off, 0);
}

/* if (reg != imm) goto pass; jmp32: the low 32 bits compared. */
static void
jne_pass(struct prog *p, uint8_t cls, uint8_t reg, int32_t imm)
{
	p->to_pass[p->npass++] = p->n;
	emit(p, cls | BPF_JNE | BPF_K, reg, 0, 0, imm);
}

/*
 * The program: r2 = data, r3 = data_end; 42 bytes must be there; then
 * the checks, each jumping to "pass" when it fails; then
 * bpf_redirect_map(map, rx_queue_index, XDP_PASS).
 */
static void
build(struct prog *p, int map_fd, uint32_t src_ip, uint16_t dport)
{
	uint16_t ipv4 = 0, frag = 0;

	memcpy(&ipv4, (uint8_t[2]){ 0x08, 0x00 }, 2);
	memcpy(&frag, (uint8_t[2]){ 0x3f, 0xff }, 2);
	ldx(p, BPF_W, BPF_REG_2, BPF_REG_1, offsetof(struct xdp_md, data));
	ldx(p, BPF_W, BPF_REG_3, BPF_REG_1,
		offsetof(struct xdp_md, data_end));
	emit(p, BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_4, BPF_REG_2, 0, 0);
	emit(p, BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_4, 0, 0,
		TALLY_XDP_HDRS);
	p->to_pass[p->npass++] = p->n;
	emit(p, BPF_JMP | BPF_JGT | BPF_X, BPF_REG_4, BPF_REG_3, 0, 0);
	ldx(p, BPF_H, BPF_REG_5, BPF_REG_2, 12);		/* ethertype */
	jne_pass(p, BPF_JMP, BPF_REG_5, ipv4);
	ldx(p, BPF_B, BPF_REG_5, BPF_REG_2, 14);		/* version, ihl */
	jne_pass(p, BPF_JMP, BPF_REG_5, 0x45);
	ldx(p, BPF_B, BPF_REG_5, BPF_REG_2, 23);		/* protocol */
	jne_pass(p, BPF_JMP, BPF_REG_5, 17);
	ldx(p, BPF_H, BPF_REG_5, BPF_REG_2, 20);		/* fragment */
	emit(p, BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_5, 0, 0, frag);
	jne_pass(p, BPF_JMP, BPF_REG_5, 0);
	ldx(p, BPF_W, BPF_REG_5, BPF_REG_2, 26);		/* source IP */
	jne_pass(p, BPF_JMP32, BPF_REG_5, (int32_t)src_ip);
	ldx(p, BPF_H, BPF_REG_5, BPF_REG_2, 36);		/* UDP dport */
	jne_pass(p, BPF_JMP, BPF_REG_5, dport);
	ldx(p, BPF_W, BPF_REG_2, BPF_REG_1,
		offsetof(struct xdp_md, rx_queue_index));
	/* r1 = the map: a 16-byte load of its descriptor. */
	emit(p, BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0,
		map_fd);
	emit(p, 0, 0, 0, 0, 0);
	emit(p, BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, XDP_PASS);
	emit(p, BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map);
	emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	for (int i = 0; i < p->npass; i++)
		p->in[p->to_pass[i]].off = (int16_t)(p->n - p->to_pass[i] - 1);
	emit(p, BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_PASS);
	emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

/*
 * Attaches prog_fd to ifindex by a link: driver mode first, then generic;
 * TALLY_XDP_MODE=native or generic in the environment asks for one.
 */
static int
attach(struct tally_xdp_prog *xp, int ifindex)
{
	static const unsigned int modes[] = { XDP_FLAGS_DRV_MODE,
		XDP_FLAGS_SKB_MODE };
	const char *env = getenv("TALLY_XDP_MODE");
	size_t first = 0, last = 1;
	int err = EOPNOTSUPP;

	if (env != NULL && strcmp(env, "native") == 0)
		last = 0;
	else if (env != NULL && strcmp(env, "generic") == 0)
		first = 1;
	for (size_t i = first; i <= last; i++) {
		LIBBPF_OPTS(bpf_link_create_opts, o, .flags = modes[i]);

		xp->link_fd = bpf_link_create(xp->prog_fd, ifindex, BPF_XDP,
			&o);
		if (xp->link_fd >= 0) {
			xp->native = modes[i] == XDP_FLAGS_DRV_MODE;
			return 0;
		}
		err = -xp->link_fd;
		if (err == EBUSY || err == EEXIST || err == EPERM)
			break;
	}
	xp->link_fd = -1;
	return -err;
}

/* What a refusal of the kernel's means, for the sentences below. */
static const char *
priv_hint(int rc)
{
	return rc == -EPERM || rc == -EACCES ? " (needs CAP_BPF and "
		"CAP_NET_ADMIN, or root)" : "";
}

int
tally_xdp_prog_attach(struct tally_xdp_prog *xp, int ifindex,
	const char *ifname, uint32_t src_ip, uint16_t dport, char *why,
	size_t len)
{
	char log[4096] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, po, .log_buf = log,
		.log_size = sizeof(log), .log_level = 0);
	struct prog p = { .n = 0 };
	int rc;

	*xp = (struct tally_xdp_prog){ .map_fd = -1, .prog_fd = -1,
		.link_fd = -1 };
	xp->map_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "tally_xsks", 4, 4,
		XSKMAP_ENTRIES, NULL);
	if (xp->map_fd < 0) {
		rc = xp->map_fd;
		return tally_tp_fail(why, len, rc, "xdp: cannot create the socket map: "
			"%s%s", strerror(-rc), priv_hint(rc));
	}
	build(&p, xp->map_fd, src_ip, dport);
	xp->prog_fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "tally_xdp",
		"Dual BSD/GPL", p.in, (size_t)p.n, &po);
	if (xp->prog_fd < 0) {
		rc = xp->prog_fd;
		tally_xdp_prog_detach(xp);
		return tally_tp_fail(why, len, rc, "xdp: the kernel refused the XDP "
			"program: %s%s %s", strerror(-rc), priv_hint(rc), log);
	}
	rc = attach(xp, ifindex);
	if (rc != 0) {
		tally_xdp_prog_detach(xp);
		return tally_tp_fail(why, len, rc, "xdp: cannot attach the XDP program "
			"to %s: %s%s%s", ifname, strerror(-rc), priv_hint(rc),
			rc == -EBUSY || rc == -EEXIST ? " (an XDP program, "
			"maybe another tally context's, is already there)" :
			"");
	}
	return 0;
}

int
tally_xdp_prog_add(struct tally_xdp_prog *xp, unsigned int queue, int fd)
{
	uint32_t key = queue, val = (uint32_t)fd;

	if (queue >= XSKMAP_ENTRIES)
		return -ERANGE;
	return bpf_map_update_elem(xp->map_fd, &key, &val, 0) == 0 ? 0 :
		-errno;
}

void
tally_xdp_prog_detach(struct tally_xdp_prog *xp)
{
	if (xp->link_fd >= 0)
		close(xp->link_fd);
	if (xp->prog_fd >= 0)
		close(xp->prog_fd);
	if (xp->map_fd >= 0)
		close(xp->map_fd);
	xp->link_fd = xp->prog_fd = xp->map_fd = -1;
}
