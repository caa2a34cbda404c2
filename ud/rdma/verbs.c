//go:build linux && cgo && rdma

// verbs.c is the C side of the rdma backend: endpoint setup and teardown
// through librdmacm, and the hot-path calls (post lists, batched polls) that
// the Go side makes with plain integers so that no Go pointer is kept by C.

#include "verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int seterr(struct tc_err *e, int kind, int errnum, const char *op, const char *fmt, ...)
{
	e->kind = kind;
	e->errnum = errnum;
	snprintf(e->op, sizeof e->op, "%s", op);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

// sys records a failed call with errno.
static int sys(struct tc_err *e, const char *op)
{
	int n = errno ? errno : EIO;
	return seterr(e, TC_ERR_SYS, n, op, "%s", strerror(n));
}

// enum ibv_mtu counts from IBV_MTU_256 = 1.
static int mtu_bytes(enum ibv_mtu m) { return m ? 128 << m : 0; }

static uint32_t round_up(uint32_t n, uint32_t a) { return (n + a - 1) / a * a; }

// wait_event waits up to timeout_ms for the next rdma_cm event.
static int wait_event(struct rdma_event_channel *ch, int timeout_ms, struct rdma_cm_event **ev)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	int r;
	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (r < 0)
		return -1;
	return rdma_get_cm_event(ch, ev);
}

// bind_dev creates the event channel and a UDP-port-space id, and binds it to
// the interface address. The bind is what picks the RDMA device: the kernel
// looks the address up in every device's GID table and fails with ENODEV if
// none has it. It also fills dev from the bound port.
static int bind_dev(struct rdma_event_channel **ch, struct rdma_cm_id **id, uint32_t ifaddr,
		    struct tc_dev *dev, struct tc_err *e)
{
	*ch = rdma_create_event_channel();
	if (!*ch) {
		// No /dev/infiniband/rdma_cm: the kernel has no RDMA (rdma_ucm)
		// support loaded, so there is no device for any address.
		int n = errno;
		return seterr(e, TC_ERR_NODEV, n, "rdma_create_event_channel",
			      "%s (kernel RDMA support not loaded: no rdma_ucm / /dev/infiniband/rdma_cm)", strerror(n));
	}
	if (rdma_create_id(*ch, id, NULL, RDMA_PS_UDP))
		return sys(e, "rdma_create_id");
	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_addr.s_addr = ifaddr;
	if (rdma_bind_addr(*id, (struct sockaddr *)&sin)) {
		int n = errno;
		if (n == ENODEV || n == EADDRNOTAVAIL || n == ENOENT)
			return seterr(e, TC_ERR_NODEV, n, "rdma_bind_addr", "%s", strerror(n));
		return sys(e, "rdma_bind_addr");
	}
	if (!(*id)->verbs)
		return seterr(e, TC_ERR_NODEV, ENODEV, "rdma_bind_addr", "bound, but to no device");
	struct ibv_port_attr pa;
	// ibv_query_port is a macro around a static inline in verbs.h; calling
	// it from C is what gives cgo a real function.
	if (ibv_query_port((*id)->verbs, (*id)->port_num, &pa))
		return sys(e, "ibv_query_port");
	snprintf(dev->name, sizeof dev->name, "%s", ibv_get_device_name((*id)->verbs->device));
	dev->port = (*id)->port_num;
	dev->state = pa.state;
	dev->active_mtu = mtu_bytes(pa.active_mtu);
	dev->max_mtu = mtu_bytes(pa.max_mtu);
	return 0;
}

int tc_lookup(uint32_t ifaddr, struct tc_dev *dev, struct tc_err *e)
{
	struct rdma_event_channel *ch = NULL;
	struct rdma_cm_id *id = NULL;
	int rc = bind_dev(&ch, &id, ifaddr, dev, e);
	if (id)
		rdma_destroy_id(id);
	if (ch)
		rdma_destroy_event_channel(ch);
	return rc;
}

void tc_free_buf(void *buf) { free(buf); }

