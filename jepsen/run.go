// Package jepsen runs Jepsen-style tests of edictkv: real processes
// (jepsen/cluster), real faults on a schedule (jepsen/nemesis), clients
// that record what every answer proves (jepsen/workload, jepsen/history),
// and checkers that can fail (jepsen/check), with a report a person can
// read (jepsen/report).
//
// A run writes to Options.Out: history.jsonl (every operation and fault,
// and what the monitor saw of the leader), results.json (the verdict,
// anomalies, leaderless intervals, membership changes, counts),
// linearizability.html (porcupine's visualization, register workload),
// latency.png and throughput.png (fault intervals and leaderless ones
// shaded) and the nodes' logs in nodes/. A run is valid only if it is safe
// and available: a leader within Options.LeaderBound of every fault's end,
// every member ready within Options.ReadyBound of the final heal.
package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
	"github.com/edictlog/edictlog/jepsen/nemesis"
	"github.com/edictlog/edictlog/jepsen/report"
	"github.com/edictlog/edictlog/jepsen/workload"
)

// Options describe one test.
type Options struct {
	Nodes    int           // default 5
	Time     time.Duration // how long the workload and nemesis run (default 60s)
	Nemeses  []string      // see nemesis.ByName; none: no faults
	Workload string        // register (default), set or watch
	// Read is the register workload's read level: lease (default),
	// follower or stale.
	Read string
	// Strict checks every read as linearizable, stale ones included: the
	// control that shows the checker catches stale reads.
	Strict bool
	// WatchSkipOnReconnect is the watch checker's negative control: every
	// watcher leaves out the first event after its first reconnect, and
	// the run must be invalid.
	WatchSkipOnReconnect bool
	Out                  string
	// Mode is netns, portable, or auto (netns as root, else portable).
	Mode          string
	Clients, Keys int
	Seed          uint64
	Quiet, Hold   time.Duration // nemesis cadence (defaults 3s and 6s)
	Lease         time.Duration // --lease of every node (zero: edictkv's default)
	// SnapshotEvery is every node's --snapshot-every (zero: edictkv's
	// default, 8192; 128 with the snapshot-install nemesis, so that the
	// log is compacted past a member cut off for a few seconds).
	SnapshotEvery uint64
	Rho           float64       // the drift bound the nodes run with (default 0.001)
	Binary        string        // edictkv built with -tags jepsen; built into Out if empty
	RepoRoot      string        // where to build it from (default ".")
	CheckTimeout  time.Duration // porcupine's limit (default 2m)
	// LeaderBound is how soon after a fault ends a node must lead again
	// (and the longest a cluster may go without a leader between faults);
	// ReadyBound how soon after the final heal every member must be ready.
	// Defaults check.DefaultLeaderBound (5s) and DefaultReadyBound (10s).
	// A run that breaks either is "unavailable".
	LeaderBound, ReadyBound time.Duration
	Progress                io.Writer // progress lines (optional)
	ClusterLogging          io.Writer // the cluster's own log (optional)

	watchSkipped int64 // what the negative control left out, for the results
}

