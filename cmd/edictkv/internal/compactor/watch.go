package compactor

import (
	"github.com/edictlog/edictlog/log"
)

// Node is the log as Watch follows it (log.Node).
type Node interface {
	Status() log.Status
	Observe(ch chan<- log.Event, filter func(log.Event) bool) *log.Observer
}

// Watch keeps c's leadership that of node's Status (IsLeader: this
// process leads a reign under its lease) from now until the returned
// function is called, which returns once the watch has ended. It follows
// the log's leadership events (BecameLeader, SteppedDown, LeaderChanged)
// as wake-ups, re-reading Status at each: with room for one event, none
// is missed (see log.Observer).
func Watch(node Node, c *Compactor) (stop func()) {
	events := make(chan log.Event, 1)
	obs := node.Observe(events, func(ev log.Event) bool {
		switch ev.Kind {
		case log.BecameLeader, log.SteppedDown, log.LeaderChanged, log.Stopped:
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
func follow(wake <-chan log.Event, quit <-chan struct{}, leading func() bool, c *Compactor) {
	for {
		c.SetLeading(leading())
		select {
		case <-quit:
			return
		case ev := <-wake:
			if ev.Kind == log.Stopped {
				c.SetLeading(false)
				return
			}
		}
	}
}
