package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/bucket_get.sql
	bucketGetSQL string
	//go:embed query/bucket_put.sql
	bucketPutSQL string
	//go:embed query/bucket_drain.sql
	bucketDrainSQL string
)

var _ store.RateLimiter = (*Store)(nil)

// TakeFromBuckets takes units from every bucket of p, or from none, in one
// write: the writer is the store's only one, so no other take interleaves.
func (s *Store) TakeFromBuckets(ctx context.Context, p store.TakeFromBucketsParams) (store.BucketAnswer, error) {
	if err := p.Check(); err != nil {
		return store.BucketAnswer{}, fmt.Errorf("take from buckets: %w", err)
	}
	var answer store.BucketAnswer
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		var next []store.Bucket
		var err error
		if answer, next, err = askBuckets(ctx, tx, p); err != nil {
			return err
		}
		return putBuckets(ctx, tx, next)
	})
	if err != nil {
		return store.BucketAnswer{}, fmt.Errorf("take from buckets: %w", err)
	}
	return answer, nil
}

// askBuckets reads p's buckets in tx and says whether the take would be
// admitted, and the states to store if it is, writing nothing.
func askBuckets(ctx context.Context, tx *writeTx, p store.TakeFromBucketsParams) (store.BucketAnswer, []store.Bucket, error) {
	cur := make([]store.Bucket, len(p.Takes))
	found := make([]bool, len(p.Takes))
	for i, t := range p.Takes {
		var updated, blocked int64
		err := tx.QueryRowContext(ctx, bucketGetSQL, sql.Named("name", t.Name)).Scan(&cur[i].Tokens, &updated, &blocked)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return store.BucketAnswer{}, nil, err
		}
		cur[i].Updated, cur[i].BlockedUntil, found[i] = sqlrow.Time(updated), sqlrow.Time(blocked), true
	}
	answer, next := store.Take(p, cur, found)
	return answer, next, nil
}

// putBuckets stores buckets' states in tx.
func putBuckets(ctx context.Context, tx *writeTx, next []store.Bucket) error {
	for _, b := range next {
		_, err := tx.ExecContext(ctx, bucketPutSQL, sql.Named("name", b.Name), sql.Named("tokens", b.Tokens),
			sql.Named("updated_at", sqlrow.Nanos(b.Updated)), sql.Named("blocked_until", sqlrow.Nanos(b.BlockedUntil)))
		if err != nil {
			return err
		}
	}
	return nil
}

// DrainBuckets empties the named buckets until p.Until.
func (s *Store) DrainBuckets(ctx context.Context, p store.DrainBucketsParams) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		for _, name := range p.Names {
			if _, err := tx.ExecContext(ctx, bucketDrainSQL, sql.Named("name", name),
				sql.Named("until", sqlrow.Nanos(p.Until))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drain buckets: %w", err)
	}
	return nil
}
