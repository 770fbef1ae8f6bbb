package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// runSay replies to a run that asked its user a question (an agent with a
// conversation, through its ask_user tool). A worker then claims the run
// and goes on with the reply.
const sayUsage = `usage: belay say RUN TEXT [--key K] [--as WHO] [--db PATH]

Replies to a run that waits for its user (status waiting_input): the run goes on
with TEXT as the answer to the question it asked. With --key the reply is
idempotent: sent again with the same key and text it changes nothing.`

func runSay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("say", sayUsage, stdout)
	db := dbFlag(fs)
	key := fs.String("key", "", "idempotency key: the same key and text sent again change nothing")
	as := fs.String("as", "", "who replies, recorded on the wait (default: user:<the run's user>)")
	asJSON := jsonFlag(fs, "the wait the reply answered, one object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{fmt.Sprintf("say: want a run and the reply's text, got %d arguments (%s; list runs with: belay runs --status waiting_input)", len(pos), fs.usageLine())}
	}
	runID, text := pos[0], pos[1]
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := getRun(ctx, st, db, runID); err != nil {
		return err
	}
	said, err := belay.NewOperator(st).Say(ctx, belay.AnyTenant, runID, belay.Reply{Text: text, Key: *key, By: *as})
	switch {
	case errors.Is(err, store.ErrNotWaiting), errors.Is(err, store.ErrWaitExpired):
		return fmt.Errorf("%w (see the run with: belay show %s %s)", err, runID, db)
	case err != nil:
		return err
	}
	if *asJSON {
		return writeJSON(stdout, map[string]any{"run_id": said.Wait.RunID, "wait_id": said.Wait.ID,
			"answered_by": said.Wait.AnsweredBy, "answered_at": said.Wait.AnsweredAt.UTC(), "repeated": said.Repeated})
	}
	if said.Repeated {
		fmt.Fprintf(stdout, "run %s had this reply already (key %s); nothing changed\n", runID, *key)
		return nil
	}
	fmt.Fprintf(stdout, "replied to run %s: %q\nthe next worker on %s continues it\n", runID, strings.TrimSpace(text), db.Name())
	return nil
}