void tc_close(struct tc_ep *ep)
{
	if (!ep)
		return;
	if (ep->joined)
		rdma_leave_multicast(ep->id, (struct sockaddr *)&ep->group);
	if (ep->ah)
		ibv_destroy_ah(ep->ah);
	if (ep->qp)
		rdma_destroy_qp(ep->id);
	if (ep->rcq && ep->cq_events)
		ibv_ack_cq_events(ep->rcq, ep->cq_events);
	if (ep->rcq)
		ibv_destroy_cq(ep->rcq);
	if (ep->scq)
		ibv_destroy_cq(ep->scq);
	if (ep->cc)
		ibv_destroy_comp_channel(ep->cc);
	if (ep->mr)
		ibv_dereg_mr(ep->mr);
	if (ep->pd)
		ibv_dealloc_pd(ep->pd);
	if (ep->id)
		rdma_destroy_id(ep->id);
	if (ep->ch)
		rdma_destroy_event_channel(ep->ch);
	free(ep->rwr);
	free(ep->rsge);
	free(ep->swr);
	free(ep->ssge);
	free(ep->wc);
	free(ep->rc_id);
	free(ep->rc_len);
	free(ep->rc_status);
	free(ep->s_len);
	// ep->buf stays: receive slots may still be lent to the consumer.
	free(ep);
}

// create_qp creates the UD QP through rdma_cm, which also moves it to RTS
// with the rdma_cm qkey. Devices cap max_inline_data differently and fail the
// creation when asked for more, so the request is halved until it fits.
static int create_qp(struct tc_ep *ep, const struct tc_params *p, struct tc_err *e)
{
	int inl = p->max_inline < 0 ? 0 : p->max_inline;
	for (;;) {
		struct ibv_qp_init_attr ia = {
			.send_cq = ep->scq,
			.recv_cq = ep->rcq,
			.qp_type = IBV_QPT_UD,
			.sq_sig_all = 0, // selective signaling
			.cap = {
				.max_send_wr = p->sender ? ep->nsend : 1,
				.max_recv_wr = p->sender ? 1 : ep->nrecv,
				.max_send_sge = 1,
				.max_recv_sge = 1,
				.max_inline_data = inl,
			},
		};
		if (rdma_create_qp(ep->id, ep->pd, &ia) == 0) {
			ep->qp = ep->id->qp;
			// The provider writes back what it granted.
			ep->max_inline = ia.cap.max_inline_data;
			if (ep->max_inline > inl)
				ep->max_inline = inl;
			return 0;
		}
		if (inl == 0)
			return sys(e, "rdma_create_qp");
		inl /= 2;
		if (inl < 16)
			inl = 0;
	}
}

// join joins the group and waits for the join event, whose UD parameters give
// the address handle attributes, the remote QPN and the qkey. A sender asks
// for a send-only full-member join first: the kernel then makes no IGMP join
// and librdmacm does not attach the QP, so it never receives its own
// datagrams. Kernels or libraries without it fall back to a full join.
static int join(struct tc_ep *ep, const struct tc_params *p, struct tc_err *e)
{
	struct rdma_cm_event *ev;
	int rc = -1;
	if (p->sender) {
		struct rdma_cm_join_mc_attr_ex mc = {
			.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
			.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
			.addr = (struct sockaddr *)&ep->group,
		};
		rc = rdma_join_multicast_ex(ep->id, &mc, ep);
		ep->sendonly = rc == 0;
	}
	if (rc && rdma_join_multicast(ep->id, (struct sockaddr *)&ep->group, ep))
		return seterr(e, TC_ERR_JOIN, errno, "rdma_join_multicast", "%s", strerror(errno));
	ep->joined = 1;
	for (;;) {
		if (wait_event(ep->ch, p->timeout_ms, &ev)) {
			int n = errno;
			if (n == ETIMEDOUT)
				return seterr(e, TC_ERR_JOIN, n, "rdma_get_cm_event", "no join event within %d ms",
					      p->timeout_ms);
			return seterr(e, TC_ERR_JOIN, n, "rdma_get_cm_event", "%s", strerror(n));
		}
		enum rdma_cm_event_type t = ev->event;
		if (t == RDMA_CM_EVENT_MULTICAST_JOIN) {
			struct rdma_ud_param ud = ev->param.ud;
			rdma_ack_cm_event(ev);
			ep->remote_qpn = ud.qp_num ? ud.qp_num : 0xFFFFFF;
			ep->qkey = ud.qkey;
			if (p->sender) {
				ep->ah = ibv_create_ah(ep->pd, &ud.ah_attr);
				if (!ep->ah)
					return sys(e, "ibv_create_ah");
			}
			return 0;
		}
		int status = ev->status;
		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_MULTICAST_ERROR)
			return seterr(e, TC_ERR_JOIN, -status, "rdma_join_multicast", "%s (status %d)",
				      rdma_event_str(t), status);
		// Any other event (address change, device removal) before the
		// join completes fails the setup.
		return seterr(e, TC_ERR_JOIN, EIO, "rdma_join_multicast", "unexpected event %s", rdma_event_str(t));
	}
}

