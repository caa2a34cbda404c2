package natsconn

import (
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is a Prometheus collector of one NATS connection's state, kept up
// to date by the connection's events (set it as ConnConfig.Metrics): it
// costs nothing per message and polls nothing. It exports
//
//   - tickcast_nats_connected: 1 while the connection is up, else 0;
//   - tickcast_nats_reconnects_total: times the connection came back after
//     a loss (to the same server or, in a cluster, another one);
//   - tickcast_nats_server_info{server, url}: 1, while connected, naming
//     the server the connection is on and its URL (without a password).
//
// The feed handler and the subscriber register one each; docs/operations.md
// says what to do when they move.
type Metrics struct {
	mu         sync.Mutex
	connected  bool
	reconnects uint64
	server     string // while connected
	url        string // while connected

	connectedDesc, reconnectsDesc, infoDesc *prometheus.Desc
}

// NewMetrics returns the metrics of a connection not yet made: not
// connected, no reconnects.
func NewMetrics() *Metrics {
	return &Metrics{
		connectedDesc: prometheus.NewDesc("tickcast_nats_connected",
			"1 while the NATS connection (recovery, session record, live subjects) is up, else 0.", nil, nil),
		reconnectsDesc: prometheus.NewDesc("tickcast_nats_reconnects_total",
			"Times the NATS connection came back after it was lost (a server restarted, or in a cluster the client moved to another node).", nil, nil),
		infoDesc: prometheus.NewDesc("tickcast_nats_server_info",
			"1 while connected, naming the NATS server the connection is on (server name and URL).", []string{"server", "url"}, nil),
	}
}

// up records that nc is connected, after a reconnect when reconnected. A nil
// m records nothing.
func (m *Metrics) up(nc *nats.Conn, reconnected bool) {
	if m == nil {
		return
	}
	server, url := nc.ConnectedServerName(), nc.ConnectedUrlRedacted()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connected, m.server, m.url = true, server, url
	if reconnected {
		m.reconnects++
	}
}

// down records that the connection is lost or closed. A nil m records
// nothing.
func (m *Metrics) down() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connected, m.server, m.url = false, "", ""
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.connectedDesc
	ch <- m.reconnectsDesc
	ch <- m.infoDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	connected, reconnects, server, url := m.connected, m.reconnects, m.server, m.url
	m.mu.Unlock()
	up := 0.0
	if connected {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(m.connectedDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(m.reconnectsDesc, prometheus.CounterValue, float64(reconnects))
	if connected {
		ch <- prometheus.MustNewConstMetric(m.infoDesc, prometheus.GaugeValue, 1, server, url)
	}
}
