package server

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/text"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
	"github.com/go-json-experiment/json/jsontext"
)

//go:embed console/*.html
var templateFS embed.FS

//go:embed console/static
var staticFS embed.FS

// page is what every console page renders with.
type page struct {
	Title     string
	Nav       string
	Principal Principal
	Pending   int
	// Live names the view the page's live updates watch, and Version its
	// state when rendered; empty for pages that do not update.
	Live string
	// Follow, on a run's page, is the run's event stream after the last
	// event the page shows: the page follows it instead of Live.
	Follow  string
	Version string
	Flash   string
	Error   string
	Data    any
}

type pageHandler func(w http.ResponseWriter, r *http.Request, p Principal) (*page, error)

func (s *Server) consoleRoutes() (map[string]http.Handler, error) {
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"usd":      func(n int64) string { return fmt.Sprintf("$%.4f", model.Nanodollars(n).Dollars()) },
		"ago":      ago,
		"when":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"until":    until,
		"pretty":   prettyJSON,
		"humanize": humanize,
		"plain":    plainValue,
		"pct":      func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"clip":     func(n int, s string) string { return text.Clip(s, n) },
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"exact":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
		"reason":   reasonLabel,
		"why":      reasonWords,
		"detail":   detailWords,
		"sentence": func(s string) string {
			if s == "" {
				return s
			}
			return strings.ToUpper(s[:1]) + s[1:]
		},
		// words says a status as a person reads it: waiting approval.
		"words": func(s any) string { return strings.ReplaceAll(fmt.Sprint(s), "_", " ") },
		"who":   who,
		"args":  func(raw json.RawMessage) string { return plainArgs(raw, 300) },
	}).ParseFS(templateFS, "console/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	s.tmpl = tmpl
	static, err := fs.Sub(staticFS, "console/static")
	if err != nil {
		return nil, err
	}
	staticHandler := http.StripPrefix("/console/static/", http.FileServerFS(static))
	return map[string]http.Handler{
		"GET /console/static/":                   cacheFor(staticHandler, time.Hour),
		"GET /console/login":                     http.HandlerFunc(s.loginPage),
		"POST /console/login":                    http.HandlerFunc(s.login),
		"POST /console/logout":                   http.HandlerFunc(s.logout),
		"GET /console/{$}":                       s.page(s.queuePage, approvers...),
		"GET /console/approvals/{id}":            s.page(s.approvalPage, approvers...),
		"POST /console/approvals/{id}/decision":  s.page(s.decisionForm, approvers...),
		"GET /console/runs":                      s.page(s.runsPage, readers...),
		"GET /console/runs/{id}":                 s.page(s.runPage, readers...),
		"GET /console/runs/{id}/events":          http.HandlerFunc(s.followRunPage),
		"GET /console/questions":                 s.page(s.questionsPage, readers...),
		"POST /console/runs/{id}/results/{call}": s.page(s.answerForm, readers...),
		"POST /console/runs/{id}/cancel":         s.page(s.cancelForm, operators...),
		"GET /console/stats":                     s.page(s.statsPage, readers...),
		"GET /console/replay":                    s.page(s.replayPage, operators...),
		"POST /console/replay":                   s.page(s.replayFormPost, operators...),
		"GET /console/live":                      http.HandlerFunc(s.live),
		"GET /console/": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.renderStatus(w, r, http.StatusNotFound, "Not found", "There is no such page.")
		}),
	}, nil
}

func cacheFor(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

// page signs a console request in by its session cookie, checks its roles,
// and renders what h returns.
func (s *Server) page(h pageHandler, roles ...store.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.session(r)
		if !ok {
			next := r.URL.Path
			if r.Method != http.MethodGet {
				next = "/console/"
			}
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if !p.Has(roles...) {
			s.renderStatus(w, r, http.StatusForbidden, "Not allowed",
				fmt.Sprintf("Your key's roles (%s) do not allow this page; it needs one of: %s.", joinRoles(p.Roles), joinRoles(roles)))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		err := parseForm(r)
		var pg *page
		if err == nil {
			pg, err = h(w, r, p)
		}
		if err != nil {
			ae := classify(err)
			if ae.status >= 500 {
				s.cfg.Logger.Error("console", "path", r.URL.Path, "err", err)
			}
			title := http.StatusText(ae.status)
			s.renderStatus(w, r, ae.status, title, ae.Message)
			return
		}
		if pg == nil {
			return // h answered itself (a redirect)
		}
		pg.Principal = p
		if p.Has(approvers...) {
			if as, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant, Status: store.ApprovalPending, Limit: 1000}); err == nil {
				pg.Pending = len(as)
			}
		}
		s.render(w, http.StatusOK, pg.Nav, pg)
	})
}

