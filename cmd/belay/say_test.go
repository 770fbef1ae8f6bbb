package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
)

// askingAgent asks its user one question, then answers.
func askingAgent() *belay.Agent {
	return &belay.Agent{Name: "asking", Version: "v1", Conversation: &belay.Conversation{},
		Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: belay.AskUserTool,
			Args: map[string]string{"question": "Card or store credit?"}}}}, scripted.Reply{Text: "refunded"})}
}

func TestSayRefusals(t *testing.T) {
	f := newFixture(t)
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"say", f.done, "card", "--db", f.db}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "not waiting") || !strings.Contains(err.Error(), "is done") ||
		!strings.Contains(err.Error(), "belay show "+f.done) {
		t.Errorf("say to a done run: %v; want it refused, saying the run is done and how to look", err)
	}
	if err := run(t.Context(), []string{"say", f.done, "--db", f.db}, &out, &errb); err == nil || !strings.Contains(err.Error(), "want a run and the reply's text") {
		t.Errorf("say without text: %v", err)
	}
	if err := run(t.Context(), []string{"say", "run_nope", "card", "--db", f.db}, &out, &errb); err == nil {
		t.Error("say to no run succeeded")
	}
}
