package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// belay fork makes a fork of a run with its lineage, says how to look at
// it, and refuses a missing or impossible step with what to do.
func TestForkCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	fork := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append([]string{"fork", "--db", f.db}, args...), &out, &errb)
		return out.String(), err
	}
	var ue usageError
	if _, err := fork(f.done); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--at-step N") {
		t.Errorf("fork without --at-step: %v, want a usage error naming --at-step", err)
	}
	if _, err := fork(f.done, "--at-step", "1", "--append"); !errors.As(err, &ue) {
		t.Errorf("fork --append without --message: %v, want a usage error", err)
	}
	if _, err := fork("run_nope", "--at-step", "0"); err == nil || !strings.Contains(err.Error(), "run run_nope not found") {
		t.Errorf("fork of an unknown run: %v", err)
	}
	if _, err := fork(f.done, "--at-step", "9"); err == nil || !strings.Contains(err.Error(), "fork it at a step from 0 to 2") {
		t.Errorf("fork past the run's steps: %v", err)
	}
	out, err := fork(f.done, "--at-step", "1", "--as", "human:fran", "--reason", "check the refund", "--message", "refund A2 instead")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^run (run_\w+) forked from ` + f.done + ` at step 1 and queued: `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("fork printed %q", out)
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := store.Forker(st).Lineage(ctx, "", m[1])
	if err != nil || l.ParentRunID != f.done || l.AtStep != 1 || l.By != "human:fran" || l.Reason != "check the refund" {
		t.Errorf("lineage of the fork: %+v, %v", l, err)
	}
	var shown bytes.Buffer
	if err := run(ctx, []string{"show", m[1], "--db", f.db}, &shown, &shown); err != nil ||
		!strings.Contains(shown.String(), "from "+f.done+" at its step 1, by human:fran: check the refund") {
		t.Errorf("show of the fork: %v\n%s", err, shown.String())
	}
	forked, err := st.GetRun(ctx, "", m[1])
	if err != nil || forked.Input != "refund A2 instead" || forked.RequestedBy != "human:fran" || forked.Step != 1 || forked.Messages != 3 {
		t.Errorf("the fork: %+v, %v", forked, err)
	}
}
