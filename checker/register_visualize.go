package checker

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// registerVisualize writes porcupine's HTML visualization of every key, with the
// nemesis events as annotations on their own row. Its search runs within the check's
// bounds; when they have run out already, a moment's search still gives a page, with
// partial orders. When they run out during it the page is written as far as it got,
// and the error says the page is partial; when ctx ends, no page is written.
func registerVisualize(init registerState, h *registerHist, b *searchBounds, opt RegisterOptions) error {
	stop := &b.stop
	spent := b.stopped()
	if spent {
		stop = new(atomic.Bool)
		defer time.AfterFunc(time.Millisecond, func() { stop.Store(true) }).Stop()
	}
	model := registerPorcupineModel(init, stop)
	// porcupine's search of a long history costs memory quadratic in each key's length:
	// it gets a budget of steps, as an explanation does, and the page shows the orders
	// found within it.
	total := 0
	for _, key := range h.keys {
		total += len(h.byKey[key])
	}
	budget, steps := int64(registerExplainSteps(total)), atomic.Int64{}
	var overBudget atomic.Bool
	step := model.Step
	model.Step = func(state, input, output any) (bool, any) {
		if steps.Add(1) > budget {
			overBudget.Store(true)
			return false, state
		}
		return step(state, input, output)
	}
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
	_, info := porcupine.CheckOperationsVerbose(vm, all, 0)
	if b.reason() == boundContext {
		return fmt.Errorf("visualization not written: the check was interrupted")
	}
	info.AddAnnotations(registerAnnotations(h))
	// porcupine steps the model again through the orders it found to draw them, and
	// panics on a refusal: the page is drawn with the model that never refuses.
	var never atomic.Bool
	plain := registerPorcupineModel(init, &never)
	plain.Partition = vm.Partition
	vm = plain
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
	switch {
	case !spent && b.stopped():
		return fmt.Errorf("the visualization is partial: %s while it was drawn", b.ranOut())
	case overBudget.Load():
		return fmt.Errorf("the visualization is partial: the %d operations are too many for porcupine to draw every order it tries", total)
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
