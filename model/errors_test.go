package model

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"7"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
		{nil, 0},
	} {
		if got := RetryAfter(tc.header, now); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestClassOfStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   ErrorClass
	}{
		{429, ClassRateLimited},
		{529, ClassOverloaded},
		{503, ClassOverloaded},
		{500, ClassServer},
		{502, ClassServer},
		{504, ClassServer},
		{408, ClassNetwork},
		{400, ClassBadRequest},
		{401, ClassBadRequest},
		{404, ClassBadRequest},
		{413, ClassBadRequest},
	} {
		if got := ClassOfStatus(tc.status); got != tc.want {
			t.Errorf("ClassOfStatus(%d) = %s, want %s", tc.status, got, tc.want)
		}
	}
}
