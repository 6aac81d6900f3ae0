package compactor

import (
	"github.com/edictlog/edictlog"
)

// Node is the log as Watch follows it (edictlog.Node).
type Node interface {
	Status() edictlog.Status
	Observe(ch chan<- edictlog.Event, filter func(edictlog.Event) bool) *edictlog.Observer
}

// Watch keeps c's leadership that of node's Status (IsLeader: this
// process leads a reign under its lease) from now until the returned
// function is called, which returns once the watch has ended. It follows
// the log's leadership events (BecameLeader, SteppedDown, LeaderChanged)
// as wake-ups, re-reading Status at each: with room for one event, none
// is missed (see edictlog.Observer).
func Watch(node Node, c *Compactor) (stop func()) {
	events := make(chan edictlog.Event, 1)
	obs := node.Observe(events, func(ev edictlog.Event) bool {
		switch ev.Kind {
		case edictlog.BecameLeader, edictlog.SteppedDown, edictlog.LeaderChanged, edictlog.Stopped:
			return true
		}
		return false
	})
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer obs.Cancel()
		follow(events, quit, func() bool { return node.Status().IsLeader }, c)
	}()
	return func() {
		close(quit)
		<-done
	}
}

// follow sets c's leadership from leading now and at every wake-up, until
// quit is closed or the log stops.
func follow(wake <-chan edictlog.Event, quit <-chan struct{}, leading func() bool, c *Compactor) {
	for {
		c.SetLeading(leading())
		select {
		case <-quit:
			return
		case ev := <-wake:
			if ev.Kind == edictlog.Stopped {
				c.SetLeading(false)
				return
			}
		}
	}
}
