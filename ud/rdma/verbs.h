// verbs.h declares the C side of the rdma backend (verbs.c): one endpoint
// (rdma_cm id, UD queue pair, completion queues, memory region) per Sender or
// Receiver, and the few calls the Go side makes on it.
#ifndef TICKCAST_RDMA_VERBS_H
#define TICKCAST_RDMA_VERBS_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// Error kinds reported in tc_err.kind; the Go side maps them to its errors.
enum {
	TC_OK = 0,
	TC_ERR_SYS = 1,       // a call failed; errnum holds errno
	TC_ERR_NODEV = 2,     // no RDMA device behind the interface address
	TC_ERR_PORT = 3,      // the port is not ACTIVE
	TC_ERR_JOIN = 4,      // the multicast join failed or timed out
	TC_ERR_TOO_LARGE = 5, // requested datagram size above the active MTU
};

struct tc_err {
	int kind;
	int errnum;
	char op[48];   // the failing call
	char msg[160]; // detail
};

struct tc_dev {
	char name[64];
	int port;
	int state;       // enum ibv_port_state
	int active_mtu;  // bytes
	int max_mtu;     // bytes
};

// Parameters of tc_open; addresses are IPv4 in network byte order.
struct tc_params {
	uint32_t ifaddr;
	uint32_t group;
	int sender;      // 1: send-only side (no receive ring)
	int nrecv;       // receive slots (power of two)
	int nsend;       // send slots = send queue depth
	int batch;       // completions per poll, work requests per post list
	int max_inline;  // requested inline size, -1 for none
	int blocking;    // receive completions through a completion channel
	int timeout_ms;  // join timeout
	int max_dgram;   // 0, or a cap below the active MTU
	// buf, when set, is the slot memory of an endpoint being rebuilt: it
	// is registered again instead of a new buffer being allocated, so
	// that slots lent to the consumer stay valid. buflen must match.
	uint8_t *buf;
	size_t buflen;
	// Receivers: the receive slots posted before the join, post_n of them
	// from slot post_start (wrapping); post_n -1 posts every slot.
	uint32_t post_start;
	int post_n;
};

// One device async event, copied out of struct ibv_async_event before it is
// acknowledged.
struct tc_async {
	int type;        // enum ibv_event_type
	int port;        // port events
	uint32_t qpn;    // QP events: the QP's number
	uintptr_t cq;    // CQ events: the CQ
};

struct tc_ep {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;   // blocking receivers only
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;             // senders only
	struct sockaddr_in group;
	int joined;
	unsigned cq_events;            // completion events not yet acknowledged

	struct tc_dev dev;
	int mtu;                       // largest datagram (active MTU or cap)
	int max_inline;                // granted by the QP
	uint32_t remote_qpn, qkey;     // from the join event
	int sendonly;                  // the join was send-only

	int batch;
	uint8_t *buf;                  // every slot; freed by tc_free_buf, not tc_close
	size_t buflen;
	uint32_t nrecv, rstride;       // receive slots: nrecv * rstride at buf
	uint32_t nsend, sstride;       // send slots: nsend * sstride after them
	uint8_t *sbuf;

	struct ibv_recv_wr *rwr;       // one per receive slot, built once
	struct ibv_sge *rsge;
	struct ibv_send_wr *swr;       // one per post-list entry, reused
	struct ibv_sge *ssge;
	struct ibv_wc *wc;             // poll batch

	// Results of the last poll, read by Go: wr_id, byte_len and status of
	// each completion.
	uint32_t *rc_id, *rc_len, *rc_status;
	// Lengths of the next post list, written by Go.
	uint32_t *s_len;
	uint64_t completed;            // datagrams whose send has completed
	int last_status;               // status of the last failed send completion
	int own_buf;                   // buf was allocated by tc_open (freed if it fails)
};

int tc_lookup(uint32_t ifaddr, struct tc_dev *dev, struct tc_err *err);
struct tc_ep *tc_open(const struct tc_params *p, struct tc_err *err);
void tc_close(struct tc_ep *ep);
void tc_free_buf(void *buf);

int tc_post_recv(struct tc_ep *ep, uint32_t start, uint32_t n);
int tc_poll_recv(struct tc_ep *ep);
// tc_arm_recv polls; when nothing is there it arms the receive CQ for the
// next completion and polls again. It returns the completions taken (0:
// none, the CQ is armed and its next completion raises an event on the
// completion channel), -1 when ibv_poll_cq failed, or -2 when
// ibv_req_notify_cq failed (errno set).
int tc_arm_recv(struct tc_ep *ep);
// tc_get_cq_event takes one event from the completion channel without
// sleeping: 1 when it took one, 0 when none is pending (EAGAIN), -1 with
// errno set on error. Events are acknowledged in batches of 256.
int tc_get_cq_event(struct tc_ep *ep);
int tc_post_send(struct tc_ep *ep, uint64_t seq, int n);
int tc_poll_send(struct tc_ep *ep);

// tc_get_cm_event takes one event from the endpoint's rdma_cm event channel
// (non-blocking after the join) and acknowledges it: 1 with *type and
// *status set, 0 when none is pending, -1 with errno set on error.
int tc_get_cm_event(struct tc_ep *ep, int *type, int *status);
// tc_async_nonblock makes the device context's async event fd non-blocking.
int tc_async_nonblock(struct ibv_context *ctx);
// tc_get_async_event takes one async event from ctx without sleeping and
// acknowledges it: 1 with *ev filled, 0 when none is pending, -1 with errno
// set on error.
int tc_get_async_event(struct ibv_context *ctx, struct tc_async *ev);
// tc_sync_devices makes librdmacm compare its device list with the kernel's:
// a device being removed whose contexts nothing uses any more is closed,
// which lets the removal finish; a device added since is picked up.
void tc_sync_devices(void);
// tc_qp_error moves the endpoint's QP to the error state (a test hook).
int tc_qp_error(struct tc_ep *ep);

#endif
