package checker

import (
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// registerVisualize writes porcupine's HTML visualization of every key, with the
// nemesis events as annotations on their own row.
func registerVisualize(model porcupine.Model, h *registerHist, deadline time.Time, opt RegisterOptions) error {
	var all []porcupine.Operation
	for _, key := range h.keys {
		all = append(all, h.porcupineOps(key)...)
	}
	vm := model
	vm.Partition = func(ops []porcupine.Operation) [][]porcupine.Operation {
		// Keys in sorted order, so that the page lists them the way the result does.
		var parts [][]porcupine.Operation
		var cur string
		for i, op := range ops {
			key := op.Metadata.(*registerOp).key
			if i == 0 || key != cur {
				parts = append(parts, nil)
				cur = key
			}
			parts[len(parts)-1] = append(parts[len(parts)-1], op)
		}
		return parts
	}
	timeout, ok := registerRemaining(deadline)
	if !ok {
		// Out of time: a moment's search still gives a page, with partial orders.
		timeout = time.Millisecond
	}
	_, info := porcupine.CheckOperationsVerbose(vm, all, timeout)
	info.AddAnnotations(registerAnnotations(h))
	if opt.Visualize != nil {
		if err := porcupine.Visualize(vm, info, opt.Visualize); err != nil {
			return fmt.Errorf("write visualization: %w", err)
		}
	}
	if opt.VisualizePath != "" {
		f, err := os.Create(opt.VisualizePath)
		if err != nil {
			return fmt.Errorf("write visualization: %w", err)
		}
		if err := porcupine.Visualize(vm, info, f); err != nil {
			f.Close()
			return fmt.Errorf("write visualization %s: %w", opt.VisualizePath, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write visualization %s: %w", opt.VisualizePath, err)
		}
	}
	return nil
}

// registerAnnotations marks each nemesis event at its place in the history. A nemesis
// invocation followed by a completion of the same function (Jepsen's nemesis logs
// :invoke :start then :info :start) becomes one annotation spanning both.
func registerAnnotations(h *registerHist) []porcupine.Annotation {
	out := make([]porcupine.Annotation, 0, len(h.nemesis))
	open := map[string]int{} // F → index in out of an invocation awaiting completion
	for i, ev := range h.nemesis {
		details := fmt.Sprintf("event %d, %s", ev.Index, ev.Type)
		if len(ev.Value) > 0 {
			details += "; value " + string(ev.Value)
		}
		if ev.Conn != "" {
			details += "; connection " + ev.Conn
		}
		if ev.Error != "" {
			details += "; " + ev.Error
		}
		if j, ok := open[ev.F]; ok && ev.Type != histories.Invoke {
			delete(open, ev.F)
			out[j].End = h.nemPos[i]
			out[j].Details += "\n" + details
			continue
		}
		desc := ev.F
		if desc == "" {
			desc = "nemesis"
		}
		if ev.Type == histories.Invoke {
			open[ev.F] = len(out)
		}
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           h.nemPos[i],
			Description:     desc,
			Details:         details,
			BackgroundColor: "#f6d3c9",
		})
	}
	return out
}
