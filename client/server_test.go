package client_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// testServer is a real Belay server over a SQLite store in a temporary
// directory, serving the support desk with a scripted model: what the
// examples and tests call.
type testServer struct {
	URL   string
	dir   string
	st    *sqlite.Store
	world *support.World
	rt    *belay.Runtime
	http  *httptest.Server
}

func startServer() (*testServer, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "belay-client-")
	if err != nil {
		return nil, err
	}
	ts := &testServer{dir: dir}
	if ts.st, err = sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{}); err != nil {
		ts.Close()
		return nil, err
	}
	if ts.world, err = support.OpenWorld(ctx, filepath.Join(dir, "world.db")); err != nil {
		ts.Close()
		return nil, err
	}
	if err := ts.world.Seed(ctx); err != nil {
		ts.Close()
		return nil, err
	}
	agent := support.NewAgent(ts.world, scripted.Func(support.Script()))
	if ts.rt, err = belay.New(belay.Config{Store: ts.st, Agents: []*belay.Agent{agent, conciergeAgent(), settlingAgent()}, HumanApproval: true}); err != nil {
		ts.Close()
		return nil, err
	}
	srv, err := server.New(server.Config{Runtime: ts.rt, Store: ts.st})
	if err != nil {
		ts.Close()
		return nil, err
	}
	ts.http = httptest.NewServer(srv)
	ts.URL = ts.http.URL
	return ts, nil
}

// key creates an API key of tenant acme and returns it whole.
func (ts *testServer) key(name string, roles ...store.Role) string {
	k, err := server.CreateKey(context.Background(), ts.st, "acme", name, roles, time.Now())
	if err != nil {
		panic(err)
	}
	return k.Secret
}

// work runs every run that is due until it stops, as a worker of belay
// serve would.
func (ts *testServer) work() {
	if err := ts.rt.Drain(context.Background()); err != nil {
		panic(err)
	}
}

func (ts *testServer) Close() {
	if ts.http != nil {
		ts.http.Close()
	}
	if ts.world != nil {
		ts.world.Close()
	}
	if ts.st != nil {
		ts.st.Close()
	}
	os.RemoveAll(ts.dir)
}
