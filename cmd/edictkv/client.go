package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// client is what every client subcommand shares: the node to talk to.
type client struct {
	addr    string
	timeout time.Duration
	asJSON  bool
	stdout  io.Writer
}

func clientFlags(name string, stderr io.Writer) (*flag.FlagSet, *client) {
	fs := newFlags(name, stderr)
	c := &client{}
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8001", "HTTP address of any edictkv process")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "how long to wait for an answer")
	fs.BoolVar(&c.asJSON, "json", false, "print the server's JSON answer")
	return fs, c
}

// errRemote is an error answer from the server.
type errRemote struct {
	status int
	body   kvjson.ErrorJSON
}

func (e *errRemote) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.body.Code, e.body.Error)
}

// do sends a request and decodes a 2xx answer into out; any other answer
// becomes an *errRemote carrying the server's explanation.
func (c *client) do(method, path string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	base := c.addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &errRemote{status: resp.StatusCode}
		if json.Unmarshal(raw, &e.body) != nil || e.body.Error == "" {
			e.body.Error = strings.TrimSpace(string(raw))
		}
		return e
	}
	if c.asJSON {
		_, err := c.stdout.Write(raw)
		return err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
		}
	}
	return nil
}

func keyPath(key string) string { return "/v1/kv/" + url.PathEscape(key) }

// oneArg parses flags and exactly n positional arguments.
func parseArgs(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != len(names) {
		fmt.Fprintf(fs.Output(), "want arguments: %s\n", strings.Join(names, " "))
		return nil, errUsage
	}
	return fs.Args(), nil
}

func runGet(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("get", stderr)
	consistency := fs.String("consistency", "follower", "read level: follower (linearizable, answered by the process asked), lease (linearizable, at the leader) or stale")
	revision := fs.Int64("revision", 0, "read at this revision (log index); 0: the current one")
	pos, err := parseArgs(fs, args, "<key>")
	if err != nil {
		return err
	}
	c.stdout = stdout
	q := url.Values{"consistency": {*consistency}}
	if *revision != 0 {
		q.Set("revision", strconv.FormatInt(*revision, 10))
	}
	var g kvjson.GetResponse
	if err := c.do(http.MethodGet, keyPath(pos[0])+"?"+q.Encode(), nil, &g); err != nil || c.asJSON {
		return err
	}
	if g.Value != nil {
		fmt.Fprintln(stdout, *g.Value)
	} else {
		fmt.Fprintln(stdout, g.ValueBase64)
	}
	return nil
}

