package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// File is a dashboard and the name of the JSON file it is written to.
type File struct {
	Name      string // base name, such as "feedhandler.json"
	Dashboard *Dashboard
}

// All returns every dashboard tickcast ships, in a fixed order.
func All() []File {
	return []File{
		{Name: "feedhandler.json", Dashboard: FeedHandler()},
		{Name: "subscriber.json", Dashboard: Subscriber()},
	}
}

// JSON returns the dashboard as the indented JSON written to its file,
// ending with a newline. The same dashboard always gives the same bytes.
func (f File) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep PromQL's < and > readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(f.Dashboard); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return b.Bytes(), nil
}

// Selectors every query uses: by instance, and by channel as well for the
// metrics that have a channel label.
const (
	byInstance = `{instance=~"$instance"}`
	byChannel  = `{instance=~"$instance",channel=~"$channel"}`
)

// ds is every panel's and target's datasource: the datasource variable.
var ds = &DatasourceRef{Type: "prometheus", UID: "${datasource}"}

// builder lays a dashboard's panels out on the grid, left to right and top
// to bottom, and numbers them.
type builder struct {
	d          *Dashboard
	x, y, rowH int
	id         int
}

// newBuilder starts a dashboard with the datasource, instance and channel
// variables; instances and channels are the label values of metric.
func newBuilder(uid, title, description, metric string) *builder {
	d := &Dashboard{
		UID:           uid,
		Title:         title,
		Description:   description,
		Tags:          []string{"tickcast"},
		Timezone:      "browser",
		Editable:      true,
		GraphTooltip:  1, // shared crosshair
		Refresh:       "10s",
		SchemaVersion: 39,
		Version:       1,
		Time:          TimeRange{From: "now-1h", To: "now"},
		Links:         []any{},
	}
	d.Annotations.List = []any{}
	d.Templating.List = []Variable{
		{
			Name: "datasource", Label: "Prometheus", Type: "datasource", Query: "prometheus",
			Current: map[string]any{}, Options: []any{}, Refresh: 1,
		},
		labelVariable("instance", "Instance", fmt.Sprintf("label_values(%s, instance)", metric)),
		labelVariable("channel", "Channel", fmt.Sprintf("label_values(%s{instance=~\"$instance\"}, channel)", metric)),
	}
	return &builder{d: d}
}

// labelVariable is a multi-value variable over a label's values, "All" by
// default (matching any value).
func labelVariable(name, label, query string) Variable {
	return Variable{
		Name: name, Label: label, Type: "query", Query: query, Definition: query, Datasource: ds,
		Refresh: 2, // on time range change
		Sort:    3, // numerically ascending
		Multi:   true, IncludeAll: true, AllValue: ".+",
		Current: map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		Options: []any{},
	}
}

// row starts a row of panels under a header.
func (b *builder) row(title string) {
	b.newLine()
	b.id++
	collapsed := false
	b.d.Panels = append(b.d.Panels, &Panel{ID: b.id, Type: "row", Title: title, Collapsed: &collapsed,
		GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y}, Panels: []*Panel{}})
	b.y++
}

// newLine moves below the panels placed so far.
func (b *builder) newLine() {
	b.y += b.rowH
	b.x, b.rowH = 0, 0
}

// add places p, w columns wide and h high, right of the previous panel or
// on a new line if it does not fit.
func (b *builder) add(w, h int, p *Panel) {
	if b.x+w > 24 {
		b.newLine()
	}
	b.id++
	p.ID = b.id
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	b.x += w
	b.rowH = max(b.rowH, h)
	b.d.Panels = append(b.d.Panels, p)
}

// graph adds a time series panel of a third of the width.
func (b *builder) graph(p *Panel) { b.add(8, 8, p) }

// stats adds stat panels side by side on one line.
func (b *builder) stats(ps ...*Panel) {
	b.newLine()
	w := 24 / len(ps)
	for _, p := range ps {
		b.add(w, 4, p)
	}
	b.newLine()
}

// q is a range query; legend is its series' legend format.
func q(expr, legend string) Target {
	return Target{Datasource: ds, Expr: expr, LegendFormat: legend, Range: true}
}

// targets numbers the targets' refIds A, B, C...
func targets(ts []Target) []Target {
	for i := range ts {
		ts[i].RefID = string(rune('A' + i))
	}
	return ts
}

var zero = 0.0