func (s *Server) render(w http.ResponseWriter, status int, name string, pg *page) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name+".html", pg); err != nil {
		s.cfg.Logger.Error("render", "page", name, "err", err)
		http.Error(w, "the page failed to render; the server log has the details", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func (s *Server) renderStatus(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	p, _ := s.session(r)
	s.render(w, status, "status", &page{Title: title, Nav: "status", Principal: p, Error: msg})
}

// --- sign in ---

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "login", &page{Title: "Sign in", Nav: "login", Data: safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a redirect target on the console: an absolute URL or a
// path elsewhere would make the sign-in page an open redirect.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/console/"
	}
	return next
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := parseForm(r); err != nil {
		ae := classify(err)
		s.render(w, ae.status, "login", &page{Title: "Sign in", Nav: "login", Data: "/console/", Error: ae.Message})
		return
	}
	next := safeNext(r.PostFormValue("next"))
	p, err := s.verifyKey(r.Context(), strings.TrimSpace(r.PostFormValue("key")))
	if err != nil {
		s.render(w, http.StatusUnauthorized, "login", &page{Title: "Sign in", Nav: "login", Data: next,
			Error: "That key is not valid: it is mistyped, revoked, or was never created. Create one with: belay keys create --tenant T --role approver"})
		return
	}
	if err := s.startSession(w, r, p); err != nil {
		s.cfg.Logger.Error("start session", "err", err)
		s.renderStatus(w, r, http.StatusInternalServerError, "Sign-in failed", "The session could not be saved; the server log has the details.")
		return
	}
	if next == "/console/" && !p.Has(approvers...) {
		next = "/console/runs"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.endSession(w, r)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// --- approvals ---

// card is an approval as a person decides it: what, why, and the context.
type card struct {
	Approval store.Approval
	Run      store.Run
	// Args are the call's arguments with sensitive values redacted, in
	// plain words and as JSON for an edit.
	Args     []field
	ArgsJSON string
	// Prior are the side effects the run has applied, Earlier those of
	// the customer's other runs; Evidence what the run's reads returned.
	Prior    []store.Effect
	Earlier  []earlierEffect
	Evidence []evidence
	// Repeats are the earlier effects on the same business object as the
	// call (console_repeat.go), and RepeatHeadline the warning they make.
	Repeats        []earlierEffect
	RepeatHeadline string
	Self           bool
	// Editable is false where this server does not serve the call's tool:
	// an edit could not be checked against it.
	Editable bool
}

// earlierEffects bounds how many of a customer's side effects a card
// shows: enough to catch a repeat, few enough to read.
const earlierEffects = 20

// earlierEffect is a side effect of another of the customer's runs, as a
// card shows it: its arguments redacted and in plain words, like the call
// to decide.
type earlierEffect struct {
	Tool  string
	Args  []field
	State store.EffectState
	RunID string
	// At is when the call was begun, the order the list is in.
	At time.Time
	// Summary says what the call did; Same names the business object it
	// shares with the call to decide, if any.
	Summary string
	Same    string
	// redacted are the call's arguments as Args shows them.
	redacted json.RawMessage
}

type field struct{ Name, Value string }

type evidence struct{ Tool, Args, Result string }

func (s *Server) card(r *http.Request, p Principal, a store.Approval) (card, error) {
	run, err := s.st.GetRun(r.Context(), p.Tenant, a.RunID)
	if err != nil {
		return card{}, err
	}
	args := s.rt.RedactRunArgs(run, a.Tool, a.Args)
	c := card{Approval: a, Run: run, Args: fields(args), ArgsJSON: prettyJSON(args),
		Self: run.RequestedBy != "" && run.RequestedBy == p.Identity() && !a.SelfApproval, Editable: s.rt.Serves(run.Agent, a.Tool)}
	c.Approval.Args = args
	effects, err := s.st.Effects(r.Context(), p.Tenant, run.ID)
	if err != nil {
		return card{}, err
	}
	for _, e := range effects {
		if e.State == store.EffectDone {
			e.Args = s.rt.RedactRunArgs(run, e.Tool, e.Args)
			c.Prior = append(c.Prior, e)
		}
	}
	if c.Earlier, err = s.customerEffects(r, p.Tenant, run); err != nil {
		return card{}, err
	}
	s.markRepeats(&c, args)
	msgs, err := s.messages(r, run)
	if err != nil {
		return card{}, err
	}
	c.Evidence = gathered(msgs)
	return c, nil
}

// customerEffects lists what Belay did, or may have done, for the run's
// customer in their other runs, newest first: a refund of the same invoice
// yesterday makes today's a double refund. A run for no one in particular
// has no customer to look up.
func (s *Server) customerEffects(r *http.Request, tenant string, run store.Run) ([]earlierEffect, error) {
	if run.User == "" {
		return nil, nil
	}
	es, err := s.st.CustomerEffects(r.Context(), store.CustomerEffectsParams{
		Tenant: tenant, User: run.User, ExceptRun: run.ID, Limit: earlierEffects})
	if err != nil {
		return nil, err
	}
	var out []earlierEffect
	for _, e := range es {
		// Redacted by what the run that made the call recorded, as the
		// run's own effects are by theirs.
		args := s.rt.RedactRunArgs(store.Run{ID: e.RunID, Agent: e.Agent, Sensitive: e.Sensitive}, e.Tool, e.Args)
		out = append(out, earlierEffect{Tool: e.Tool, Args: fields(args), State: e.State, RunID: e.RunID, At: e.CreatedAt,
			Summary: s.summarize(e.Agent, e.Tool, args), redacted: args})
	}
	return out, nil
}

// gathered pairs each call of the run with what it returned: the evidence
// the agent acted on.
func gathered(msgs []messageView) []evidence {
	results := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == model.TypeToolResult {
				results[b.ToolUseID] = b.Content
			}
		}
	}
	var out []evidence
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type != model.TypeToolUse {
				continue
			}
			res, ok := results[b.ID]
			if !ok {
				continue
			}
			out = append(out, evidence{Tool: b.Name, Args: compactJSON(b.Input), Result: text.Clip(res, 400)})
		}
	}
	return out
}

