package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/bucket_create.sql
	bucketCreateSQL string
	//go:embed query/bucket_get.sql
	bucketGetSQL string
	//go:embed query/bucket_put.sql
	bucketPutSQL string
	//go:embed query/bucket_drain.sql
	bucketDrainSQL string
)

var _ store.RateLimiter = (*Store)(nil)

// TakeFromBuckets takes units from every bucket of p, or from none, in one
// transaction that holds the buckets' rows, locked in name order, so that
// workers taking at once take in turn.
func (s *Store) TakeFromBuckets(ctx context.Context, p store.TakeFromBucketsParams) (store.BucketAnswer, error) {
	if err := p.Check(); err != nil {
		return store.BucketAnswer{}, fmt.Errorf("take from buckets: %w", err)
	}
	p.Takes = p.SortedTakes()
	var answer store.BucketAnswer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur := make([]store.Bucket, len(p.Takes))
		found := make([]bool, len(p.Takes))
		for i, t := range p.Takes {
			if _, err := tx.Exec(ctx, bucketCreateSQL, namedArgs{"name": t.Name, "burst": t.Burst, "now": sqlrow.Nanos(p.Now)}); err != nil {
				return err
			}
			var updated, blocked int64
			if err := tx.QueryRow(ctx, bucketGetSQL, namedArgs{"name": t.Name}).Scan(&cur[i].Tokens, &updated, &blocked); err != nil {
				return err
			}
			cur[i].Updated, cur[i].BlockedUntil, found[i] = sqlrow.Time(updated), sqlrow.Time(blocked), true
		}
		var next []store.Bucket
		answer, next = store.Take(p, cur, found)
		for _, b := range next {
			_, err := tx.Exec(ctx, bucketPutSQL, namedArgs{"name": b.Name, "tokens": b.Tokens,
				"updated_at": sqlrow.Nanos(b.Updated), "blocked_until": sqlrow.Nanos(b.BlockedUntil)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.BucketAnswer{}, fmt.Errorf("take from buckets: %w", storeError(err))
	}
	return answer, nil
}

// DrainBuckets empties the named buckets until p.Until.
func (s *Store) DrainBuckets(ctx context.Context, p store.DrainBucketsParams) error {
	b := &pgx.Batch{}
	for _, name := range p.Names {
		b.Queue(bucketDrainSQL, namedArgs{"name": name, "until": sqlrow.Nanos(p.Until)})
	}
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("drain buckets: %w", err)
	}
	return nil
}