struct tc_ep *tc_open(const struct tc_params *p, struct tc_err *e)
{
	struct tc_ep *ep = calloc(1, sizeof *ep);
	if (!ep) {
		sys(e, "calloc");
		return NULL;
	}
	ep->group.sin_family = AF_INET;
	ep->group.sin_addr.s_addr = p->group;
	if (bind_dev(&ep->ch, &ep->id, p->ifaddr, &ep->dev, e))
		goto fail;
	if (ep->dev.state != IBV_PORT_ACTIVE) {
		seterr(e, TC_ERR_PORT, 0, "ibv_query_port", "%s port %d is %s", ep->dev.name, ep->dev.port,
		       ibv_port_state_str(ep->dev.state));
		goto fail;
	}
	ep->mtu = ep->dev.active_mtu;
	if (p->max_dgram > ep->mtu) {
		seterr(e, TC_ERR_TOO_LARGE, 0, "config", "MaxDatagram %d above the active MTU %d of %s port %d",
		       p->max_dgram, ep->mtu, ep->dev.name, ep->dev.port);
		goto fail;
	}
	if (p->max_dgram > 0)
		ep->mtu = p->max_dgram;
	ep->batch = p->batch;
	if (p->sender) {
		ep->nsend = p->nsend;
		ep->sstride = round_up(ep->dev.active_mtu, 64);
	} else {
		ep->nrecv = p->nrecv;
		// Each receive needs the 40-byte GRH space plus a full MTU; the
		// stride keeps every slot on its own cache lines.
		ep->rstride = round_up(40 + ep->dev.active_mtu, 64);
	}

	// One buffer and one memory region for every slot, registered here and
	// never on the hot path. A rebuilt endpoint registers the buffer of
	// the one it replaces: its slots may still be lent to the consumer.
	ep->buflen = round_up((size_t)ep->nrecv * ep->rstride + (size_t)ep->nsend * ep->sstride, 4096);
	if (p->buf) {
		if (p->buflen != ep->buflen) {
			seterr(e, TC_ERR_SYS, EINVAL, "rebuild",
			       "%s port %d now needs %zu bytes of slots, the endpoint had %zu (active MTU changed?)",
			       ep->dev.name, ep->dev.port, ep->buflen, p->buflen);
			goto fail;
		}
		ep->buf = p->buf;
	} else {
		if (posix_memalign((void **)&ep->buf, 4096, ep->buflen)) {
			sys(e, "posix_memalign");
			goto fail;
		}
		ep->own_buf = 1;
		memset(ep->buf, 0, ep->buflen);
	}
	ep->sbuf = ep->buf + (size_t)ep->nrecv * ep->rstride;