func (s *Server) queuePage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	as, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant, Status: store.ApprovalPending, Limit: 200})
	if err != nil {
		return nil, err
	}
	var cards []card
	for _, a := range as {
		c, err := s.card(r, p, a)
		if err != nil {
			return nil, err
		}
		cards = append(cards, c)
	}
	version, err := s.version(r, p, "queue")
	if err != nil {
		return nil, err
	}
	return &page{Title: "Approvals", Nav: "queue", Live: "queue", Version: version, Data: cards}, nil
}

func (s *Server) approvalPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	a, err := s.st.GetApproval(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	c, err := s.card(r, p, a)
	if err != nil {
		return nil, err
	}
	live := "run:" + a.RunID
	version, err := s.version(r, p, live)
	if err != nil {
		return nil, err
	}
	return &page{Title: "Approval " + a.ID, Nav: "approval", Live: live, Version: version, Data: c}, nil
}

// decisionForm takes a decision from an approval card. The card carries
// the approval's binding, so a decision holds only for what was shown.
func (s *Server) decisionForm(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	// A form, unlike a JSON body, may carry bytes that are not UTF-8, which
	// PostgreSQL would refuse in the note's text column.
	req := decisionRequest{Decision: r.PostFormValue("decision"), Binding: r.PostFormValue("binding"),
		Note: strings.ToValidUTF8(strings.TrimSpace(r.PostFormValue("note")), "\uFFFD")}
	if req.Decision == "edit" {
		req.Arguments = json.RawMessage(strings.TrimSpace(r.PostFormValue("arguments")))
		// IsValid holds JSON to RFC 7493, which refuses a name given twice,
		// as the API's bodies do.
		if !jsontext.Value(req.Arguments).IsValid() {
			return s.cardWithError(r, p, "The edited arguments are not valid JSON, or name a field twice.")
		}
	}
	if err := req.validate(); err != nil {
		return s.cardWithError(r, p, classify(err).Message)
	}
	a, _, err := s.applyDecision(r, p, req)
	if err != nil {
		ae := classify(err)
		if ae.status == http.StatusNotFound {
			return nil, err
		}
		return s.cardWithError(r, p, ae.Message)
	}
	http.Redirect(w, r, "/console/runs/"+a.RunID+"?decided="+a.ID, http.StatusSeeOther)
	return nil, nil
}

func (s *Server) cardWithError(r *http.Request, p Principal, msg string) (*page, error) {
	pg, err := s.approvalPage(nil, r, p)
	if err != nil {
		return nil, err
	}
	pg.Error = msg
	return pg, nil
}