// timeseries is a time series panel in unit (a Grafana unit id such as
// "s", "mps" or "short"), from zero unless the values can be negative.
func timeseries(title, description, unit string, ts ...Target) *Panel {
	return &Panel{
		Type: "timeseries", Title: title, Description: description, Datasource: ds, Targets: targets(ts),
		FieldConfig: &FieldConfig{Overrides: []any{}, Defaults: FieldDefaults{Unit: unit, Min: &zero,
			Custom: map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
				"spanNulls": false, "stacking": map[string]any{"mode": "none", "group": "A"}}}},
		Options: map[string]any{
			"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true, "calcs": []string{}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// stacked is a time series panel whose series are stacked (parts of a
// whole, such as losses by reason).
func stacked(title, description, unit string, ts ...Target) *Panel {
	p := timeseries(title, description, unit, ts...)
	p.FieldConfig.Defaults.Custom["stacking"] = map[string]any{"mode": "normal", "group": "A"}
	p.FieldConfig.Defaults.Custom["fillOpacity"] = 40
	return p
}

// stat is a single-value panel showing the last value of its query, green
// below warn and red from it on (no thresholds when warn is nil).
func stat(title, description, unit string, warn *float64, t Target) *Panel {
	t.Range, t.Instant = false, true
	steps := []Step{{Color: "green"}}
	if warn != nil {
		steps = append(steps, Step{Color: "red", Value: warn})
	}
	return &Panel{
		Type: "stat", Title: title, Description: description, Datasource: ds, Targets: targets([]Target{t}),
		FieldConfig: &FieldConfig{Overrides: []any{}, Defaults: FieldDefaults{Unit: unit,
			Color:      map[string]any{"mode": "thresholds"},
			Thresholds: &Thresholds{Mode: "absolute", Steps: steps}}},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
			"textMode": "auto",
		},
	}
}

// rate is the per-second rate of a counter, summed by the given labels
// ("" sums everything).
func rate(metric, selector, by string) string {
	return sumBy(by, fmt.Sprintf("rate(%s%s[$__rate_interval])", metric, selector))
}

// increase is a counter's increase over the dashboard's time range, summed.
func increase(metric, selector string) string {
	return fmt.Sprintf("sum(increase(%s%s[$__range]))", metric, selector)
}

// sumBy sums expr by the labels (a comma-separated list; "" sums all).
func sumBy(by, expr string) string {
	if by == "" {
		return fmt.Sprintf("sum(%s)", expr)
	}
	return fmt.Sprintf("sum by (%s) (%s)", by, expr)
}

// quantile is the q-quantile of a histogram (metric without _bucket), over
// the series of selector, by the given labels besides le.
func quantile(q float64, metric, selector, by string) string {
	le := "le"
	if by != "" {
		le = by + ", le"
	}
	return fmt.Sprintf("histogram_quantile(%g, sum by (%s) (rate(%s_bucket%s[$__rate_interval])))", q, le, metric, selector)
}

// quantiles are the p50, p99 and p99.9 targets of a latency histogram.
func quantiles(metric string) []Target {
	return []Target{
		q(quantile(0.5, metric, byInstance, "instance"), "p50 {{instance}}"),
		q(quantile(0.99, metric, byInstance, "instance"), "p99 {{instance}}"),
		q(quantile(0.999, metric, byInstance, "instance"), "p99.9 {{instance}}"),
	}
}

func ptr(v float64) *float64 { return &v }

// natsRow adds the row of the NATS connection's state (natsconn.Metrics),
// which the feed handler and the subscriber both export: whether each
// instance is connected, its reconnects, and the server it is on.
func (b *builder) natsRow() {
	const nats = "tickcast_nats_"
	b.row("NATS")
	b.graph(timeseries("NATS connected", "1 while the instance's NATS connection is up. 0: recovery is unavailable (and a feed handler cannot reach the session record); see the runbook, \"NATS node down\".", "short",
		q(sumBy("instance", nats+"connected"+byInstance), "{{instance}}")))
	b.graph(timeseries("NATS reconnects", "Times the NATS connection came back after it was lost, per interval: a NATS node was lost or restarted and the client moved to another.", "short",
		q(`sum by (instance) (increase(`+nats+`reconnects_total`+byInstance+`[$__rate_interval]))`, "{{instance}}")))
	b.graph(timeseries("NATS server", "The NATS server each instance is connected to; a line that changes name is a client that moved to another node.", "short",
		q(sumBy("instance, server, url", nats+"server_info"+byInstance), "{{instance}} on {{server}} ({{url}})")))
}

// rdmaRow adds the RDMA transport's panels (tickcast_rdma_*, exported with
// --transport rdma only: empty otherwise): the port behind --iface, the
// events the transport observed, the rebuilds they caused, and the
// device's drop counters.
func (b *builder) rdmaRow() {
	const rdma = "tickcast_rdma_"
	b.row("RDMA (--transport rdma)")
	b.graph(timeseries("RDMA port active", "1 while the RDMA port behind --iface is ACTIVE, 0 when it is not (the state label says what sysfs reports; unknown: the device is gone). See the runbook, \"RDMA port down or transport broken\".", "short",
		q(sumBy("instance, device, port, state", rdma+"port_active"+byInstance), "{{instance}} {{device}}/{{port}} {{state}}")))
	b.graph(timeseries("RDMA events", "Device and rdma_cm events the transport observed, per interval: port_down and port_active (a link flap), and completion_error, qp_fatal, cq_error, multicast_error, device_fatal, device_removal (a queue pair or the device failed: the endpoint is torn down and rebuilt).", "short",
		q(`sum by (instance, event) (increase(`+rdma+`events_total`+byInstance+`[$__rate_interval])) > 0`, "{{instance}} {{event}}")))
	b.graph(timeseries("RDMA rebuilds", "Endpoints torn down after an event and opened again once the port was ACTIVE, per interval, and attempts that failed (rising failures: see the runbook, \"Rebuild failing\"). Each rebuild is an interruption the subscribers recover over NATS or report lost.", "short",
		q(`sum by (instance) (increase(`+rdma+`rebuilds_total`+byInstance+`[$__rate_interval]))`, "{{instance}} rebuilds"),
		q(`sum by (instance) (increase(`+rdma+`rebuild_failures_total`+byInstance+`[$__rate_interval]))`, "{{instance}} failed attempts")))
	b.graph(timeseries("RDMA device drops /s", "The device's counters of dropped or discarded packets (and mlx5's out_of_buffer: receives that found no receive posted), device-wide. A device without them (Soft-RoCE) shows nothing here, which is not zero.", "pps",
		q(rate(rdma+"port_drops_total", byInstance, "instance, device, counter"), "{{instance}} {{device}} {{counter}}")))
}
