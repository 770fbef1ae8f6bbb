package belay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// A worker is stopped with SIGSTOP at each interesting point of a run with
// one side effect: in the model call, after the intent is recorded and
// before the charge is sent, and after it is sent and before its answer is
// recorded; for each kind of tool (its downstream honours keys, it can be
// asked, or neither) and on both stores. Its lease is 1 s and it is stopped
// for 2.5 to 3.5 s, and until a second worker has taken the run over. The tool
// is well written: it waits on its context and checks it just before it
// sends, so a stopped worker that wakes past its lease sends nothing, even
// when the call's own timeout (4 s when A is stopped before the send) has
// not passed. The
// bank counts what lands. Each case must end with the run verified and one
// charge in the bank, and, for a tool that can neither be asked nor called
// again, no charge landing after the person (the test) decided it had not
// happened.
func TestZombieAtEveryPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes per case")
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, tool := range []toolKind{honorsKey, reconcile, neither} {
			for _, point := range []string{"model", "before-send", "after-send"} {
				t.Run(fmt.Sprintf("%s/%s/%s", kind, tool, point), func(t *testing.T) {
					t.Parallel()
					zombieCase(t, kind, tool, point)
				})
			}
		}
	}
}

// decision is a person's answer to an unknown outcome, as the test gave it.
type decision struct {
	at      time.Time
	epoch   int64
	applied bool
}

// zombieTries is how many times a SQLite case may be tried before a stop
// inside the file's write lock fails it. Under -race on two busy cores a
// lease renewal holds the lock for tens of milliseconds, and CI saw three
// stops in a row land inside one.
const zombieTries = 8

func zombieCase(t *testing.T, storeKind string, tool toolKind, point string) {
	for try := 1; !zombieAttempt(t, storeKind, tool, point, try == zombieTries); try++ {
		// SQLite's locks belong to the file: a process stopped inside a
		// write (a lease renewal, a few milliseconds of every third of a
		// second) holds every other process's writes until it continues.
		t.Logf("try %d: A was stopped holding the file's write lock, so no worker could take its run over; trying again", try)
	}
}