func runPut(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("put", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	var value []byte
	switch fs.NArg() {
	case 1:
		var err error
		if value, err = io.ReadAll(os.Stdin); err != nil {
			return fmt.Errorf("reading the value from stdin: %w", err)
		}
	case 2:
		value = []byte(fs.Arg(1))
	default:
		fmt.Fprintln(stderr, "want arguments: <key> [value]")
		return errUsage
	}
	return c.write(http.MethodPut, keyPath(fs.Arg(0)), value)
}

func (c *client) write(method, path string, value []byte) error {
	var w kvjson.WriteResponse
	if err := c.do(method, path, bytes.NewReader(value), &w); err != nil || c.asJSON {
		return err
	}
	fmt.Fprintf(c.stdout, "OK index=%d\n", w.Index)
	return nil
}

func runDel(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("del", stderr)
	pos, err := parseArgs(fs, args, "<key>")
	if err != nil {
		return err
	}
	c.stdout = stdout
	return c.write(http.MethodDelete, keyPath(pos[0]), nil)
}

func runCAS(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("cas", stderr)
	index := fs.Int64("index", -1, "expected mod index of the key (0: the key must not exist)")
	prev := fs.String("prev", "", "expected current value")
	pos, err := parseArgs(fs, args, "<key>", "<value>")
	if err != nil {
		return err
	}
	c.stdout = stdout
	prevSet := false
	fs.Visit(func(f *flag.Flag) { prevSet = prevSet || f.Name == "prev" })
	var q string
	switch {
	case *index >= 0 && prevSet:
		return errors.New("give --index or --prev, not both")
	case *index >= 0:
		q = "?cas=" + strconv.FormatInt(*index, 10)
	case prevSet:
		q = "?prev=" + url.QueryEscape(*prev)
	default:
		return errors.New("give --index N (0: create only) or --prev VALUE")
	}
	return c.write(http.MethodPut, keyPath(pos[0])+q, []byte(pos[1]))
}

func runMembers(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("members", stderr)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	var cl kvjson.ClusterJSON
	if err := c.do(http.MethodGet, "/v1/cluster", nil, &cl); err != nil || c.asJSON {
		return err
	}
	lease := "-"
	if cl.LeaseRemainingMS != nil {
		lease = fmt.Sprintf("%dms", *cl.LeaseRemainingMS)
	}
	fmt.Fprintf(stdout, "epoch %d, leader %d (lease remaining %s)\n", cl.Epoch, cl.Leader, lease)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tHTTP\tCOMMIT\tAPPLIED\tLAST\tMATCH\tSTATUS")
	for _, m := range cl.Members {
		match := "-"
		if m.Match != nil {
			match = strconv.FormatUint(*m.Match, 10)
		}
		if m.Status == nil {
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t%s\t%s\n", m.ID, m.Role, m.HTTPAddr, match, m.StatusError)
			continue
		}
		s := m.Status
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", m.ID, m.Role, m.HTTPAddr, s.Commit, s.Applied, s.LastIndex, match, readyWord(s.Ready))
	}
	return tw.Flush()
}

func readyWord(ok bool) string {
	if ok {
		return "ready"
	}
	return "not ready"
}

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("status", stderr)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	c.asJSON = true // the status is small and every field matters
	return c.do(http.MethodGet, "/v1/status", nil, nil)
}

// admin posts a JSON body to a cluster endpoint and prints the answer.
func (c *client) admin(path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	c.asJSON = true
	return c.do(http.MethodPost, path, bytes.NewReader(b), nil)
}

func runTransfer(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("transfer-leader", stderr)
	to := fs.Uint64("to", 0, "the member to hand leadership to (0: the most up-to-date)")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	return c.admin("/v1/cluster/transfer", kvjson.TransferRequest{ID: *to})
}

func runAddLearner(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("add-learner", stderr)
	id := fs.Uint64("id", 0, "the new process's id")
	raft := fs.String("raft-addr", "", "its transport address")
	httpAddr := fs.String("http-addr", "", "its HTTP address")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	return c.admin("/v1/cluster/learners", kvjson.LearnerRequest{ID: *id, RaftAddr: *raft, HTTPAddr: *httpAddr})
}

func runPromote(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("promote", stderr)
	id := fs.Uint64("id", 0, "the learner to promote")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	return c.admin("/v1/cluster/promote", kvjson.MemberRequest{ID: *id})
}

func runRemove(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("remove", stderr)
	id := fs.Uint64("id", 0, "the member or learner to remove")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	return c.admin("/v1/cluster/remove", kvjson.MemberRequest{ID: *id})
}

// runRecover is forced recovery: it must be run against every survivor
// with the same list, and only when the processes left out are dead for
// good. It refuses to run without --confirm.
func runRecover(args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlags("recover", stderr)
	survivors := fs.String("survivors", "", "comma-separated ids of the surviving processes")
	confirm := fs.Bool("confirm", false, "confirm that the processes left out are dead for good and that acknowledged writes may be lost")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	c.stdout = stdout
	if !*confirm {
		return errors.New("forced recovery starts a new epoch from the survivors alone: if a process left out is alive, two clusters may accept writes, and acknowledged writes can be lost. Run it on every survivor with the same --survivors, and add --confirm")
	}
	var ids []uint64
	for _, s := range strings.Split(*survivors, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("--survivors %q: want positive ids separated by commas", *survivors)
		}
		ids = append(ids, id)
	}
	return c.admin("/v1/cluster/recover", kvjson.RecoverRequest{Survivors: ids, Confirm: kvjson.ConfirmRecovery})
}
