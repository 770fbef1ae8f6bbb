package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"
)

//go:embed query/listen.sql
var listenSQL string

// ErrClosed is returned by Wakeups called after Close.
var ErrClosed = errors.New("postgres store closed")

// wakeup is the payload of a notification on the belay_wakeup channel, as
// run_wakeup.sql and run_requeue_stopped.sql build it. Every schema of the
// database notifies on the same channel; Schema tells them apart.
type wakeup struct {
	Schema string `json:"schema"`
	Tenant string `json:"tenant"`
	// Run is empty when a tenant's runs became due at once.
	Run string `json:"run,omitempty"`
}

// Reconnection backoff of a Wakeups listener: it retries at once, then
// waits twice as long after each failure, up to the maximum.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 10 * time.Second
)

type listener struct {
	cancel context.CancelFunc
}

// Wakeups listens for runs of this store's schema becoming due and returns a
// channel that receives a value soon after each: a run created, resumed,
// requeued by a released kill switch, or let go by a checkpoint while still
// due. Values coalesce: the channel holds at most one, which may stand for
// many wakeups. The listener is active when Wakeups returns.
//
// Wakeups are hints, never the only path: a worker must also poll, with
// backoff, for what nobody notifies (a paused run's resume_after passing, an
// expired lease) and for what was lost. The listener holds a connection of
// its own, outside the pool; when it fails (the server restarted, the
// network dropped, TCP keepalive found the peer gone) notifications sent
// meanwhile are lost, and the listener reconnects with backoff and then
// sends a value so that the worker polls at once.
//
// The listener's goroutine exits and closes the channel when ctx ends or the
// Store is closed.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("wakeups: %w", ErrClosed)
	}
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("wakeups: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &listener{cancel: cancel}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		closeConn(conn)
		return nil, fmt.Errorf("wakeups: %w", ErrClosed)
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()

	ch := make(chan struct{}, 1)
	go s.listenLoop(ctx, l, conn, ch)
	return ch, nil
}

// listen opens a connection outside the pool and listens on belay_wakeup.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// listenLoop is a listener's goroutine. It owns conn, which is nil while it
// reconnects.
func (s *Store) listenLoop(ctx context.Context, l *listener, conn *pgx.Conn, ch chan<- struct{}) {
	defer s.wg.Done()
	defer close(ch)
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.cancel()
	}()
	retry := listenRetryMin
	for {
		if conn == nil {
			c, err := s.listen(ctx)
			if err != nil {
				if !sleep(ctx, retry) {
					return
				}
				retry = min(2*retry, listenRetryMax)
				continue
			}
			conn, retry = c, listenRetryMin
			signal(ch)
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			closeConn(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if s.ours(n.Payload) {
			signal(ch)
		}
	}
}

// ours reports whether a notification's payload concerns this store's
// schema.
func (s *Store) ours(payload string) bool {
	var w wakeup
	return json.Unmarshal([]byte(payload), &w) == nil && w.Schema == s.schema
}

// signal sends on ch unless a value is already waiting there.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeConn closes a listener's connection, waiting at most a second for
// the server to hear of it.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
}