	ep->pd = ibv_alloc_pd(ep->id->verbs);
	if (!ep->pd) {
		sys(e, "ibv_alloc_pd");
		goto fail;
	}
	ep->mr = ibv_reg_mr(ep->pd, ep->buf, ep->buflen, IBV_ACCESS_LOCAL_WRITE);
	if (!ep->mr) {
		sys(e, "ibv_reg_mr");
		goto fail;
	}
	if (!p->sender && p->blocking) {
		ep->cc = ibv_create_comp_channel(ep->id->verbs);
		if (!ep->cc) {
			sys(e, "ibv_create_comp_channel");
			goto fail;
		}
		// Non-blocking, so that the Go side can hand a dup of it to
		// the runtime's poller and tc_get_cq_event never sleeps.
		int fl = fcntl(ep->cc->fd, F_GETFL);
		if (fl < 0 || fcntl(ep->cc->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			sys(e, "fcntl O_NONBLOCK on the completion channel");
			goto fail;
		}
	}
	ep->scq = ibv_create_cq(ep->id->verbs, p->sender ? ep->nsend : 1, NULL, NULL, 0);
	ep->rcq = ibv_create_cq(ep->id->verbs, p->sender ? 1 : ep->nrecv, NULL, ep->cc, 0);
	if (!ep->scq || !ep->rcq) {
		sys(e, "ibv_create_cq");
		goto fail;
	}
	if (create_qp(ep, p, e))
		goto fail;

	ep->wc = calloc(ep->batch, sizeof *ep->wc);
	ep->rc_id = calloc(ep->batch, sizeof(uint32_t));
	ep->rc_len = calloc(ep->batch, sizeof(uint32_t));
	ep->rc_status = calloc(ep->batch, sizeof(uint32_t));
	ep->s_len = calloc(ep->batch, sizeof(uint32_t));
	ep->swr = calloc(ep->batch, sizeof *ep->swr);
	ep->ssge = calloc(ep->batch, sizeof *ep->ssge);
	ep->rwr = calloc(ep->nrecv ? ep->nrecv : 1, sizeof *ep->rwr);
	ep->rsge = calloc(ep->nrecv ? ep->nrecv : 1, sizeof *ep->rsge);
	if (!ep->wc || !ep->rc_id || !ep->rc_len || !ep->rc_status || !ep->s_len || !ep->swr || !ep->ssge ||
	    !ep->rwr || !ep->rsge) {
		sys(e, "calloc");
		goto fail;
	}
	// Receive work requests, one per slot, built once: wr_id is the slot.
	for (uint32_t k = 0; k < ep->nrecv; k++) {
		ep->rsge[k].addr = (uintptr_t)(ep->buf + (size_t)k * ep->rstride);
		ep->rsge[k].length = 40 + ep->dev.active_mtu;
		ep->rsge[k].lkey = ep->mr->lkey;
		ep->rwr[k].wr_id = k;
		ep->rwr[k].sg_list = &ep->rsge[k];
		ep->rwr[k].num_sge = 1;
	}
	// Receives are posted before the join, so that nothing sent after the
	// join completes finds the receive queue empty.
	if (ep->nrecv && tc_post_recv(ep, p->post_n < 0 ? 0 : p->post_start,
				       p->post_n < 0 ? ep->nrecv : (uint32_t)p->post_n)) {
		sys(e, "ibv_post_recv");
		goto fail;
	}
	if (join(ep, p, e))
		goto fail;
	// From here on the channel is read through the Go runtime's poller
	// (tc_get_cm_event): non-blocking.
	int cfl = fcntl(ep->ch->fd, F_GETFL);
	if (cfl < 0 || fcntl(ep->ch->fd, F_SETFL, cfl | O_NONBLOCK) < 0) {
		sys(e, "fcntl O_NONBLOCK on the rdma_cm event channel");
		goto fail;
	}
	return ep;
fail:
	if (ep->buf && ep->own_buf) {
		if (ep->mr)
			ibv_dereg_mr(ep->mr);
		ep->mr = NULL;
		free(ep->buf);
	}
	tc_close(ep);
	return NULL;
}

int tc_post_recv(struct tc_ep *ep, uint32_t start, uint32_t n)
{
	if (n == 0)
		return 0;
	// Chain the prebuilt requests of slots start..start+n-1 (wrapping) into
	// one list: one ibv_post_recv for the whole run.
	uint32_t mask = ep->nrecv - 1;
	struct ibv_recv_wr *first = &ep->rwr[start & mask], *prev = NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &ep->rwr[(start + i) & mask];
		w->next = NULL;
		if (prev)
			prev->next = w;
		prev = w;
	}
	struct ibv_recv_wr *bad;
	int rc = ibv_post_recv(ep->qp, first, &bad);
	if (rc)
		errno = rc;
	return rc;
}

int tc_poll_recv(struct tc_ep *ep)
{
	int n = ibv_poll_cq(ep->rcq, ep->batch, ep->wc);
	for (int i = 0; i < n; i++) {
		ep->rc_id[i] = (uint32_t)ep->wc[i].wr_id;
		ep->rc_len[i] = ep->wc[i].byte_len;
		ep->rc_status[i] = ep->wc[i].status;
	}
	return n;
}