// --- runs ---

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	q := r.URL.Query()
	params := store.ListRunsParams{Tenant: p.Tenant, After: q.Get("after"), Limit: 51, Newest: true}
	if st := q.Get("status"); slices.Contains(statuses, store.Status(st)) {
		params.Status = store.Status(st)
	}
	runs, err := s.st.ListRuns(r.Context(), params)
	if err != nil {
		return nil, err
	}
	data := struct {
		Runs     []store.Run
		Next     string
		Status   string
		Statuses []store.Status
	}{Status: string(params.Status), Statuses: statuses}
	if len(runs) > 50 {
		runs = runs[:50]
		data.Next = runs[49].ID
	}
	data.Runs = runs
	version, err := s.version(r, p, "runs")
	if err != nil {
		return nil, err
	}
	return &page{Title: "Runs", Nav: "runs", Live: "runs", Version: version, Data: data}, nil
}

type runData struct {
	Run        store.Run
	Cards      []card
	Decided    []store.Approval
	Timeline   []timelineEntry
	Messages   []messageView
	Effects    []effectView
	Escalation *packetView
	CanCancel  bool
	Waits      []waitView
	// Questions are the run's pending questions the viewer may answer.
	Questions []questionCard
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return nil, err
	}
	d := runData{Run: run, CanCancel: !run.Status.Terminal() && p.Has(operators...)}
	as, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant, RunID: run.ID})
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.Status == store.ApprovalPending && p.Has(approvers...) {
			c, err := s.card(r, p, a)
			if err != nil {
				return nil, err
			}
			d.Cards = append(d.Cards, c)
			continue
		}
		a.Args = s.rt.RedactRunArgs(run, a.Tool, a.Args)
		if len(a.EditedArgs) > 0 {
			a.EditedArgs = s.rt.RedactRunArgs(run, a.Tool, a.EditedArgs)
		}
		d.Decided = append(d.Decided, a)
	}
	events, err := s.st.Events(r.Context(), run.ID)
	if err != nil {
		return nil, err
	}
	d.Timeline = timelineOf(events)
	if d.Messages, err = s.messages(r, run); err != nil {
		return nil, err
	}
	effects, err := s.st.Effects(r.Context(), p.Tenant, run.ID)
	if err != nil {
		return nil, err
	}
	d.Effects = s.effectViews(run, effects)
	if d.Waits, d.Questions, err = s.waitViews(r.Context(), p, run); err != nil {
		return nil, err
	}
	if len(run.Escalation) > 0 {
		p := packet(run.Escalation)
		d.Escalation = &p
	}
	live := "run:" + run.ID
	version, err := s.version(r, p, live)
	if err != nil {
		return nil, err
	}
	pg := &page{Title: "Run " + run.ID, Nav: "run", Live: live, Version: version, Data: d}
	if !run.Status.Terminal() {
		var after int64
		if len(events) > 0 {
			after = events[len(events)-1].Seq
		}
		pg.Follow = fmt.Sprintf("/console/runs/%s/events?after=%d", url.PathEscape(run.ID), after)
	}
	if call := r.URL.Query().Get("answered"); call != "" {
		for _, w := range d.Waits {
			if w.CallID == call && w.Status == store.WaitAnswered {
				pg.Flash = "Answer recorded by " + w.By + "."
			}
		}
	}
	if id := r.URL.Query().Get("decided"); id != "" {
		for _, a := range as {
			if a.ID == id && a.Status != store.ApprovalPending {
				pg.Flash = fmt.Sprintf("Decision recorded: %s (%s) by %s.", a.Status, a.Summary, a.DecidedBy)
			}
		}
	}
	return pg, nil
}

func (s *Server) cancelForm(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	// The field allows 2000 characters and the API 2000 bytes: a longer
	// note is cut to the bytes rather than the cancel refused, at a
	// character's edge, since PostgreSQL refuses text that is not UTF-8.
	note := text.Cut(strings.ToValidUTF8(strings.TrimSpace(r.PostFormValue("note")), "\uFFFD"), 2000)
	run, err := s.rt.Operator().Cancel(r.Context(), p.Tenant, r.PathValue("id"), p.Identity(), note)
	if err != nil {
		return nil, err
	}
	http.Redirect(w, r, "/console/runs/"+run.ID, http.StatusSeeOther)
	return nil, nil
}

// --- stats ---
