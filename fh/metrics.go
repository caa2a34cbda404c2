package fh

import (
	"strings"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/tickprom"
)

// metrics is the feed handler's Prometheus registry and server
// (Config.MetricsAddr): the publisher's counters and packet histograms, the
// recovery server's counters and the stores' depth, the NATS connection's
// state, and the Go runtime's.
type metrics struct {
	*metricsrv.Server
	observer *tickprom.PublisherMetrics // PublisherConfig.Observer
	source   string
}

// startMetrics serves the metrics (unless addr is empty) and registers the
// recovery collectors and the NATS connection's; the publisher's are added
// by addPublisher once it exists.
func startMetrics(addr, source string, log zerolog.Logger, rsrv *recovery.Server, stores []*recovery.Channel, nats *natsconn.Metrics) (*metrics, error) {
	srv, err := metricsrv.Start(addr, log)
	if err != nil {
		return nil, err
	}
	m := &metrics{Server: srv, observer: tickprom.NewPublisherMetrics(), source: sourceLabel(source)}
	srv.Registry.MustRegister(m.observer, tickprom.NewRecoveryServerCollector(rsrv, stores), nats)
	return m, nil
}

// addPublisher registers pub's counters.
func (m *metrics) addPublisher(pub *tickcast.Publisher) {
	m.Registry.MustRegister(tickprom.NewPublisherCollector(pub, m.source))
}

// addWatch registers the counts of foreign packets on the feed's groups.
func (m *metrics) addWatch(counts func() []uint64) {
	m.Registry.MustRegister(tickprom.NewForeignPacketsCollector(counts))
}

// sourceLabel is the source label value of a source name: its kind
// (synthetic, itch), without a path, so the label set stays bounded.
func sourceLabel(source string) string {
	kind, _, _ := strings.Cut(source, ":")
	return kind
}
