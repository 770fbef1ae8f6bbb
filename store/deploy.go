package store

import (
	"context"
	"time"
)

// MoveVersionParams moves a run its worker holds to another version of its
// agent, one that declares it may continue the run's version
// (belay.Agent.Continues), fenced by the lease: the run must be at From.
type MoveVersionParams struct {
	Fence Fence
	Now   time.Time
	From  string
	To    string
	// Events are appended in the same transaction.
	Events []Event
}

// VersionCount is how many runs that have not ended are on one version of
// an agent.
type VersionCount struct {
	Agent   string
	Version string
	Runs    int64
}

// Deployer is a store that moves runs between agent versions as a worker
// takes them and counts runs per version, so that runs a deploy stranded
// are seen. Both drivers are.
type Deployer interface {
	// MoveVersion moves the run to p.To; ErrLeaseLost if the fence does not
	// hold or the run is not at p.From, and nothing is written.
	MoveVersion(ctx context.Context, p MoveVersionParams) error
	// RunsByVersion counts the runs not ended by agent and version, over
	// every tenant, ordered by agent and version.
	RunsByVersion(ctx context.Context) ([]VersionCount, error)
}