// zombieAttempt is one try of a case. It reports false, having let A go
// on, when the store is SQLite and B could not take the run over while A
// was stopped, unless last says this is the last try.
func zombieAttempt(t *testing.T, storeKind string, tool toolKind, point string, last bool) bool {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, st := faultStore(t, storeKind)
	bank := newFaultBank(t)
	cfg.Bank, cfg.TTL, cfg.Timeout, cfg.Tools = bank.srv.URL, time.Second, 2*time.Second, []toolKind{tool}
	cfg.ModelWait = [2]time.Duration{50 * time.Millisecond, 50 * time.Millisecond}
	switch point {
	case "model":
		cfg.ModelWait = [2]time.Duration{600 * time.Millisecond, 600 * time.Millisecond}
	case "before-send":
		cfg.WaitBefore = [2]time.Duration{600 * time.Millisecond, 600 * time.Millisecond}
		// Longer than the freeze: A's call is still within its own time
		// when A wakes, so only its lease can stop it from sending.
		cfg.Timeout = 4 * time.Second
	case "after-send":
		cfg.WaitAfter = [2]time.Duration{600 * time.Millisecond, 600 * time.Millisecond}
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "charger", User: "u", ClientRequestID: "order-1", Input: "charge the order"})
	if err != nil {
		t.Fatal(err)
	}

	aCfg := cfg
	aCfg.Name = "A"
	a := startFaultWorker(t, aCfg)
	if _, _, err := a.waitMark(ctx, 0, point); err != nil {
		t.Fatal(err)
	}
	a.freeze(ctx, t)
	stoppedAt := time.Now()
	held, err := st.GetRun(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}

	bCfg := cfg
	bCfg.Name = "B"
	b := startFaultWorker(t, bCfg)
	var (
		mu        sync.Mutex
		decisions []decision
	)
	personCtx, stopPerson := context.WithCancel(ctx)
	defer stopPerson()
	personDone := make(chan struct{})
	go func() {
		defer close(personDone)
		decide := func(r store.Run) {
			effs, err := st.Effects(ctx, "", r.ID)
			if err != nil || len(effs) == 0 {
				return
			}
			key := effs[0].Key
			applied := bank.has(key)
			d := decision{at: time.Now(), epoch: r.LeaseEpoch, applied: applied}
			if _, err := belay.ResolveOutcome(ctx, st, "", r.ID, belay.Outcome{Key: key, Applied: applied}, "human:test"); err == nil {
				mu.Lock()
				decisions = append(decisions, d)
				mu.Unlock()
			}
		}
		_ = testrun.WaitUntil(personCtx, func() bool {
			if r, err := st.GetRun(ctx, "", run.ID); err == nil && r.Status == store.StatusPaused && r.StopReason == "unknown_outcome" {
				decide(r)
			}
			return false
		})
	}()

	// A stays stopped for 2.5 to 3.5 s, and in any case until B has taken
	// the run over: on a loaded machine B may take longer than that to
	// start, and a freeze nobody took advantage of tests nothing.
	freeze := 2500*time.Millisecond + time.Duration(mathrand.Int64N(int64(time.Second)))
	var beforeCont store.Run
	takeoverCtx, cancelTakeover := context.WithTimeout(ctx, 15*time.Second)
	err = testrun.WaitUntil(takeoverCtx, func() bool {
		beforeCont, err = st.GetRun(ctx, "", run.ID)
		return err == nil && beforeCont.LeaseEpoch > held.LeaseEpoch
	})
	cancelTakeover()
	if err != nil && storeKind == "sqlite" && !last && ctx.Err() == nil {
		a.signal(t, syscall.SIGCONT)
		stopPerson()
		<-personDone
		return false
	}
	if err != nil {
		t.Fatalf("B never took the run over from the stopped A: %v; B:\n%s", err, b.tail())
	}
	takenOver := time.Now() // at the latest
	select {
	case <-time.After(time.Until(stoppedAt.Add(freeze))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	freeze = time.Since(stoppedAt)
	if beforeCont, err = st.GetRun(ctx, "", run.ID); err != nil {
		t.Fatal(err)
	}
	a.signal(t, syscall.SIGCONT)
	var finished store.Run
	if err := testrun.WaitUntil(ctx, func() bool {
		finished, err = st.GetRun(ctx, "", run.ID)
		return err == nil && finished.Status.Terminal()
	}); err != nil {
		t.Fatalf("run not finished: %s (%s: %s); A:\n%s\nB:\n%s", finished.Status, finished.StopReason, finished.StopDetail, a.tail(), b.tail())
	}
	// A, awake, finds the run no longer its, whatever it was doing.
	if err := testrun.WaitUntil(ctx, func() bool {
		return strings.Contains(a.tail(), "gave up the run") || strings.Contains(a.tail(), "lease lost")
	}); err != nil {
		t.Errorf("A never let go of the run it was stopped in: %v\n%s", err, a.tail())
	}
	stopPerson()
	<-personDone
	for _, p := range []*faultProc{a, b} {
		p.signal(t, syscall.SIGTERM)
		<-p.done
	}

	// The fault fired: B took the run over while A was stopped.
	if beforeCont.LeaseEpoch <= held.LeaseEpoch {
		t.Errorf("at SIGCONT the run was at epoch %d, as when A was stopped: nobody took it over", beforeCont.LeaseEpoch)
	}
	if finished.Status != store.StatusDone || finished.StopReason != "verified" {
		t.Errorf("run ended %s (%s: %s), want done and verified", finished.Status, finished.StopReason, finished.StopDetail)
	}
	landed := bank.ofRun(run.ID)
	if len(landed) != 1 {
		t.Errorf("%d charges landed, want 1: %+v", len(landed), landed)
	}
	for _, l := range landed {
		if point == "before-send" && l.By == "A" && l.Token == held.LeaseEpoch {
			t.Errorf("A sent its charge after it woke past its lease: %+v", l)
		}
		for _, d := range decisions {
			if !d.applied && l.At.After(d.at) && l.Token <= d.epoch {
				t.Errorf("a charge sent at epoch %d landed after the person decided at epoch %d that none had: %+v", l.Token, d.epoch, l)
			}
		}
	}
	if tool == neither && point != "model" && len(decisions) == 0 {
		t.Errorf("nobody was asked about the charge A left unknown")
	}
	events, err := st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	for _, e := range events {
		if e.Type == "effect_in_flight" {
			waits++
		}
	}
	// A's call was recorded before it stopped; taken over well within the
	// call's timeout, the run must have waited for it.
	if point != "model" && waits == 0 && takenOver.Add(500*time.Millisecond).Before(stoppedAt.Add(cfg.Timeout)) {
		t.Errorf("the worker that took the run over did not wait for A's call to be over")
	}
	by, _ := json.Marshal(landed)
	t.Logf("A stopped at %s (epoch %d) for %v; epoch %d at SIGCONT, %d at the end; %d waits for A's call; decisions %+v; landed %s",
		point, held.LeaseEpoch, freeze.Round(time.Millisecond), beforeCont.LeaseEpoch, finished.LeaseEpoch, waits, decisions, by)
	return true
}

// cutProxy forwards TCP connections to a server until it is cut: then it
// stops forwarding in both directions and holds the connections open, as a
// network that drops packets does, so the client's calls hang rather than
// fail.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    chan struct{}
	once   sync.Once
	closed chan struct{} // the test is over: held pipes end
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, cut: make(chan struct{}), closed: make(chan struct{})}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		close(p.closed)
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			open = append(open, client, server)
			mu.Unlock()
			conns.Add(2)
			go func() { defer conns.Done(); p.pipe(server, client) }()
			go func() { defer conns.Done(); p.pipe(client, server) }()
		}
	}()
	return p
}