func (o *Options) defaults() error {
	if o.Nodes <= 0 {
		o.Nodes = 5
	}
	if o.Time <= 0 {
		o.Time = 60 * time.Second
	}
	if o.Workload == "" {
		o.Workload = "register"
	}
	if o.Read == "" {
		o.Read = "lease"
	}
	if o.Mode == "" || o.Mode == "auto" {
		o.Mode = string(cluster.ModePortable)
		if os.Geteuid() == 0 {
			o.Mode = string(cluster.ModeNetns)
		}
	}
	if o.Clients <= 0 {
		o.Clients = 10
	}
	if o.Keys <= 0 {
		o.Keys = 8
	}
	if o.Quiet <= 0 {
		o.Quiet = 3 * time.Second
	}
	if o.Hold <= 0 {
		o.Hold = 6 * time.Second
	}
	if o.Rho <= 0 {
		o.Rho = 1e-3
	}
	if o.RepoRoot == "" {
		o.RepoRoot = "."
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 2 * time.Minute
	}
	if o.LeaderBound <= 0 {
		o.LeaderBound = check.DefaultLeaderBound
	}
	if o.ReadyBound <= 0 {
		o.ReadyBound = check.DefaultReadyBound
	}
	if o.SnapshotEvery == 0 && slices.ContainsFunc(o.Nemeses, nemesis.InstallsSnapshots) {
		o.SnapshotEvery = defaultSnapshotEvery
	}
	switch {
	case o.Out == "":
		return errors.New("jepsen: Options.Out is required")
	case !slices.Contains([]string{"register", "set", "watch"}, o.Workload):
		return fmt.Errorf("jepsen: unknown workload %q (register, set or watch)", o.Workload)
	case !slices.Contains([]string{"lease", "follower", "stale"}, o.Read):
		return fmt.Errorf("jepsen: unknown read level %q (lease, follower or stale)", o.Read)
	case o.Mode != string(cluster.ModeNetns) && o.Mode != string(cluster.ModePortable):
		return fmt.Errorf("jepsen: unknown mode %q (auto, netns or portable)", o.Mode)
	}
	return nil
}

// finalReadsUnready bounds the final phase's reads when a member was not
// ready after the final heal (the run is unavailable already).
const finalReadsUnready = 10 * time.Second

// defaultSnapshotEvery is --snapshot-every under the nemeses that catch
// members up by snapshot (snapshot-install, member-slow-disk): small, so
// that the log (which keeps 1024 entries behind a snapshot) is compacted
// past a member after a few seconds of writes.
const defaultSnapshotEvery = 128

// The run's verdicts (Results.Verdict).
const (
	VerdictValid       = "valid"       // safe, and available within the bounds
	VerdictInvalid     = "invalid"     // a checker found an anomaly (not safe), or a process could not start or crashed
	VerdictUnavailable = "unavailable" // safe as far as the checker saw, but a bound on availability was broken
	VerdictUnknown     = "unknown"     // the checker could not decide
)

// Results is results.json.
type Results struct {
	// Verdict is the run's: VerdictValid only if the history is safe
	// (Valid) and available (Availability.Valid).
	Verdict string `json:"verdict"`
	// Valid is the safety checker's verdict (register or set).
	Valid check.Validity `json:"valid"`
	// Availability: leaderless intervals, readiness after the final heal,
	// the bounds and whether they held.
	Availability check.AvailabilityResult `json:"availability"`
	// Processes lists the processes that could not start (after a kill,
	// a bounce, a restart) or exited on their own: each makes the run
	// invalid.
	Processes check.ProcessResult `json:"processes"`
	// Membership counts the membership changes the nemesis completed
	// (nil: no membership nemesis ran).
	Membership *nemesis.MembershipCounts `json:"membership,omitempty"`
	Workload   string                    `json:"workload"`
	Read       string                    `json:"read,omitempty"`
	Strict     bool                      `json:"strict,omitempty"`
	Nemeses    []string                  `json:"nemeses"`
	Mode       string                    `json:"mode"`
	// Nodes is how many processes the cluster started with.
	Nodes int `json:"nodes"`
	// Seed is the seed of the operation mix and the fault choices: the
	// same seed makes the same choices (what the cluster does is its own).
	Seed     uint64                `json:"seed"`
	Seconds  float64               `json:"seconds"`
	Register *check.RegisterResult `json:"register,omitempty"`
	Set      *check.SetResult      `json:"set,omitempty"`
	Watch    *check.WatchResult    `json:"watch,omitempty"`
	// WatchSkipped counts the events the negative control left out
	// (Options.WatchSkipOnReconnect).
	WatchSkipped int64              `json:"watch_skipped,omitempty"`
	Stats        report.Stats       `json:"stats"`
	Faults       []history.Interval `json:"faults"`
	// Nemesis is every start, step and stop of the nemesis, in order.
	Nemesis []NemesisEvent `json:"nemesis_log,omitempty"`
	// SnapshotEvery is the nodes' --snapshot-every (0: edictkv's default).
	SnapshotEvery uint64 `json:"snapshot_every,omitempty"`
	// Snapshots counts snapshot streams from the nodes' logs.
	Snapshots *cluster.SnapshotCounts `json:"snapshots,omitempty"`
}

