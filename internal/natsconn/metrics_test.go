package natsconn

import (
	"fmt"
	"github.com/tickcast/tickcast/internal/testenv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape gathers m through a registry, as Prometheus would, and returns each
// series as name{label="value",...} with its value.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// waitScrape waits until a scrape of m holds want exactly.
func waitScrape(t *testing.T, m *Metrics, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := scrape(t, m)
		if equalSeries(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics after %v:\n%v\nwant\n%v", wait, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equalSeries(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func info(s *Server) string {
	return fmt.Sprintf("tickcast_nats_server_info{server=%q,url=%q}", s.Name(), s.ClientURL())
}

// TestMetrics follows a connection through the loss of its server and the
// server's restart on the same port.
func TestMetrics(t *testing.T) {
	m := NewMetrics()
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 0, "tickcast_nats_reconnects_total{}": 0})

	s := startServer(t, ServerConfig{})
	port := portOf(t, s)
	nc, rec := connect(t, ConnConfig{URL: s.ClientURL(), ReconnectWait: 50 * time.Millisecond, Metrics: m})
	rec.waitFor(EventConnected, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 1, "tickcast_nats_reconnects_total{}": 0, info(s): 1})

	s.Shutdown()
	rec.waitFor(EventDisconnected, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 0, "tickcast_nats_reconnects_total{}": 0})

	s2 := startServer(t, ServerConfig{Port: port})
	rec.waitFor(EventReconnected, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 1, "tickcast_nats_reconnects_total{}": 1, info(s2): 1})

	nc.Close()
	rec.waitFor(EventClosed, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 0, "tickcast_nats_reconnects_total{}": 1})
}

// TestMetricsRetryOnFailedConnect: a connection made before its server is
// up is not connected until the server starts, and its first connection is
// not a reconnect.
func TestMetricsRetryOnFailedConnect(t *testing.T) {
	m := NewMetrics()
	port := testenv.FreePorts(t, 1)[0]
	_, rec := connect(t, ConnConfig{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), ReconnectWait: 50 * time.Millisecond, Metrics: m})
	rec.waitFor(EventWaiting, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 0, "tickcast_nats_reconnects_total{}": 0})
	s := startServer(t, ServerConfig{Port: port})
	rec.waitFor(EventConnected, nil)
	waitScrape(t, m, map[string]float64{"tickcast_nats_connected{}": 1, "tickcast_nats_reconnects_total{}": 0, info(s): 1})
}

// TestMetricsRedactsPassword: the url label never holds a password.
func TestMetricsRedactsPassword(t *testing.T) {
	s := startServer(t, ServerConfig{Users: []User{{Name: "sub1", Password: "s3cret-pw", Role: RoleSubscriber}}})
	m := NewMetrics()
	u := strings.Replace(s.ClientURL(), "nats://", "nats://sub1:s3cret-pw@", 1)
	_, rec := connect(t, ConnConfig{URL: u, InboxPrefix: UserInboxPrefix("sub1"), Metrics: m})
	rec.waitFor(EventConnected, nil)
	var got []string
	deadline := time.Now().Add(wait)
	for len(got) != 3 && time.Now().Before(deadline) {
		got = got[:0]
		for k := range scrape(t, m) {
			got = append(got, k)
		}
		time.Sleep(10 * time.Millisecond)
	}
	slices.Sort(got)
	// Sorted: connected, reconnects, server info.
	if len(got) != 3 || !strings.HasPrefix(got[2], "tickcast_nats_server_info{") {
		t.Fatalf("series %v, want connected, reconnects and server info", got)
	}
	if strings.Contains(got[2], "s3cret-pw") || !strings.Contains(got[2], "sub1") {
		t.Errorf("server info %s: want the user without the password", got[2])
	}
}