// pipe copies from src to dst until either closes, and once the proxy is
// cut, forwards nothing more: what it read is held, not written.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.cut:
			<-p.closed // held until the test ends
			return
		default:
		}
		if err != nil {
			return
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *cutProxy) cutNow() { p.once.Do(func() { close(p.cut) }) }

// Worker A reaches PostgreSQL through a proxy of the test's own; as its
// charge waits to be sent (1.5 s, longer than its 1 s lease), the proxy
// stops forwarding: A's renewals hang instead of failing. Worker B,
// connected directly, takes the run over once A's lease has expired. A
// must send nothing: its lease runs out by its own clock although no
// renewal ever came back to say so.
func TestWorkerCutOffFromPostgresSendsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, st := faultStore(t, "postgres")
	bank := newFaultBank(t)
	cfg.Bank, cfg.TTL, cfg.Timeout, cfg.Tools = bank.srv.URL, time.Second, 4*time.Second, []toolKind{reconcile}
	cfg.WaitBefore = [2]time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "charger", User: "u", ClientRequestID: "order-1", Input: "charge the order"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	aCfg := cfg
	aCfg.Name, aCfg.DSN = "A", u.String()
	a := startFaultWorker(t, aCfg)
	if _, _, err := a.waitMark(ctx, 0, "before-send"); err != nil {
		t.Fatal(err)
	}
	proxy.cutNow()
	bCfg := cfg
	bCfg.Name = "B"
	b := startFaultWorker(t, bCfg)

	// A's call ends one way or the other within its 4 s.
	callCtx, cancelCall := context.WithTimeout(ctx, 10*time.Second)
	defer cancelCall()
	if err := testrun.WaitUntil(callCtx, func() bool { return a.marks("gave-up")+a.marks("after-send") > 0 }); err != nil {
		t.Fatalf("A's call neither gave up nor sent: %v", err)
	}
	if a.marks("gave-up") == 0 {
		t.Errorf("A did not give up its call")
	}
	var finished store.Run
	if err := testrun.WaitUntil(ctx, func() bool {
		finished, err = st.GetRun(ctx, "", run.ID)
		return err == nil && finished.Status.Terminal()
	}); err != nil {
		t.Fatalf("run not finished on B: %s (%s); B:\n%s", finished.Status, finished.StopDetail, b.tail())
	}
	b.signal(t, syscall.SIGTERM)
	<-b.done
	landed := bank.ofRun(run.ID)
	if len(landed) != 1 || landed[0].By != "B" {
		t.Errorf("charges %+v, want one, sent by B", landed)
	}
	if finished.Status != store.StatusDone || finished.StopReason != "verified" || finished.LeaseEpoch < 2 {
		t.Errorf("run ended %s (%s) at epoch %d, want done and verified on B", finished.Status, finished.StopReason, finished.LeaseEpoch)
	}
	if n := a.marks("after-send"); n != 0 {
		t.Errorf("A sent %d charges while cut off", n)
	}
	t.Logf("A gave up its call while cut off; B finished at epoch %d; landed %+v", finished.LeaseEpoch, landed)
}