// NemesisEvent is one of the nemesis's events in results.json.
type NemesisEvent struct {
	Ms      float64 `json:"ms"` // since the test began
	Nemesis string  `json:"nemesis"`
	F       string  `json:"f"`
	Detail  string  `json:"detail,omitempty"`
}

// Run runs one test and writes its report. The error is for a test that
// could not run; an anomaly is Results.Valid == check.Invalid, a process
// that could not start or crashed Results.Processes.Valid ==
// check.Invalid, a broken availability bound Results.Availability.Valid
// == check.Invalid, and Results.Verdict says which.
func Run(ctx context.Context, o Options) (Results, error) {
	if err := o.defaults(); err != nil {
		return Results{}, err
	}
	faults, err := nemesisFaults(o)
	if err != nil {
		return Results{}, err
	}
	// A run's nodes start from empty data directories: reusing an old
	// report folder would start them from its state.
	if _, err := os.Stat(filepath.Join(o.Out, "history.jsonl")); err == nil {
		return Results{}, fmt.Errorf("jepsen: %s already holds a run; choose another --out", o.Out)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Results{}, err
	}
	if o.Binary == "" {
		o.Binary = filepath.Join(o.Out, "edictkv")
		o.progress("building edictkv with the fault hooks")
		if err := cluster.Build(ctx, o.RepoRoot, o.Binary); err != nil {
			return Results{}, err
		}
	}
	hf, err := os.Create(filepath.Join(o.Out, "history.jsonl"))
	if err != nil {
		return Results{}, err
	}
	defer hf.Close()

	cl, err := startCluster(ctx, o)
	if err != nil {
		return Results{}, err
	}
	defer cl.close()
	o.progress("%d nodes up (%s mode), leader %d; running %s for %v with nemesis %v, seed %d",
		o.Nodes, o.Mode, cl.leaderOrZero(ctx), o.Workload, o.Time, o.Nemeses, o.Seed)

	rec := history.NewRecorder(hf)
	cl.record(rec)
	// The monitor watches who leads from now until the final reads are
	// done.
	monCtx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	monDone := make(chan struct{})
	go cl.monitor(monCtx, rec, monDone)
	cfg := workload.Config{Clients: o.Clients, Targets: cl.targets, Seed: o.Seed}
	reg := &workload.Register{Config: cfg, Keys: o.Keys, Level: o.Read}
	set := &workload.Set{Config: cfg}
	watch := &workload.Watch{Config: cfg, Keys: o.Keys, GRPCTargets: cl.grpcTargets, SkipOnReconnect: o.WatchSkipOnReconnect}
	defer watch.Stop()

	runCtx, stop := context.WithTimeout(ctx, o.Time)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		switch o.Workload {
		case "register":
			reg.Run(runCtx, rec)
		case "set":
			set.Run(runCtx, rec)
		case "watch":
			watch.Run(runCtx, rec)
		}
	}()
	nemDone := make(chan error, 1)
	go func() {
		if len(faults) == 0 {
			<-runCtx.Done()
			nemDone <- nil
			return
		}
		s := &nemesis.Schedule{Faults: faults, Quiet: o.Quiet, Hold: o.Hold, LeaderWait: o.LeaderBound, Seed: o.Seed, Logf: o.progress}
		nemDone <- s.Run(runCtx, cl, rec)
	}()
	progressDone := make(chan struct{})
	go o.reportProgress(runCtx, rec, progressDone)
	<-done
	nemErr := <-nemDone
	<-progressDone
	if nemErr != nil {
		o.progress("nemesis: %v", nemErr)
	}

	if err := ctx.Err(); err != nil {
		_ = rec.Flush()
		return Results{}, fmt.Errorf("jepsen: interrupted (history so far in %s): %w", o.Out, err)
	}
	// The final phase: everything healed, every member ready (within the
	// bound, which the checker judges), every node caught up, and what
	// each holds read.
	o.progress("healing and reading the final state")
	// A node that cannot start is the product's failure, recorded for the
	// checker; only the harness's own failures to heal end the test here.
	healed, err := cl.healAll(ctx)
	if err != nil {
		return Results{}, fmt.Errorf("jepsen: heal: %w", err)
	}
	if healed == "" {
		healed = "nothing was left in force"
	}
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FHeal, Nemesis: "heal",
		Detail: fmt.Sprintf("every fault undone (%s); members %v", healed, cl.Members())})
	// Wait past the bound, to say how late a member was, up to a point.
	readyLimit := max(2*o.ReadyBound, o.ReadyBound+10*time.Second)
	allReady := cl.waitReady(ctx, rec, readyLimit)
	finalLimit := 60 * time.Second
	if !allReady {
		// The run is unavailable; waiting longer for a leader, or for
		// final reads that time out one by one, would only delay the
		// report.
		o.progress("warning: not every member was ready %v after the final heal; final reads limited to %v", readyLimit, finalReadsUnready)
		finalLimit = finalReadsUnready
	}
	fctx, cancel := context.WithTimeout(ctx, finalLimit)
	defer cancel()
	if allReady {
		if err := cl.waitConverged(fctx); err != nil {
			o.progress("warning: %v", err)
		}
	}
	switch o.Workload {
	case "register":
		reg.FinalReads(fctx, rec, "follower", -2)
	case "set":
		if err := set.FinalReads(fctx, rec, cl.grpcTargets(), -2); err != nil {
			return Results{}, err
		}
	case "watch":
		o.progress("final read, every member's replay of the history, watchers catching up")
		if err := watch.Final(fctx, rec, -2); err != nil {
			o.progress("warning: %v", err)
		}
		st := watch.Stats()
		o.progress("watchers: %d, %d reconnects; negative control: %d events left out", st.Watchers, st.Reconnects, st.Skipped)
		o.watchSkipped = st.Skipped
	}
	stopMonitor()
	<-monDone
	if err := rec.Flush(); err != nil {
		return Results{}, fmt.Errorf("jepsen: history: %w", err)
	}
	snaps, err := cl.c.SnapshotCounts()
	if err != nil {
		o.progress("warning: counting snapshots in the node logs: %v", err)
	}
	o.progress("snapshot streams (from the node logs): %d installed %v, %d refused, %d failed, %d received",
		snaps.Installed, snaps.InstalledTo, snaps.Refused, snaps.Failed, snaps.Received)
	return o.check(rec.Ops(), &snaps)
}

