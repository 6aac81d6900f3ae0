package check

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edictlog/edictlog/jepsen/history"
)

// visualize writes the visualization of all keys, with the nemesis's
// faults as annotations.
func visualize(ops []history.Op, byKey map[string][]porcupine.Operation, keys []string, opts RegisterOptions) error {
	var all []porcupine.Operation
	for _, k := range keys {
		all = append(all, byKey[k]...)
	}
	model := registerModel(true)
	_, info := porcupine.CheckOperationsVerbose(model, all, opts.Timeout)
	var notes []porcupine.Annotation
	for _, iv := range history.Intervals(ops) {
		notes = append(notes, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           iv.Start,
			End:             iv.End,
			Description:     iv.Nemesis,
			Details:         fmt.Sprintf("%s: %s [%v, %v]", iv.Nemesis, iv.Detail, time.Duration(iv.Start), time.Duration(iv.End)),
			BackgroundColor: "#f8d7da",
		})
	}
	info.AddAnnotations(notes)
	if err := porcupine.VisualizePath(model, info, opts.VisualizationPath); err != nil {
		return fmt.Errorf("check: writing visualization: %w", err)
	}
	return nil
}