int tc_arm_recv(struct tc_ep *ep)
{
	int n = tc_poll_recv(ep);
	if (n)
		return n;
	// Arm the CQ, then poll once more: a completion that arrived before
	// the request raises no event.
	int rc = ibv_req_notify_cq(ep->rcq, 0);
	if (rc) {
		errno = rc;
		return -2;
	}
	return tc_poll_recv(ep);
}

int tc_get_cq_event(struct tc_ep *ep)
{
	struct ibv_cq *cq;
	void *ctx;
	// The channel's fd is non-blocking: with no event pending this fails
	// with EAGAIN instead of sleeping.
	if (ibv_get_cq_event(ep->cc, &cq, &ctx)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (!errno)
			errno = EIO;
		return -1;
	}
	// Events are acknowledged in bulk: each ack takes a lock. The rest
	// is acknowledged in tc_close, before the CQ is destroyed.
	if (++ep->cq_events >= 256) {
		ibv_ack_cq_events(ep->rcq, ep->cq_events);
		ep->cq_events = 0;
	}
	return 1;
}

int tc_post_send(struct tc_ep *ep, uint64_t seq, int n)
{
	// Datagrams seq..seq+n-1 are in send slots (seq+i) % nsend with lengths
	// in s_len. Inline up to max_inline; only the last request is signaled,
	// and its wr_id (seq+n) says how many datagrams are complete once it is.
	for (int i = 0; i < n; i++) {
		uint32_t len = ep->s_len[i];
		struct ibv_sge *s = &ep->ssge[i];
		struct ibv_send_wr *w = &ep->swr[i];
		s->addr = (uintptr_t)(ep->sbuf + (size_t)((seq + i) % ep->nsend) * ep->sstride);
		s->length = len;
		s->lkey = ep->mr->lkey;
		w->wr_id = seq + n;
		w->sg_list = s;
		w->num_sge = len ? 1 : 0;
		w->opcode = IBV_WR_SEND;
		w->send_flags = 0;
		if (len && (int)len <= ep->max_inline)
			w->send_flags |= IBV_SEND_INLINE;
		if (i == n - 1)
			w->send_flags |= IBV_SEND_SIGNALED;
		w->wr.ud.ah = ep->ah;
		w->wr.ud.remote_qpn = ep->remote_qpn;
		w->wr.ud.remote_qkey = ep->qkey;
		w->next = i == n - 1 ? NULL : &ep->swr[i + 1];
	}
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(ep->qp, ep->swr, &bad);
	if (rc) {
		errno = rc;
		return -1;
	}
	return n;
}

int tc_poll_send(struct tc_ep *ep)
{
	int n = ibv_poll_cq(ep->scq, ep->batch, ep->wc);
	for (int i = 0; i < n; i++) {
		if (ep->wc[i].status != IBV_WC_SUCCESS) {
			ep->last_status = ep->wc[i].status;
			return -2;
		}
		if (ep->wc[i].wr_id > ep->completed)
			ep->completed = ep->wc[i].wr_id;
	}
	return n;
}

int tc_get_cm_event(struct tc_ep *ep, int *type, int *status)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ep->ch, &ev)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (!errno)
			errno = EIO;
		return -1;
	}
	*type = ev->event;
	*status = ev->status;
	// Acknowledged at once: rdma_destroy_id waits for every event of its
	// id to be acknowledged, and a device removal must not wait.
	rdma_ack_cm_event(ev);
	return 1;
}

int tc_async_nonblock(struct ibv_context *ctx)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

int tc_get_async_event(struct ibv_context *ctx, struct tc_async *out)
{
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (!errno)
			errno = EIO;
		return -1;
	}
	memset(out, 0, sizeof *out);
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->qpn = ev.element.qp ? ev.element.qp->qp_num : 0;
		break;
	case IBV_EVENT_CQ_ERR:
		out->cq = (uintptr_t)ev.element.cq;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	// Acknowledged at once: destroying a QP or CQ waits for the
	// acknowledgement of its events.
	ibv_ack_async_event(&ev);
	return 1;
}

void tc_sync_devices(void)
{
	struct ibv_context **l = rdma_get_devices(NULL);
	if (l)
		rdma_free_devices(l);
}

int tc_qp_error(struct tc_ep *ep)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int rc = ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
	if (rc)
		errno = rc;
	return rc;
}