// A fleet of four worker processes works hundreds of runs of three side
// effects each (one of each kind of tool), while the test stops random
// workers with SIGSTOP for 2 to 4 s and kills others with SIGKILL (and
// starts them again), and a person (the test) answers every outcome the
// runs leave unknown by looking at the bank. The bank, not Belay's records,
// says what happened: every run must end verified with each of its charges
// landed exactly once, and none landing after the person said it had not.
func TestFleetUnderFreezesAndKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet of worker processes")
	}
	for _, c := range []struct {
		store string
		runs  int
	}{{"postgres", 400}, {"sqlite", 200}} {
		t.Run(c.store, func(t *testing.T) {
			t.Parallel()
			fleetCase(t, c.store, c.runs)
		})
	}
}

func fleetCase(t *testing.T, storeKind string, runs int) {
	const workers = 4
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	cfg, st := faultStore(t, storeKind)
	bank := newFaultBank(t)
	bank.refuseLate = true
	cfg.Bank, cfg.TTL, cfg.Timeout = bank.srv.URL, time.Second, 1500*time.Millisecond
	cfg.Tools = []toolKind{reconcile, honorsKey, neither}
	cfg.Workers = 8
	cfg.ModelWait = [2]time.Duration{10 * time.Millisecond, 60 * time.Millisecond}
	cfg.WaitBefore = [2]time.Duration{50 * time.Millisecond, 300 * time.Millisecond}
	cfg.WaitAfter = [2]time.Duration{0, 80 * time.Millisecond}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, runs)
	for i := range runs {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "charger", User: "u", ClientRequestID: fmt.Sprintf("order-%d", i), Input: "charge the order"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = run.ID
	}

	procs := make([]*faultProc, workers)
	gen := 0
	launch := func(i int) {
		gen++
		c := cfg
		c.Name = fmt.Sprintf("w%d.%d", i, gen)
		procs[i] = startFaultWorker(t, c)
	}
	for i := range procs {
		launch(i)
	}

	var (
		mu        sync.Mutex
		decisions = map[string][]decision{}
	)
	// terminal reads only the runs not yet seen terminal, so the loop that
	// injects the faults comes round quickly however many runs there are.
	ended := map[string]bool{}
	terminal := func() (int, error) {
		for _, id := range ids {
			if ended[id] {
				continue
			}
			r, err := st.GetRun(ctx, "", id)
			if err != nil {
				return 0, err
			}
			switch {
			case r.Status.Terminal():
				ended[id] = true
			case r.Status == store.StatusPaused && r.StopReason == "unknown_outcome":
				effs, err := st.Effects(ctx, "", id)
				if err != nil {
					return 0, err
				}
				for _, e := range effs {
					if e.State != store.EffectPending && e.State != store.EffectUnknown {
						continue
					}
					d := decision{at: time.Now(), epoch: r.LeaseEpoch, applied: bank.has(e.Key)}
					if _, err := belay.ResolveOutcome(ctx, st, "", id, belay.Outcome{Key: e.Key, Applied: d.applied}, "human:test"); err == nil {
						mu.Lock()
						decisions[id] = append(decisions[id], d)
						mu.Unlock()
					}
					break
				}
			}
		}
		return len(ended), nil
	}

	// Faults, one every 1 to 2 s, on a worker that is running: half are
	// stops of 2 to 4 s, half are kills followed by a new process. A frozen
	// SQLite worker may hold the file's write lock and stop the fleet until
	// it goes on, so faults much closer together leave the runs too little
	// time to finish.
	freezes, kills := 0, 0
	frozen := make([]time.Time, workers) // until when a worker is stopped
	next := time.Now()
	start := time.Now()
	for {
		n, err := terminal()
		if err != nil {
			t.Fatal(err)
		}
		if n == runs {
			break
		}
		now := time.Now()
		for i, p := range procs {
			if !frozen[i].IsZero() && now.After(frozen[i]) {
				p.signal(t, syscall.SIGCONT)
				frozen[i] = time.Time{}
			}
			select {
			case <-p.done:
				t.Fatalf("%s exited on its own; stderr:\n%s", p.name, p.tail())
			default:
			}
		}
		if now.After(next) {
			i := mathrand.IntN(workers)
			if frozen[i].IsZero() {
				if mathrand.IntN(2) == 0 {
					procs[i].signal(t, syscall.SIGSTOP)
					frozen[i] = now.Add(2*time.Second + time.Duration(mathrand.Int64N(int64(2*time.Second))))
					freezes++
				} else {
					procs[i].signal(t, syscall.SIGKILL)
					<-procs[i].done
					launch(i)
					kills++
				}
			}
			next = now.Add(time.Second + time.Duration(mathrand.Int64N(int64(time.Second))))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %v, %d freezes and %d kills, %d of %d runs are terminal", time.Since(start).Round(time.Second), freezes, kills, n, runs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	for i, p := range procs {
		if !frozen[i].IsZero() {
			p.signal(t, syscall.SIGCONT)
		}
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		<-p.done
	}

	bad, takeovers, waits, attempts := 0, 0, 0, 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, id := range ids {
		r, err := st.GetRun(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.StatusDone || r.StopReason != "verified" {
			report("run %s ended %s (%s: %s)", id, r.Status, r.StopReason, r.StopDetail)
		}
		if r.LeaseEpoch > 1 {
			takeovers++
		}
		perTool := map[string]int{}
		for _, l := range bank.ofRun(id) {
			perTool[l.Tool]++
			for _, d := range decisions[id] {
				if !d.applied && l.At.After(d.at) && l.Token <= d.epoch {
					report("run %s: %s sent at epoch %d landed after the person decided at epoch %d that it had not", id, l.Tool, l.Token, d.epoch)
				}
			}
		}
		for _, tool := range []string{"charge_1_reconcile", "charge_2_honors", "charge_3_neither"} {
			if perTool[tool] != 1 {
				report("run %s: %s landed %d times, want once", id, tool, perTool[tool])
			}
		}
		events, err := st.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Type == "effect_in_flight" {
				waits++
			}
		}
		effs, err := st.Effects(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range effs {
			attempts += e.Attempts
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more", bad-10)
	}
	answered := 0
	for _, ds := range decisions {
		answered += len(ds)
	}
	bank.mu.Lock()
	late := bank.late
	bank.mu.Unlock()
	t.Logf("%d runs (%d effects) on %s in %v: %d stops of 2-4 s, %d kills; %d runs taken over, %d waits for a predecessor's call, %d calls sent, %d refused by the bank as late, %d outcomes a person answered",
		runs, 3*runs, storeKind, elapsed.Round(time.Second), freezes, kills, takeovers, waits, attempts, late, answered)
	if freezes < 5 || kills < 5 || takeovers < 10 {
		t.Errorf("%d stops, %d kills, %d takeovers: the faults did not reach the runs often enough for the test to mean much", freezes, kills, takeovers)
	}
}
