package subapp

import (
	"fmt"
	"strings"
)

// health is the subscriber's answer to a health check (metricsrv.HealthPath):
// healthy while it is subscribed, none of its channels is stale (silent past
// --stale-after without an end of session) and, with recovery on, its NATS
// connection is up. A subscriber still waiting for its first packet is
// healthy: it is subscribed and nothing has gone silent.
func (a *App) health() error {
	_, chans := a.sub.StatsSnapshot(nil)
	var stale []string
	for _, cs := range chans {
		if cs.Stale {
			stale = append(stale, fmt.Sprint(cs.Channel))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("channel %s stale: nothing received for --stale-after %v, not even heartbeats", strings.Join(stale, ", "), a.s.StaleAfter)
	}
	if a.nc != nil && !a.nc.IsConnected() {
		return fmt.Errorf("not connected to NATS (%s): gaps cannot be recovered", a.s.NATSURL)
	}
	return nil
}