func nemesisFaults(o Options) ([]nemesis.Fault, error) {
	if len(o.Nemeses) == 0 {
		return nil, nil
	}
	lease := o.Lease
	if lease == 0 {
		lease = 420 * time.Millisecond // edictkv's default
	}
	return nemesis.ByName(o.Nemeses, o.Rho, lease)
}

// check runs the checker and writes the report.
func (o Options) check(ops []history.Op, snaps *cluster.SnapshotCounts) (Results, error) {
	res := Results{Workload: o.Workload, Nemeses: o.Nemeses, Mode: o.Mode, Nodes: o.Nodes, Seed: o.Seed,
		Stats: report.Summary(ops), Faults: history.Intervals(ops), SnapshotEvery: o.SnapshotEvery, Snapshots: snaps}
	for _, op := range ops {
		if op.Process == history.NemesisProcess {
			res.Nemesis = append(res.Nemesis, NemesisEvent{Ms: float64(op.Time) / 1e6, Nemesis: op.Nemesis, F: op.F, Detail: op.Detail})
		}
	}
	if len(ops) > 0 {
		res.Seconds = float64(ops[len(ops)-1].Time) / 1e9
	}
	res.Availability = check.Availability(ops, check.AvailabilityOptions{LeaderBound: o.LeaderBound, ReadyBound: o.ReadyBound})
	res.Processes = check.Processes(ops)
	if slices.ContainsFunc(o.Nemeses, nemesis.IsMembership) {
		m := nemesis.CountMembership(ops)
		res.Membership = &m
	}
	if o.Workload == "register" {
		res.Read, res.Strict = o.Read, o.Strict
		levels := []string{"lease", "follower"}
		if o.Strict {
			levels = nil // every read, stale ones too
		}
		o.progress("checking linearizability (porcupine, limit %v)", o.CheckTimeout)
		r, err := check.Register(ops, check.RegisterOptions{Timeout: o.CheckTimeout, Levels: levels,
			VisualizationPath: filepath.Join(o.Out, "linearizability.html")})
		if err != nil {
			o.progress("warning: %v", err)
		}
		res.Register, res.Valid = &r, r.Valid
	} else if o.Workload == "set" {
		s := check.Set(ops)
		res.Set, res.Valid = &s, s.Valid
	} else {
		o.progress("checking the watchers against the committed history")
		w := check.Watch(ops)
		res.Watch, res.Valid, res.WatchSkipped = &w, w.Valid, o.watchSkipped
	}
	res.Verdict = verdict(res.Valid, res.Processes.Valid, res.Availability.Valid)
	var errs []error
	errs = append(errs, report.Latency(ops, filepath.Join(o.Out, "latency.png")),
		report.Throughput(ops, filepath.Join(o.Out, "throughput.png"), time.Second))
	b, err := json.MarshalIndent(res, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(o.Out, "results.json"), append(b, '\n'), 0o644)
	}
	errs = append(errs, err)
	return res, errors.Join(errs...)
}

// verdict combines the safety, process and availability verdicts: an
// anomaly or a process that could not start (or crashed) first, then a
// broken availability bound, then anything undecided. A process that
// could not start is the product's failure however the checker of the
// others' history decides, so it is invalid even where safety is unknown.
func verdict(safety, processes, availability check.Validity) string {
	switch {
	case safety == check.Invalid || processes == check.Invalid:
		return VerdictInvalid
	case availability == check.Invalid:
		return VerdictUnavailable
	case safety == check.Valid && availability == check.Valid:
		return VerdictValid
	}
	return VerdictUnknown
}

// ExitCode is the jepsen command's exit status for a verdict: 0 valid, 1
// invalid or unavailable (the product failed), 2 unknown (the test could
// not decide).
func ExitCode(verdict string) int {
	switch verdict {
	case VerdictValid:
		return 0
	case VerdictInvalid, VerdictUnavailable:
		return 1
	}
	return 2
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "jepsen: "+format+"\n", args...)
	}
}

// reportProgress prints one line every 5 seconds while the test runs.
func (o Options) reportProgress(ctx context.Context, rec *history.Recorder, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counts := map[history.Type]int{}
		fault, leader := "none", "?"
		for _, op := range rec.Ops() {
			switch {
			case op.Process == history.MonitorProcess && op.F == history.FLeader && op.Node == 0:
				leader = "none"
			case op.Process == history.MonitorProcess && op.F == history.FLeader:
				leader = fmt.Sprint(op.Node)
			case op.Process == history.NemesisProcess && op.F == history.FStart:
				fault = op.Nemesis + " (" + op.Detail + ")"
			case op.Process == history.NemesisProcess && op.F == history.FStop:
				fault = "none"
			case op.Client() && op.Type != history.Invoke:
				counts[op.Type]++
			}
		}
		o.progress("t=%4.0fs ok=%d fail=%d info=%d leader: %s fault: %s", time.Since(rec.Start()).Seconds(),
			counts[history.OK], counts[history.Fail], counts[history.Info], leader, fault)
	}
}
